// attn_out.cu: attention's combine and the layer's output projection of one
// decoded token in one launch (attnout=on), where attn_combine and the
// mat-vec (qmv) take two. A module of its own built on attn.cu
// (ATTN_OUT_MODULE leaves that file's entry points out), so that attn.ptx
// and its machine code stay as they are. Measured slower than the two
// kernels in 2026-12-07-gl1.
//
// One thread-block cluster of OP_BLOCKS blocks a query head: block rank r
// merges the split attention's partial states of dims 32r .. 32r+31 of its
// head and gates them (attn_combine's arithmetic, so the outputs are its
// bits), then the cluster computes its head's partial products of o_proj
// (the head's 256 columns, an eighth of the rows a block) and the last
// head's cluster to finish an eighth sums it (outproj.h).
#define ATTN_OUT_MODULE
#include "attn.cu"
#include "outproj.h"

#define AO_WARPS 16  // o_proj's eighth of 2048 rows in one step of 16 rows a warp

// AttnOutArgs: attn_combine's operands (the partials, the gates, the
// position, the output) and the projection's (OutProj).
struct AttnOutArgs {
  const float* po;
  const float* pml;
  const float* qg;
  const int* pos;
  float* out;
  OutProj o;
  int maxSplits, minChunk;
};

// attn_combine_out: query heads × OP_BLOCKS blocks of AO_WARPS*32
// threads in clusters of OP_BLOCKS; QSTAGE_BYTES(M, 4) bytes of dynamic
// shared memory (the projection's staging).
template <int M>
static __device__ __forceinline__ void attn_combine_out(const AttnOutArgs& a) {
  constexpr int PER = ATT_D / OP_BLOCKS;  // dims a block
  __shared__ float mine[PER];
  const int tid = PETAL_TID_X();
  const u32 rank = cluster_rank();
  const int h = PETAL_BID_X() / OP_BLOCKS, heads = PETAL_NCTAID_X() / OP_BLOCKS;
  out_proj_prefetch<ATT_D>(a.o, h, rank * (a.o.rows / OP_BLOCKS), (rank + 1) * (a.o.rows / OP_BLOCKS));
  pdl_begin();
  if (tid < PER) {
    const int d = rank * PER + tid;
    const float v = att_merge(a.po, a.pml, a.qg, a.pos, a.maxSplits, a.minChunk, h, d);
    a.out[h * ATT_D + d] = v;
    mine[tid] = v;
  }
  pdl_trigger();  // the projection's partials and sums are left
  out_proj_partial<M, ATT_D, AO_WARPS>(a.o, mine, h, heads, rank);
  cluster_wait();
}

// Entry points attn_combine_out_<kind>: the kinds of qmv=exact and
// qmv=fast.
#define ATTN_COMBINE_OUT(M, NAME)                                                                  \
  extern "C" __global__ void __launch_bounds__(AO_WARPS * 32, 1) NAME(const AttnOutArgs a) { \
    attn_combine_out<M>(a);                                                                        \
  }
ATTN_COMBINE_OUT(QM_I8X3, attn_combine_out_i8x3)
ATTN_COMBINE_OUT(QM_I8X2, attn_combine_out_i8x2)
