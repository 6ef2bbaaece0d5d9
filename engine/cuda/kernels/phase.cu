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
// with the arrival and the wait as release and acquire operations,
// phase_run_count with a counter the blocks add to and watch. The _reg forms
// hold the next phase's row in registers, loaded before the wait (or the
// barrier): what a decode kernel could do with weights that do not depend
// on the phase before. Whether a persistent decode kernel can beat kernel
// boundaries starts with these numbers.
#include "cluster.h"

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

// PHASE_ROW_LOADS is a lane's 16-byte loads of a row in the _reg forms:
// they take n = 32·16·PHASE_ROW_LOADS and a warp for every row.
#define PHASE_ROW_LOADS 4

// phase_row_load loads the lane's part of its warp's row of w into
// registers (asm volatile: the loads stay where they are written, ahead of
// the wait that follows).
static __device__ __forceinline__ void phase_row_load(const signed char* __restrict__ w, int n,
                                                      u32x4 (&q)[PHASE_ROW_LOADS]) {
  const int tid = PETAL_TID_X(), lane = tid & 31;
  const int r = PETAL_BID_X() * (PHASE_THREADS / 32) + (tid >> 5);
  if (r >= n) return;
  const signed char* row = w + (long long)r * n + lane * 16;
#pragma unroll
  for (int j = 0; j < PHASE_ROW_LOADS; j++) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(q[j].x), "=r"(q[j].y), "=r"(q[j].z), "=r"(q[j].w)
                 : "l"(row + j * 32 * 16));
  }
}

// phase_once_reg is phase_once on a row already in registers: the same
// products in the same order, so the same bits.
// V4 stages x in 16-byte loads, all of a thread's issued before any is
// stored (n = 2048: two a thread), where the plain form loads and stores
// four bytes at a time: how much of a phase is x's staging.
template <bool V4 = false>
static __device__ __forceinline__ void phase_once_reg(const u32x4 (&q)[PHASE_ROW_LOADS], const float* x, float* y,
                                                      int n, float scale, float* xs) {
  const int tid = PETAL_TID_X();
  if constexpr (V4) {
    constexpr int PER = 2;  // n / 4 / PHASE_THREADS at n = 2048
    u32x4 v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
      const int i = 4 * (tid + j * PHASE_THREADS);
      asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w)
                   : "l"(x + (i < n ? i : 0)));
    }
