// phase.cu: what a boundary between the dependent phases of a decode step
// costs, measured on a phase shaped like a decode mat-vec (TestMeasurePhases):
// every block stages the whole vector the phase before wrote, then each
// warp takes a row of the phase's own n x n int8 matrix (n bytes, as a
// 4-bit row of 2n weights; a matrix a phase, as a step's layers each read
// their own) and writes one element of the next vector. The same phases run
// as one launch each (phase_step, in a graph, with or without programmatic
// dependent launch) or inside one persistent launch whose blocks meet at a
// grid-wide barrier between phases: phase_run_fence with moe_layer's
// (device.h's grid_sync: fences around a relaxed arrival), phase_run_acqrel
// with the arrival and the wait as release and acquire operations. Whether a persistent decode
// kernel can beat kernel boundaries starts with these numbers.
#include "device.h"

#define PHASE_THREADS 256

// phase_once computes y[r] = scale·Σ_k w[r][k]·x[k] for the rows r this
// block's warps take (warp g of the grid: rows g, g + warps, ...), x staged
// in xs first. x is read through L2 (ld.global.cg): in the persistent
// kernels other blocks wrote it in this launch. Every variant runs this,
// so their outputs are the same bits.
static __device__ __forceinline__ void phase_once(const signed char* __restrict__ w, const float* x, float* y,
                                                  int n, float scale, float* xs) {
  const int tid = PETAL_TID_X();
  for (int i = tid; i < n; i += PHASE_THREADS) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(x + i));
    xs[i] = v;
  }
  __syncthreads();
  const int lane = tid & 31, warps = PETAL_NCTAID_X() * (PHASE_THREADS / 32);
  for (int r = PETAL_BID_X() * (PHASE_THREADS / 32) + (tid >> 5); r < n; r += warps) {
    const signed char* row = w + (long long)r * n;
    float acc = 0.f;
    for (int k = lane * 16; k < n; k += 32 * 16) {
      const u32x4 q = ld_stream_16(row + k);
      const u32 qs[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
#pragma unroll
        for (int b = 0; b < 4; b++) acc += (float)(signed char)(qs[j] >> (8 * b)) * xs[k + 4 * j + b];
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r] = acc * scale;
  }
  __syncthreads();  // xs is staged again by the next phase
}

// phase_prefetch asks L2 for the rows of w this block's warps will take,
// without waiting for them: what a kernel can do before it waits for the
// phase before (its weights do not depend on it).
static __device__ __forceinline__ void phase_prefetch(const signed char* __restrict__ w, int n) {
  const int lane = PETAL_TID_X() & 31, warps = PETAL_NCTAID_X() * (PHASE_THREADS / 32);
  for (int r = PETAL_BID_X() * (PHASE_THREADS / 32) + (PETAL_TID_X() >> 5); r < n; r += warps) {
    for (int k = lane * 16; k < n; k += 32 * 16) prefetch_l2(w + (long long)r * n + k);
  }
}

// phase_step: one phase, y from x. Launched once a phase.
extern "C" __global__ void __launch_bounds__(PHASE_THREADS)
    phase_step(const signed char* __restrict__ w, const float* x, float* y, int n, float scale) {
  pdl_begin();
  extern __shared__ float xs[];
  phase_once(w, x, y, n, scale, xs);
}

// phase_step_pre: phase_step with its rows asked of L2 before the wait.
extern "C" __global__ void __launch_bounds__(PHASE_THREADS)
    phase_step_pre(const signed char* __restrict__ w, const float* x, float* y, int n, float scale) {
  phase_prefetch(w, n);
  pdl_begin();
  extern __shared__ float xs[];
  phase_once(w, x, y, n, scale, xs);
}

// phase_sync_acqrel: the arrival an acq_rel atomic (it publishes what the
// block wrote before the barrier, bar.sync making it cumulative), the wait
// acquire loads of the generation; no separate fences.
static __device__ __forceinline__ void phase_sync_acqrel(u32* bar, u32 nblocks) {
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    u32 g, old, now;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(g) : "l"(bar + 1) : "memory");
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(bar), "r"(nblocks - 1) : "memory");
    if (old == nblocks - 1) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar + 1) : "memory");
    } else {
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(bar + 1) : "memory");
      } while (now == g);
    }
  }
  __syncthreads();
}

// phase_run_fence, phase_run_acqrel: phases phases in one launch, phase p
// with the matrix at w + p·n·n, x and y alternating (phase p reads a if p
// is even, else b, and writes the other), the blocks meeting at a barrier
// between phases. phase_run_acqrel_pre asks L2 for its next phase's rows
// before each barrier. Every block must be resident at once: a grid of at
// most the blocks that fit. bar: two u32, zero before the first launch,
// left ready for the next.
#define PHASE_RUN(NAME, SYNC, PRE)                                                                           \
  extern "C" __global__ void __launch_bounds__(PHASE_THREADS)                                                \
      NAME(const signed char* __restrict__ w, float* a, float* b, int n, float scale, int phases, u32* bar) { \
    pdl_wait();                                                                                              \
    extern __shared__ float xs[];                                                                            \
    for (int p = 0; p < phases; p++) {                                                                       \
      const signed char* wp = w + (long long)p * n * n;                                                      \
      if (p > 0) {                                                                                           \
        if (PRE) phase_prefetch(wp, n);                                                                      \
        SYNC(bar, PETAL_NCTAID_X());                                                                         \
      }                                                                                                      \
      phase_once(wp, p & 1 ? b : a, p & 1 ? a : b, n, scale, xs);                                            \
    }                                                                                                        \
  }
PHASE_RUN(phase_run_fence, grid_sync, false)
PHASE_RUN(phase_run_acqrel, phase_sync_acqrel, false)
PHASE_RUN(phase_run_acqrel_pre, phase_sync_acqrel, true)
