// route_cl.cu: route.cu's route_norm (the post-attention add-and-norm and
// the router of one decoded token) as one thread-block cluster of
// ROUTE_CL_BLOCKS blocks (routenorm=cluster), in a module of its own so that
// route.ptx and its machine code stay as they are. Written, not yet
// measured on a GPU.
//
// Every block computes x itself, as route_norm's blocks do (the same code,
// so x is bit for bit add_rmsnorm's), and the logits of its eighth of the
// experts into its own shared memory, four rows a warp with their loads
// issued together. The cluster meets at its barrier, and rank 0 reads all
// the logits from the blocks' shared memory (distributed shared memory),
// writes them to the scratch vector too, selects (route_select, the same
// arithmetic and tie order) and writes h and x back. That replaces the
// ticket form's fence, its atomic round trip and the last block's reads
// of the logits from L2 with the cluster barrier and reads of shared
// memory; no counter is left to keep, so graph replays need nothing.
#define ROUTE_CL_MODULE
#include "rowmath.h"
#include "route.h"
#include "cluster.h"

#define ROUTE_CL_BLOCKS 8  // the cluster, and the grid: one cluster
#define ROUTE_CL_RPW 4     // router rows a warp, their loads in flight together

// route_prefetch_cl asks L2 for this block's router rows (a warp its own,
// those route_logits_cl reads), before the wait for the kernel before.
template <int BITS>
static __device__ __forceinline__ void route_prefetch_cl(const u32* __restrict__ words, int experts, int cols) {
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int per = experts / ROUTE_CL_BLOCKS, r0 = cluster_rank() * per, groups = cols / 64, wpg = BITS * 2;
  for (int j = warp; j < per; j += ROUTE_WARPS) {
    for (int g = lane; g < groups; g += 32) prefetch_l2(words + (long long)(r0 + j) * groups * wpg + g * wpg);
  }
}

// route_logits_cl writes to bl[j] the logit of router row r0 + j for this
// block's rows j < experts/ROUTE_CL_BLOCKS (r0 = rank·that): route_logits'
// sums in its order (a lane's groups, then warp_sum), ROUTE_CL_RPW rows a
// warp at a time, every row's codes, scales and biases loaded before the
// first product. A row past the block's loads row j0 instead (loads kept
// unconditional, in registers) and is not written.
template <int BITS, int XS>
static __device__ __forceinline__ void route_logits_cl(const u32* __restrict__ words, const u16* __restrict__ scales,
                                                       const u16* __restrict__ biases, const float* xs, float* bl,
                                                       int experts, int cols) {
  constexpr int RPW = ROUTE_CL_RPW;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int per = experts / ROUTE_CL_BLOCKS, r0 = cluster_rank() * per;
  const int groups = cols / 64;
  const int wpg = BITS * 2;  // words per group
  const long long wpr = (long long)groups * wpg;
  for (int j0 = warp; j0 < per; j0 += RPW * ROUTE_WARPS) {
    float acc[RPW];
#pragma unroll
    for (int i = 0; i < RPW; i++) acc[i] = 0.f;
    for (int g = lane; g < groups; g += 32) {
      u32x4 w[RPW][BITS / 2];
      u16 s[RPW], b[RPW];
#pragma unroll
      for (int i = 0; i < RPW; i++) {
        const int j = j0 + i * ROUTE_WARPS;
        const int r = r0 + (j < per ? j : j0);
        const long long gi = (long long)r * groups + g;
        group_load<BITS>(words + r * wpr + g * wpg, w[i]);
        s[i] = scales[gi];
        b[i] = biases[gi];
      }
      asm volatile("" ::: "memory");  // keeps the scales' and biases' loads here, not sunk to their products
#pragma unroll
      for (int i = 0; i < RPW; i++) acc[i] += group_dot_words<BITS>(w[i], xs + XS * g, bf16_to_f32(s[i]), bf16_to_f32(b[i]));
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      const float v = warp_sum(acc[i]);
      const int j = j0 + i * ROUTE_WARPS;
      if (lane == 0 && j < per) bl[j] = v;
    }
  }
}

// route_cl_gather, by every thread of rank 0 once the cluster has met,
// reads the logit of every expert e from the bl of the block that holds
// it (rank e / (experts/ROUTE_CL_BLOCKS)) into ls[e] and the scratch vector
// logits[e]. route_select then reads ls[e] back by the thread that wrote
// it here (the same e = tid + k·threads), before its first barrier.
static __device__ __forceinline__ void route_cl_gather(const float* bl, float* ls, float* logits, int experts) {
  const int per = experts / ROUTE_CL_BLOCKS;
  for (int e = PETAL_TID_X(); e < experts; e += PETAL_NTID_X()) {
    const float v = ld_cluster_f32(cluster_addr(bl + e % per, e / per));
    ls[e] = v;
    logits[e] = v;
  }
}

#include "route.cu"

// Entry points route_norm4_cl and route_norm8_cl: route_norm4 and
// route_norm8 without the counter, launched as one cluster of
// ROUTE_CL_BLOCKS blocks of ROUTE_WARPS*32 threads (experts a multiple of
// ROUTE_CL_BLOCKS, at most 1024), with cols/64·68 + 2·experts +
// experts/ROUTE_CL_BLOCKS floats of dynamic shared memory.
#define ROUTE_NORM_CL(BITS, NAME)                                                                             \
  extern "C" __global__ void __launch_bounds__(ROUTE_WARPS * 32)                                              \
      NAME(const u32* words, const u16* scales, const u16* biases, float* h, const float* delta,             \
           const float* w, float* out, float eps, float* logits, int* ids, float* wts, int experts, int cols, \
           int topk, int normalize) {                                                                         \
    route_prefetch_cl<BITS>(words, experts, cols);                                                            \
    pdl_begin();                                                                                              \
    route<BITS, true>(words, scales, biases, nullptr, logits, ids, wts, nullptr, experts, cols, topk,        \
                      normalize, RouteNorm{h, delta, w, out, eps});                                           \
  }
ROUTE_NORM_CL(4, route_norm4_cl)
ROUTE_NORM_CL(8, route_norm8_cl)