#pragma unroll
    for (int j = 0; j < PER; j++) {
      const int i = 4 * (tid + j * PHASE_THREADS);
      if (i < n) *(u32x4*)(xs + i) = v[j];
    }
  } else {
    for (int i = tid; i < n; i += PHASE_THREADS) {
      float v;
      asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(x + i));
      xs[i] = v;
    }
  }
  __syncthreads();
  const int lane = tid & 31, r = PETAL_BID_X() * (PHASE_THREADS / 32) + (tid >> 5);
  if (r < n) {
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < PHASE_ROW_LOADS; i++) {
      const int k = lane * 16 + i * 32 * 16;
      const u32 qs[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
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
  __syncthreads();
}

// phase_step_pre_early: phase_step_pre letting the next phase launch at its
// start, so that the next phase's blocks, where they fit beside this
// one's, ask for their rows while this one runs.
extern "C" __global__ void __launch_bounds__(PHASE_THREADS, 4)
    phase_step_pre_early(const signed char* __restrict__ w, const float* x, float* y, int n, float scale) {
  phase_prefetch(w, n);
  pdl_trigger();
  pdl_begin();
  extern __shared__ float xs[];
  phase_once(w, x, y, n, scale, xs);
}

// phase_step_reg: its row in registers before the wait, the next phase let
// launch at its start (four blocks a multiprocessor: two phases' blocks fit
// at once); phase_step_reg_v4 the same with x staged in 16-byte loads.
template <bool V4>
static __device__ __forceinline__ void phase_step_in_regs(const signed char* __restrict__ w, const float* x, float* y,
                                                          int n, float scale) {
  u32x4 q[PHASE_ROW_LOADS];
  phase_row_load(w, n, q);
  pdl_trigger();
  pdl_begin();
  extern __shared__ float xs[];
  phase_once_reg<V4>(q, x, y, n, scale, xs);
}
extern "C" __global__ void __launch_bounds__(PHASE_THREADS, 4)
    phase_step_reg(const signed char* __restrict__ w, const float* x, float* y, int n, float scale) {
  phase_step_in_regs<false>(w, x, y, n, scale);
}
extern "C" __global__ void __launch_bounds__(PHASE_THREADS, 4)
    phase_step_reg_v4(const signed char* __restrict__ w, const float* x, float* y, int n, float scale) {
  phase_step_in_regs<true>(w, x, y, n, scale);
}

// phase_step_smem: phase_step_reg with its rows copied into shared memory
// (cp.async, which holds no registers while in flight) before the wait, as
// a kernel whose share of the weights is too large for registers would:
// dynamic shared memory of 4n bytes for x, then 8 rows of n bytes.
extern "C" __global__ void __launch_bounds__(PHASE_THREADS, 4)
    phase_step_smem(const signed char* __restrict__ w, const float* x, float* y, int n, float scale) {
  extern __shared__ float xs[];
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int r = PETAL_BID_X() * (PHASE_THREADS / 32) + warp;
  const signed char* ws = (const signed char*)(xs + n) + warp * n + lane * 16;
  if (r < n) {
    const signed char* row = w + (long long)r * n + lane * 16;
#pragma unroll
    for (int j = 0; j < PHASE_ROW_LOADS; j++) cp_async16(smem_u32(ws + j * 32 * 16), row + j * 32 * 16, true);
  }
  cp_commit();
  pdl_trigger();
  pdl_begin();
  cp_wait<0>();  // a lane reads back only its own copies
  u32x4 q[PHASE_ROW_LOADS];
#pragma unroll
  for (int j = 0; j < PHASE_ROW_LOADS; j++) {
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(q[j].x), "=r"(q[j].y), "=r"(q[j].z), "=r"(q[j].w)
                 : "r"(smem_u32(ws + j * 32 * 16)));
  }
  phase_once_reg(q, x, y, n, scale, xs);
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
// phase_sync_count: each block adds one to a counter with release
// semantics and watches it with acquire loads until all nblocks of this
// barrier have arrived (target: nblocks times the barriers so far), with
// no round trip for the arrival and no generation word.
static __device__ __forceinline__ void phase_sync_count(u32* counter, u32 target) {
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    u32 now;
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
    } while (now < target);
  }
  __syncthreads();
}

// phase_run_end: the last block to leave a phase_run_count launch zeroes
// its counter and itself (bar[2], bar[3]), so the next launch, which
// starts after this one ends, counts from 0.
static __device__ __forceinline__ void phase_run_end(u32* bar) {
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    u32 old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(bar + 3) : "memory");
    if (old == PETAL_NCTAID_X() - 1) {
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(bar + 2) : "memory");
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(bar + 3) : "memory");
    }
  }
}

// phase_run_acqrel_reg, phase_run_count_reg: the persistent launch with
// the next phase's row loaded into registers before each barrier. bar:
// four u32 (the acq/rel barrier's two, the counter's two), zero before the
// first launch.
#define PHASE_RUN_REG(NAME, COUNT)                                                                           \
  extern "C" __global__ void __launch_bounds__(PHASE_THREADS)                                                \
      NAME(const signed char* __restrict__ w, float* a, float* b, int n, float scale, int phases, u32* bar) { \
    pdl_wait();                                                                                              \
    extern __shared__ float xs[];                                                                            \
    u32x4 q[PHASE_ROW_LOADS];                                                                                \
    phase_row_load(w, n, q);                                                                                 \
    for (int p = 0; p < phases; p++) {                                                                       \
      if (p > 0) {                                                                                           \
        if (COUNT)                                                                                           \
          phase_sync_count(bar + 2, (u32)p * PETAL_NCTAID_X());                                              \
        else                                                                                                 \
          phase_sync_acqrel(bar, PETAL_NCTAID_X());                                                          \
      }                                                                                                      \
      phase_once_reg(q, p & 1 ? b : a, p & 1 ? a : b, n, scale, xs);                                         \
      if (p + 1 < phases) phase_row_load(w + (long long)(p + 1) * n * n, n, q);                              \
    }                                                                                                        \
    if (COUNT) phase_run_end(bar);                                                                           \
  }

PHASE_RUN(phase_run_fence, grid_sync, false)
PHASE_RUN(phase_run_acqrel, phase_sync_acqrel, false)
PHASE_RUN(phase_run_acqrel_pre, phase_sync_acqrel, true)
PHASE_RUN_REG(phase_run_acqrel_reg, false)
PHASE_RUN_REG(phase_run_count_reg, true)

