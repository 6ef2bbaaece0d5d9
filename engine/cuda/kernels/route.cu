// route.cu: the MoE router of one decoded token (spec 2.8 steps 1-2) in one
// launch: logits = router·x (MLX affine 4- or 8-bit in groups of 64,
// float32), then, in the block that finishes last, the ROUTE_TOPK largest
// logits (the lower expert id first on exact ties), and their softmax
// weights, renormalised over the selected experts or not. The ids and
// weights land in the device buffers the MoE kernels (moe.cu) read, so a
// decode step routes without the host.
//
// Blocks write their logits to a scratch vector; the last block to finish
// (a ticket from a counter that wraps by itself, so the launch can be
// replayed in a graph) reads them all back and selects. Selecting on the
// logits, not on float32 probabilities, keeps the order of the float64
// reference: exp is monotonic, but float32 exp of two close logits can tie.
#include "rowmath.h"

#define ROUTE_WARPS 8

static __device__ __forceinline__ float route_exp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}

// atomic_inc_wrap returns *p and stores (*p >= limit) ? 0 : *p + 1.
static __device__ __forceinline__ u32 atomic_inc_wrap(u32* p, u32 limit) {
  u32 old;
  asm volatile("atom.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(limit) : "memory");
  return old;
}

static __device__ __forceinline__ void fence_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

static __device__ __forceinline__ int shfl_xor_i(int v, int m) {
  return __nvvm_shfl_sync_bfly_i32(0xffffffffu, v, m, 0x1f);
}

// group_load fetches one group of 64 of a row: 8 words of 4-bit codes or
// 16 of 8-bit ones at p (w[2], w[3] unused for 4 bits).
template <int BITS>
static __device__ __forceinline__ void group_load(const u32* __restrict__ p, u32x4* w) {
#pragma unroll
  for (int i = 0; i < BITS / 2; i++) w[i] = ld_stream_16(p + 4 * i);
}

// group_dot is s*sum(q*x) + b*sum(x) over one group loaded by group_load, x
// the matching 64 inputs.
template <int BITS>
static __device__ __forceinline__ float group_dot(const u32x4* w, const float* x, float s, float b) {
  float acc = 0.f, xs = 0.f;
  constexpr int per = 32 / BITS;          // codes per word
  constexpr u32 mask = (1u << BITS) - 1u;
#pragma unroll
  for (int i = 0; i < BITS / 2; i++) {
    const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
    for (int k = 0; k < 4 * per; k++) {
      // A code OR-ed into 2^23's bits is the float 2^23 + q, exactly.
      const float q = __uint_as_float(((ws[k / per] >> (BITS * (k % per))) & mask) | 0x4B000000u) - 8388608.f;
      const float xv = x[4 * per * i + k];
      acc += q * xv;
      xs += xv;
    }
  }
  return s * acc + b * xs;
}

#define ROUTE_NONE 0x7fffffff

// route_better says whether expert e of logit v goes before expert bi of
// logit bv (ROUTE_NONE: no expert): a number before NaN, a larger logit
// first, the lower id on ties (two NaNs too), so that every lane of a warp
// agrees on the order.
static __device__ __forceinline__ bool route_better(float v, int e, float bv, int bi) {
  if (e == ROUTE_NONE || bi == ROUTE_NONE) return bi == ROUTE_NONE && e != ROUTE_NONE;
  const bool vn = v != v, bn = bv != bv;
  if (vn != bn) return bn;
  if (!vn && v != bv) return v > bv;
  return e < bi;
}

// RouteNorm is the add-and-norm before the router (the post-attention
// norm: h += delta where delta is given, x = h/rms(h)·w), done by route_norm
// in the same launch: every block computes x from h and delta itself, in
// add_rmsnorm's order with as many threads (ROUTE_WARPS*32 = 256), so x is
// bit for bit add_rmsnorm's; the block that finishes last, once every block
// has read h, writes h and x back, for the MoE that reads x next.
struct RouteNorm {
  float* h;
  const float* delta;
  const float* w;
  float* out;
  float eps;
};

// route: grid of any size, topk <= 32, experts <= 1024, ROUTE_WARPS*32 threads, (cols + experts) floats
// of dynamic shared memory; counter a u32 the host zeroes once. With NORM, x is computed from nrm.
template <int BITS, bool NORM>
static __device__ __forceinline__ void route(const u32* __restrict__ words, const u16* __restrict__ scales,
                                             const u16* __restrict__ biases, const float* __restrict__ x,
                                             float* logits, int* ids, float* wts, u32* counter, int experts,
                                             int cols, int topk, int normalize, RouteNorm nrm) {
  extern __shared__ float rsm[];
  float* xs = rsm;
  float* ls = rsm + cols;
  __shared__ int last;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int groups = cols / 64;
  const int wpg = BITS * 2;  // words per group
  const long long wpr = (long long)groups * wpg;
  // The weights do not wait for x: this lane's first group is on its way
  // while x is made.
  const int r0 = PETAL_BID_X() * ROUTE_WARPS + warp;
  u32x4 w0[4];
  float s0 = 0.f, b0 = 0.f;
  if (r0 < experts && lane < groups) {
    group_load<BITS>(words + r0 * wpr + lane * wpg, w0);
    s0 = bf16_to_f32(scales[(long long)r0 * groups + lane]), b0 = bf16_to_f32(biases[(long long)r0 * groups + lane]);
  }
  if (NORM) {
    __shared__ float red[32];
    float ss = 0.f;
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) {
      float v = nrm.h[i];
      if (nrm.delta) v += nrm.delta[i];
      xs[i] = v;
      ss += v * v;
    }
    ss = block_sum(ss, red);
    const float inv = 1.f / __builtin_sqrtf(ss / cols + nrm.eps);
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) xs[i] = xs[i] * inv * nrm.w[i];
  } else {
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) xs[i] = x[i];
  }
  __syncthreads();
  for (int r = r0; r < experts; r += PETAL_NCTAID_X() * ROUTE_WARPS) {
    float acc = 0.f;
    for (int g = lane; g < groups; g += 32) {
      if (r != r0 || g != lane) {
        const long long gi = (long long)r * groups + g;
        group_load<BITS>(words + r * wpr + g * wpg, w0);
        s0 = bf16_to_f32(scales[gi]), b0 = bf16_to_f32(biases[gi]);
      }
      acc += group_dot<BITS>(w0, xs + 64 * g, s0, b0);
    }
    acc = warp_sum(acc);
    if (lane == 0) logits[r] = acc;
  }
  // Publish this block's logits, then take a ticket: the last block selects.
  // (The barrier orders the block's writes before thread 0's fence, which
  // is cumulative: one fence per block, not one per thread.)
  __syncthreads();
  if (tid == 0) {
    fence_gpu();
    last = atomic_inc_wrap(counter, PETAL_NCTAID_X() - 1) == PETAL_NCTAID_X() - 1;
    fence_gpu();
  }
  __syncthreads();
  if (!last) return;
  if (NORM) {
    // every block has read h: the sum and the normed x go back
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) {
      if (nrm.delta) nrm.h[i] += nrm.delta[i];
      nrm.out[i] = xs[i];
    }
  }
  for (int e = tid; e < experts; e += ROUTE_WARPS * 32) ls[e] = ((volatile float*)logits)[e];
  __syncthreads();
  if (warp != 0) return;
  // Selection by warp 0 alone: topk rounds of a warp-wide choice, each lane
  // offering its best untaken expert of e = lane, lane+32, ... (a larger
  // logit, or an equal one with the lower id); NaN is never chosen over a
  // number, and an expert is always chosen, so the ids stay in range.
  __shared__ float selV[32];
  __shared__ int selI[32];
  u32 taken = 0;  // bit i: expert lane + 32i is chosen
  for (int k = 0; k < topk; k++) {
    float bv = 0.f;
    int bi = ROUTE_NONE;
    for (int i = 0, e = lane; e < experts; i++, e += 32) {
      const float v = ls[e];
      if (!(taken >> i & 1u) && route_better(v, e, bv, bi)) bv = v, bi = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = shfl_xor_i(bi, o);
      if (route_better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
    if (lane == 0) selV[k] = bv, selI[k] = bi;
  }
  __syncwarp();
  const float m = selV[0];
  const float mine = lane < topk ? route_exp(selV[lane] - m) : 0.f;
  float denom = 0.f;
  if (normalize) {
    denom = warp_sum(mine);
  } else {
    for (int e = lane; e < experts; e += 32) denom += route_exp(ls[e] - m);
    denom = warp_sum(denom);
  }
  if (lane < topk) {
    ids[lane] = selI[lane];
    wts[lane] = mine / denom;
  }
}

// Entry points route4 and route8, by the router's bits.
#define ROUTE(BITS, NAME)                                                                                    \
  extern "C" __global__ void __launch_bounds__(ROUTE_WARPS * 32)                                             \
      NAME(const u32* words, const u16* scales, const u16* biases, const float* x, float* logits, int* ids, \
           float* wts, u32* counter, int experts, int cols, int topk, int normalize) { pdl_begin();          \
    route<BITS, false>(words, scales, biases, x, logits, ids, wts, counter, experts, cols, topk, normalize, \
                       RouteNorm{});                                                                        \
  }
ROUTE(4, route4)
ROUTE(8, route8)

// Entry points route_norm4 and route_norm8: the add-and-norm, then the
// router, over h, delta (may be null), the norm's weight w and eps; x is
// written to out.
#define ROUTE_NORM(BITS, NAME)                                                                                \
  extern "C" __global__ void __launch_bounds__(ROUTE_WARPS * 32)                                              \
      NAME(const u32* words, const u16* scales, const u16* biases, float* h, const float* delta,             \
           const float* w, float* out, float eps, float* logits, int* ids, float* wts, u32* counter,        \
           int experts, int cols, int topk, int normalize) { pdl_begin();                                   \
    route<BITS, true>(words, scales, biases, nullptr, logits, ids, wts, counter, experts, cols, topk,       \
                      normalize, RouteNorm{h, delta, w, out, eps});                                          \
  }
ROUTE_NORM(4, route_norm4)
ROUTE_NORM(8, route_norm8)
