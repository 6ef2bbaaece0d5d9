// norm_comb.cu: a prompt chunk's input norm with the MoE's combine of the
// layer before inside it (combinenorm=on): add_rmsnorm_bfo (norm_bfo.cu)
// whose delta, the MoE block's output, is summed here from what
// moe_combine_bf (gemm_downbf.cu) would have summed into it, the shared
// expert's output and each token's eight bf16 expert outputs with their
// weights, instead of read back after that kernel wrote it: a write and a
// read of a float32 row a token fewer (33.5 MB each a layer at 4096
// tokens) and a launch. The same sums in the same order as the two
// kernels (combine_rows' slot order, add_rmsnorm's row order): the same
// bits. A module of its own, so that norm_bf.ptx, norm_bfo.ptx and their
// machine code stay as they are.
#define NORM_OUT_OPTIONAL
#include "rowmath.h"

#define NC_THREADS 256
#define NC_REG 8  // a row of up to NC_THREADS·NC_REG values (the 35B model's 2,048)
#define NC_TOPK 8

// add_rmsnorm_comb_bf: grid rows, block NC_THREADS, dim at most
// NC_THREADS·NC_REG. delta = shared + Σ_k wts[t,k]·ys[pos[t,k]] (slot order;
// a slot of pos -1, an expert id outside the stack, makes the row NaN, as
// moe_combine does), then h += delta and outb = bf16(h / rms(h) · w), out
// the float32 form where not null.
extern "C" __global__ void __launch_bounds__(NC_THREADS)
    add_rmsnorm_comb_bf(float* __restrict__ h, const float* __restrict__ shared, const u16* __restrict__ ys,
                        const int* __restrict__ pos, const float* __restrict__ wts, const float* __restrict__ w,
                        float* __restrict__ out, u16* __restrict__ outb, int dim, float eps) {
  pdl_begin();
  __shared__ float red[32];
  const int t = PETAL_BID_X(), tid = PETAL_TID_X();
  const long long base = (long long)t * dim;
  int p[NC_TOPK];
  float wt[NC_TOPK];
#pragma unroll
  for (int k = 0; k < NC_TOPK; k++) p[k] = pos[t * NC_TOPK + k], wt[k] = wts[t * NC_TOPK + k];
  float keep[NC_REG], ss = 0.f;
#pragma unroll
  for (int r = 0; r < NC_REG; r++) {
    const int i = tid + r * NC_THREADS;
    keep[r] = 0.f;
    if (i < dim) {
      float d = shared[base + i];
#pragma unroll
      for (int k = 0; k < NC_TOPK; k++) {
        if (p[k] < 0) {
          d = __uint_as_float(0x7fc00000u);
          break;
        }
        d += wt[k] * __uint_as_float((u32)ys[(long long)p[k] * dim + i] << 16);
      }
      float v = h[base + i];
      v += d;
      h[base + i] = v;
      ss += v * v;
      keep[r] = v;
    }
  }
  ss = block_sum(ss, red);
  const float inv = 1.f / __builtin_sqrtf(ss / dim + eps);
#pragma unroll
  for (int r = 0; r < NC_REG; r++) {
    const int i = tid + r * NC_THREADS;
    if (i < dim) norm_store(out, outb, base + i, keep[r] * inv * w[i]);
  }
}