// Barriers without one word every block adds to (phase_sync_count's 264
// atomics on one address arrive in series): PHASE_SPIN polls at most, then
// the block gives up waiting for the rest of the launch, so that a grid
// whose blocks are not all resident fails the test's check instead of
// hanging.
#define PHASE_SPIN (1 << 20)

// warp_all: whether p holds in every lane of the (whole) warp.
static __device__ __forceinline__ bool warp_all(bool p) {
  int r;
  asm volatile("{\n.reg .pred a, b;\nsetp.ne.b32 a, %1, 0;\nvote.sync.all.pred b, a, 0xffffffff;\nselp.s32 %0, 1, 0, b;\n}"
               : "=r"(r)
               : "r"((int)p));
  return r != 0;
}

// phase_watch_flags: warp 0 polls the nflags words at flags (acquire
// loads) until each is at least target (a wrapping compare); false if it
// gave up.
static __device__ __forceinline__ bool phase_watch_flags(const u32* flags, int nflags, u32 target) {
  const int lane = PETAL_TID_X() & 31;
  for (int spin = 0; spin < PHASE_SPIN; spin++) {
    bool ok = true;
    for (int i = lane; i < nflags; i += 32) {
      u32 v;
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + i) : "memory");
      ok = ok && (int)(v - target) >= 0;
    }
    if (warp_all(ok)) return true;
  }
  return false;
}

static __device__ __forceinline__ u32 phase_ld_relaxed(const u32* p) {
  u32 v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// phase_run_flags_reg: phase_run_count_reg's launch with a word a block:
// after its part of a phase, a block's thread 0 stores the phase's number
// there (release), and its warp 0 watches every block's word (acquire).
// The words only grow: a launch reads its block's word first and counts
// from it (every word the same when a launch ends). bar + 64: a word a
// block, zero before the first launch.
//
// phase_run_clflags_reg: the same between the leaders of thread-block
// clusters (launched with Stream.LaunchCluster): a cluster's blocks meet at
// the cluster barrier, its leader (rank 0) stores and watches a word a
// cluster (from bar + 64 + 1024 for clusters of 4, + 2048 for 8), and the
// cluster meets again. phase_run_clcount_reg: the leaders
// add to phase_sync_count's counter instead (bar + 2, reset at the end as
// phase_run_count_reg's). The cluster barrier's release and acquire carry
// the blocks' writes to their leader's release and from its acquire.
template <int FORM, bool V4>
static __device__ __forceinline__ void phase_run_watched(const signed char* __restrict__ w, float* a, float* b, int n,
                                                         float scale, int phases, u32* bar, float* xs) {
  constexpr int ALL = 0, CLUSTER_FLAGS = 1, CLUSTER_COUNT = 2;
  const int tid = PETAL_TID_X();
  const bool cl = FORM != ALL;
  const u32 csize = cl ? cluster_blocks() : 1, me = cl ? PETAL_BID_X() / csize : PETAL_BID_X();
  const u32 members = PETAL_NCTAID_X() / csize;
  const bool leader = !cl || cluster_rank() == 0;
  u32* flags = bar + 64 + (cl ? 1024 * (csize == 8 ? 2 : 1) : 0);  // a region a cluster size: each launch's words start equal
  pdl_wait();
  u32x4 q[PHASE_ROW_LOADS];
  phase_row_load(w, n, q);
  const u32 base = FORM == CLUSTER_COUNT ? 0 : phase_ld_relaxed(flags + me);
  bool live = true;  // warp 0 of a leader: not yet given up
  for (int p = 0; p < phases; p++) {
    if (p > 0) {
      if (cl)
        cluster_sync();
      else
        __syncthreads();
      if (leader && tid < 32) {
        if (FORM == CLUSTER_COUNT) {
          if (tid == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar + 2) : "memory");
          for (int spin = 0; live && spin < PHASE_SPIN; spin++) {
            if (warp_all(phase_ld_relaxed(bar + 2) >= (u32)p * members)) break;
            if (spin == PHASE_SPIN - 1) live = false;
          }
          asm volatile("fence.acq_rel.gpu;" ::: "memory");
        } else {
          if (tid == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + me), "r"(base + p) : "memory");
          if (live) live = phase_watch_flags(flags, members, base + p);
        }
      }
      if (cl)
        cluster_sync();
      else
        __syncthreads();
    }
    phase_once_reg<V4>(q, p & 1 ? b : a, p & 1 ? a : b, n, scale, xs);
    if (p + 1 < phases) phase_row_load(w + (long long)(p + 1) * n * n, n, q);
  }
  if (FORM == CLUSTER_COUNT) phase_run_end(bar);
}

