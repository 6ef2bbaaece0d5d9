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
#include "route.h"

// rpad is where element i of x lives in the staged copy: 68 floats a group.
static __device__ __forceinline__ int rpad(int i) { return i + (i >> 6) * 4; }

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

// route: grid of any size, topk <= 32, experts <= 1024, ROUTE_WARPS*32 threads, cols/64·68 + 2·experts floats
// of dynamic shared memory; counter a u32 the host zeroes once. With NORM, x is computed from nrm.
template <int BITS, bool NORM>
static __device__ __forceinline__ void route(const u32* __restrict__ words, const u16* __restrict__ scales,
                                             const u16* __restrict__ biases, const float* __restrict__ x,
                                             float* logits, int* ids, float* wts, u32* counter, int experts,
                                             int cols, int topk, int normalize, RouteNorm nrm) {
  extern __shared__ float rsm[];
  float* xs = rsm;  // x, 68 floats a group of 64 (route_logits' XS)
  float* ls = rsm + cols / 64 * 68;
  int* ks = (int*)(ls + experts);  // the candidates of the selection
  __shared__ int last;
  const int tid = PETAL_TID_X();
  // PETAL_MARK's points (clock builds): 0 start, 1 x staged (normed), 2 the
  // logits written, 3 the ticket taken, 4 the selection done (the last
  // block).
  PETAL_MARK(0);
  constexpr int PRE = 8;  // columns a thread holds in registers: 8 x 256 threads covers 2048
  float hv[PRE];          // h, then h + delta
  if (NORM) {
    __shared__ float red[32];
    // the norm's weight loaded with h and delta, not after their sum: one
    // wait for memory instead of two (the columns past 8 a thread, as
    // before)
    // h and delta are loaded all at once too: a load of h and a store of
    // their sum at a time wait for memory once an element (the compiler
    // cannot move a load of h past a store to x, which it may alias)
    float wv[PRE], dv[PRE];
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * ROUTE_WARPS * 32;
      wv[k] = ld_global_f32_if(nrm.w + i, i < cols);
      hv[k] = ld_global_f32_if(nrm.h + i, i < cols);
      dv[k] = ld_global_f32_if(nrm.delta + i, nrm.delta && i < cols);
    }
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * ROUTE_WARPS * 32;
      if (i >= cols) break;
      float v = hv[k];
      if (nrm.delta) v += dv[k];
      hv[k] = v;  // kept for the write-back: no second read of h and delta
      xs[rpad(i)] = v;
      ss += v * v;
    }
    for (int i = tid + PRE * ROUTE_WARPS * 32; i < cols; i += ROUTE_WARPS * 32) {  // columns past the preloaded ones
      float v = nrm.h[i];
      if (nrm.delta) v += nrm.delta[i];
      xs[rpad(i)] = v;
      ss += v * v;
    }
    ss = block_sum(ss, red);
    const float inv = 1.f / __builtin_sqrtf(ss / cols + nrm.eps);
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * ROUTE_WARPS * 32;
      if (i < cols) xs[rpad(i)] = xs[rpad(i)] * inv * wv[k];
    }
    for (int i = tid + PRE * ROUTE_WARPS * 32; i < cols; i += ROUTE_WARPS * 32) xs[rpad(i)] = xs[rpad(i)] * inv * nrm.w[i];
  } else {
    for (int i = tid; i < cols; i += ROUTE_WARPS * 32) xs[rpad(i)] = x[i];
  }
  __syncthreads();
  PETAL_MARK(1);
  route_logits<BITS, 68>(words, scales, biases, xs, logits, experts, cols, PETAL_BID_X(), PETAL_NCTAID_X());
  PETAL_MARK(2);
  pdl_trigger();  // the selection by the last block is all that is left

  // Publish this block's logits, then take a ticket: the last block selects.
  fence_gpu();
  __syncthreads();
  if (tid == 0) last = ticket_inc(counter, PETAL_NCTAID_X() - 1) == PETAL_NCTAID_X() - 1;
  __syncthreads();
  PETAL_MARK(3);
  if (!last) return;
  fence_gpu();
  if (NORM) {
    // every block has read h: the sum (kept in hv) and the normed x go back
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * ROUTE_WARPS * 32;
      if (i >= cols) break;
      if (nrm.delta) nrm.h[i] = hv[k];
      nrm.out[i] = xs[rpad(i)];
    }
    for (int i = tid + PRE * ROUTE_WARPS * 32; i < cols; i += ROUTE_WARPS * 32) {
      if (nrm.delta) nrm.h[i] += nrm.delta[i];
      nrm.out[i] = xs[rpad(i)];
    }
  }
  route_select(logits, ls, ks, ids, wts, experts, topk, normalize);
#ifdef PETAL_CLOCK
  __syncthreads();
  PETAL_MARK(4);
#endif
}

// Entry points route4 and route8, by the router's bits. The router's rows
// do not depend on the kernel before: each warp asks L2 for its row
// (route_prefetch) before the wait, so that it streams in while that
// kernel runs (it was asked for after the wait, before x was staged).
#define ROUTE(BITS, NAME)                                                                                    \
  extern "C" __global__ void __launch_bounds__(ROUTE_WARPS * 32)                                             \
      NAME(const u32* words, const u16* scales, const u16* biases, const float* x, float* logits, int* ids, \
           float* wts, u32* counter, int experts, int cols, int topk, int normalize) {                       \
    route_prefetch<BITS>(words, experts, cols, PETAL_BID_X());                                             \
    pdl_begin();                                                                                           \
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
           int experts, int cols, int topk, int normalize) {                                                \
    route_prefetch<BITS>(words, experts, cols, PETAL_BID_X());                                              \
    pdl_begin();                                                                                            \
    route<BITS, true>(words, scales, biases, nullptr, logits, ids, wts, counter, experts, cols, topk,       \
                      normalize, RouteNorm{h, delta, w, out, eps});                                          \
  }
ROUTE_NORM(4, route_norm4)
ROUTE_NORM(8, route_norm8)
