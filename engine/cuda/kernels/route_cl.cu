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
    route_prefetch_part<BITS>(words, experts, cols, cluster_rank(), ROUTE_CL_BLOCKS);                                                        \
    pdl_begin();                                                                                              \
    route<BITS, true>(words, scales, biases, nullptr, logits, ids, wts, nullptr, experts, cols, topk,        \
                      normalize, RouteNorm{h, delta, w, out, eps});                                           \
  }
ROUTE_NORM_CL(4, route_norm4_cl)
ROUTE_NORM_CL(8, route_norm8_cl)