#define PHASE_RUN_WATCHED(NAME, FORM, V4)                                                                    \
  extern "C" __global__ void __launch_bounds__(PHASE_THREADS)                                                \
      NAME(const signed char* __restrict__ w, float* a, float* b, int n, float scale, int phases, u32* bar) { \
    extern __shared__ float xs[];                                                                            \
    phase_run_watched<FORM, V4>(w, a, b, n, scale, phases, bar, xs);                                         \
  }
PHASE_RUN_WATCHED(phase_run_flags_reg, 0, false)
PHASE_RUN_WATCHED(phase_run_clflags_reg, 1, false)
PHASE_RUN_WATCHED(phase_run_clcount_reg, 2, false)
PHASE_RUN_WATCHED(phase_run_clflags_reg_v4, 1, true)

// What a reduction of partial vectors across blocks costs without a
// barrier (TestMeasureSplitReduce): a launch that splits a mat-vec over its
// inner dimension (the experts' down projection over their hidden rows,
// each block the products of its slice) leaves each block a partial of the
// whole output, which atomics can sum where it is written. Block t reads
// row t of part (n floats, standing for the partial it computed) and:
//   phase_reduce_store  stores it to row t of out (no sum: the baseline);
//   phase_reduce_u64    adds it into acc as 64-bit fixed point, 2^-32 units
//                       (red.add.u64): integer sums are the same bits in
//                       any order, so the result does not depend on which
//                       block arrives first;
//   phase_reduce_f32    red.add.f32 an element (order-dependent rounding).
// (red.add.v4.f32, four floats an operation, needs PTX 8.1; the PTX here
// is 8.0.)
#define PHASE_FIX_ONE 4294967296.0f  // 2^32

struct __attribute__((aligned(16))) PhaseF4 {
  float x, y, z, w;
};

extern "C" __global__ void __launch_bounds__(PHASE_THREADS)
    phase_reduce_store(const float* __restrict__ part, float* __restrict__ out, int n) {
  pdl_begin();
  const float* src = part + (long long)PETAL_BID_X() * n;
  float* dst = out + (long long)PETAL_BID_X() * n;
  for (int i = PETAL_TID_X() * 4; i < n; i += PHASE_THREADS * 4) {
    const PhaseF4 v = *(const PhaseF4*)(src + i);
    *(PhaseF4*)(dst + i) = v;
  }
}

static __device__ __forceinline__ void red_add_u64(unsigned long long* p, float v) {
  long long f;
  asm("cvt.rni.s64.f32 %0, %1;" : "=l"(f) : "f"(v * PHASE_FIX_ONE));
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(f) : "memory");
}

// phase_reduce_u64 takes copies: block b adds into copy b mod copies of
// the sums (acc + (b mod copies)·n), so that each sum has 1/copies of the
// blocks adding into it: whether the atomics' time is the blocks adding
// into one address in turn, or all the atomics together.
extern "C" __global__ void __launch_bounds__(PHASE_THREADS)
    phase_reduce_u64(const float* __restrict__ part, unsigned long long* acc, int n, int copies) {
  pdl_begin();
  const float* src = part + (long long)PETAL_BID_X() * n;
  acc += (long long)(PETAL_BID_X() % copies) * n;
  for (int i = PETAL_TID_X() * 4; i < n; i += PHASE_THREADS * 4) {
    const PhaseF4 v = *(const PhaseF4*)(src + i);
    red_add_u64(acc + i, v.x);
    red_add_u64(acc + i + 1, v.y);
    red_add_u64(acc + i + 2, v.z);
    red_add_u64(acc + i + 3, v.w);
  }
}

extern "C" __global__ void __launch_bounds__(PHASE_THREADS)
    phase_reduce_f32(const float* __restrict__ part, float* acc, int n) {
  pdl_begin();
  const float* src = part + (long long)PETAL_BID_X() * n;
  for (int i = PETAL_TID_X() * 4; i < n; i += PHASE_THREADS * 4) {
    const PhaseF4 v = *(const PhaseF4*)(src + i);
    asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(acc + i), "f"(v.x) : "memory");
    asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(acc + i + 1), "f"(v.y) : "memory");
    asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(acc + i + 2), "f"(v.z) : "memory");
    asm volatile("red.relaxed.gpu.global.add.f32 [%0], %1;" ::"l"(acc + i + 3), "f"(v.w) : "memory");
  }
}
