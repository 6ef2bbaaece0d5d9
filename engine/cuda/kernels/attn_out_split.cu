// attn_out_split.cu: attention's combine and the layer's output projection
// of one decoded token in one launch (attnsplit=on), the projection split
// over its columns as splitk.h says, where attn_combine and the mat-vec
// (qmv) take two launches. A module of its own built on attn.cu
// (ATTN_OUT_MODULE leaves that file's entry points out), so that attn.ptx
// and its machine code stay as they are.
//
// Block b takes query head h = b / AS_BLOCKS and its dims d0 = 32·(b mod
// AS_BLOCKS) .. d0+31: it merges the split attention's partial states of
// those dims and gates them (att_merge: attn_combine's arithmetic, so the
// outputs are its bits), then multiplies them by those 32 columns of every
// row of o_proj (copied into shared memory before its wait: they depend on
// nothing), the blocks' parts summed as 64-bit fixed point, the last block
// writing the projection's output. No cluster, no grid-wide wait.
#define ATTN_OUT_MODULE
#include "attn.cu"
#include "splitk.h"

#define AS_BLOCKS (ATT_D / SK_COLS)  // blocks a query head
#define AS_THREADS 256

// attn_combine_split: query heads × AS_BLOCKS blocks of AS_THREADS threads,
// SK_SHARED(orows) bytes of dynamic shared memory. ow, osb: o_proj
// (orows x query heads·ATT_D, 4-bit, interleaved scale/bias words); oy its
// output; acc copies x orows zeros as 64-bit fixed point and oticket a
// zero u32 when allocated, left so by every launch.
extern "C" __global__ void __launch_bounds__(AS_THREADS)
    attn_combine_split(const float* __restrict__ po, const float* __restrict__ pml, const float* __restrict__ qg,
                       const int* __restrict__ pos, float* __restrict__ out, int maxSplits, int minChunk,
                       const u32* ow, const u32* osb, float* oy, unsigned long long* acc, u32* oticket, int orows,
                       int ocols, int copies) {
  extern __shared__ u32 smem[];
  const int tid = PETAL_TID_X();
  const int h = PETAL_BID_X() / AS_BLOCKS, d0 = (PETAL_BID_X() % AS_BLOCKS) * SK_COLS;
  const int col0 = h * ATT_D + d0;
  u32* codes = smem;
  u32* sbs = smem + 4 * orows;
  sk_copy(codes, sbs, ow, osb, ocols / 8, ocols / 64, col0, orows);
  pdl_begin();
  __shared__ SkQuant<3> q;
  if (tid < SK_COLS) {  // warp 0: a dim a lane
    const float v = att_merge(po, pml, qg, pos, maxSplits, minChunk, h, d0 + tid);
    out[h * ATT_D + d0 + tid] = v;
    sk_quantise<3>(v, &q);
  }
  pdl_trigger();  // the projection's parts and the last block's sums are left
  cp_wait<0>();
  __syncthreads();  // q, and every thread's copies of the columns
  sk_rows<3>(codes, sbs, ocols / 64, col0, &q, 1.f, sk_sums(acc, orows, copies), orows);
  sk_finish(acc, oticket, nullptr, oy, orows, copies);
}
