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

// group_dot is s*sum(q*x) + b*sum(x) over one group of 64 of a row: 8 words
// of 4-bit codes or 16 of 8-bit ones at p, x the matching 64 inputs.
template <int BITS>
static __device__ __forceinline__ float group_dot(const u32* __restrict__ p, const float* x, float s, float b) {
  float acc = 0.f, xs = 0.f;
  if (BITS == 8) {
    u32x4 w[4] = {ld_stream_16(p), ld_stream_16(p + 4), ld_stream_16(p + 8), ld_stream_16(p + 12)};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
      for (int k = 0; k < 16; k++) {
        // A byte OR-ed into 2^23's bits is the float 2^23 + q, exactly.
        const float q = __uint_as_float(((ws[k >> 2] >> (8 * (k & 3))) & 0xFFu) | 0x4B000000u) - 8388608.f;
        const float xv = x[16 * i + k];
        acc += q * xv;
        xs += xv;
      }
    }
  } else {
    u32x4 w[2] = {ld_stream_16(p), ld_stream_16(p + 4)};
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
      for (int k = 0; k < 32; k++) {
        const float q = __uint_as_float(((ws[k >> 3] >> (4 * (k & 7))) & 0xFu) | 0x4B000000u) - 8388608.f;
        const float xv = x[32 * i + k];
        acc += q * xv;
        xs += xv;
      }
    }
  }
  return s * acc + b * xs;
}

// route_key orders logits as ints: nan_low_key's order (rowmath.h) as a
// signed int, a larger logit a larger key, -0 as +0, NaN below every
// number. (Kept apart from nan_low_key: the decode kernel's PTX with it
// has not run on a GPU yet.)
static __device__ __forceinline__ int route_key(float v) {
  if (v != v) return (int)0x80000000;
  const int b = (int)__float_as_uint(v + 0.f);
  return b >= 0 ? b : (int)(0x80000000u - (u32)b);
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

// route: grid of any size, topk <= 32, experts <= 1024, ROUTE_WARPS*32 threads, cols + 2·experts floats
// of dynamic shared memory; counter a u32 the host zeroes once. With NORM, x is computed from nrm.
template <int BITS, bool NORM>
static __device__ __forceinline__ void route(const u32* __restrict__ words, const u16* __restrict__ scales,
                                             const u16* __restrict__ biases, const float* __restrict__ x,
                                             float* logits, int* ids, float* wts, u32* counter, int experts,
                                             int cols, int topk, int normalize, RouteNorm nrm) {
  extern __shared__ float rsm[];
  float* xs = rsm;
  float* ls = rsm + cols;
  int* ks = (int*)(ls + experts);  // the logits' order keys
  __shared__ int last;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  {
    // the warp's first row asked of L2 before x is staged (prefetch_l2)
    const int r = PETAL_BID_X() * ROUTE_WARPS + warp, wpg = BITS * 2;
    for (int g = lane; r < experts && g < cols / 64; g += 32) prefetch_l2(words + (long long)r * (cols / 64) * wpg + g * wpg);
  }
  if (NORM) {
    __shared__ float red[32];
    // the norm's weight loaded with h and delta, not after their sum: one
    // wait for memory instead of two (the columns past 8 a thread, as
    // before)
    constexpr int PRE = 8;
    float wv[PRE];
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * ROUTE_WARPS * 32;
      wv[k] = i < cols ? nrm.w[i] : 0.f;
    }
    float ss = 0.f;
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) {
      float v = nrm.h[i];
      if (nrm.delta) v += nrm.delta[i];
      xs[i] = v;
      ss += v * v;
    }
    ss = block_sum(ss, red);
    const float inv = 1.f / __builtin_sqrtf(ss / cols + nrm.eps);
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * ROUTE_WARPS * 32;
      if (i < cols) xs[i] = xs[i] * inv * wv[k];
    }
    for (int i = tid + PRE * ROUTE_WARPS * 32; i < cols; i += ROUTE_WARPS * 32) xs[i] = xs[i] * inv * nrm.w[i];
  } else {
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) xs[i] = x[i];
  }
  __syncthreads();
  const int groups = cols / 64;
  const int wpg = BITS * 2;  // words per group
  const long long wpr = (long long)groups * wpg;
  for (int r = PETAL_BID_X() * ROUTE_WARPS + warp; r < experts; r += PETAL_NCTAID_X() * ROUTE_WARPS) {
    float acc = 0.f;
    for (int g = lane; g < groups; g += 32) {
      const long long gi = (long long)r * groups + g;
      acc += group_dot<BITS>(words + r * wpr + g * wpg, xs + 64 * g, bf16_to_f32(scales[gi]), bf16_to_f32(biases[gi]));
    }
    acc = warp_sum(acc);
    if (lane == 0) logits[r] = acc;
  }
  // Publish this block's logits, then take a ticket: the last block selects.
  fence_gpu();
  __syncthreads();
  if (tid == 0) last = atomic_inc_wrap(counter, PETAL_NCTAID_X() - 1) == PETAL_NCTAID_X() - 1;
  __syncthreads();
  if (!last) return;
  fence_gpu();
  if (NORM) {
    // every block has read h: the sum and the normed x go back
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) {
      if (nrm.delta) nrm.h[i] += nrm.delta[i];
      nrm.out[i] = xs[i];
    }
  }
  for (int e = tid; e < experts; e += ROUTE_WARPS * 32) {
    ls[e] = ((volatile float*)logits)[e];
    ks[e] = route_key(ls[e]);
  }
  __syncthreads();
  // Expert e's rank is the number that beat it (a larger logit, or an equal
  // one with a lower id); the topk of rank < topk land in rank order, every
  // thread ranking its own experts at once.
  __shared__ float selV[32];
  __shared__ int selI[32];
  // The ranks are over order keys (NaN below every number, every NaN
  // equal), so that they are distinct even for NaN logits and every slot
  // of the topk gets an expert in range.
  for (int e = tid; e < experts; e += ROUTE_WARPS * 32) {
    const float v = ls[e];
    const int kv = ks[e];
    int rank = 0;
    for (int f = 0; f < experts; f++) {
      const int ku = ks[f];
      rank += ku > kv || (ku == kv && f < e);
    }
    if (rank < topk) selV[rank] = v, selI[rank] = e;
  }
  __syncthreads();
  if (warp != 0) return;
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
