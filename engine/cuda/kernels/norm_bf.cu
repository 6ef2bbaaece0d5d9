// norm_bf.cu: a prompt chunk's norms that also write their output rounded
// to bf16 for the tensor-core GEMM that reads it next (normbf=on): the
// in_proj after a layer's input norm, out_proj after the Gated DeltaNet's
// gated norm. The GEMM then takes that copy instead of gemm_to_bf16's
// (which reads the float32 output back and writes the same bits), one
// launch and a pass over the output fewer. The float32 outputs are
// ops.cu's add_rmsnorm and gated_rmsnorm (rowmath.h's add_rmsnorm_row and
// gated_rmsnorm_task), the same sums in the same order; each bf16 value is
// its float32 one rounded to nearest even, as gemm_to_bf16 rounds it.
#include "rowmath.h"

// NB_REG: the row values a thread of add_rmsnorm_bf keeps in registers
// (256 threads: rows of up to 2,048, the 35B model's hidden size); a
// longer row takes add_rmsnorm's loops (rowmath.h), h read again.
#define NB_THREADS 256
#define NB_REG 8

// add_rmsnorm_bf: grid rows, block NB_THREADS. h += delta (when given),
// then out = h / rms(h) · w and outb = bf16(out).
extern "C" __global__ void __launch_bounds__(NB_THREADS)
    add_rmsnorm_bf(float* __restrict__ h, const float* __restrict__ delta, const float* __restrict__ w,
                   float* __restrict__ out, u16* __restrict__ outb, int dim, float eps) {
  pdl_begin();
  __shared__ float red[32];
  const long long base = (long long)PETAL_BID_X() * dim;
  const int tid = PETAL_TID_X();
  if (dim <= NB_THREADS * NB_REG) {  // the row in registers, indexed at compile time
    float keep[NB_REG], ss = 0.f;
#pragma unroll
    for (int k = 0; k < NB_REG; k++) {
      const int i = tid + k * NB_THREADS;
      keep[k] = 0.f;
      if (i < dim) {
        float v = h[base + i];
        if (delta) {
          v += delta[base + i];
          h[base + i] = v;
        }
        ss += v * v;
        keep[k] = v;
      }
    }
    ss = block_sum(ss, red);
    const float inv = 1.f / __builtin_sqrtf(ss / dim + eps);
#pragma unroll
    for (int k = 0; k < NB_REG; k++) {
      const int i = tid + k * NB_THREADS;
      if (i < dim) norm_store(out, outb, base + i, keep[k] * inv * w[i]);
    }
    return;
  }
  add_rmsnorm_row(h, delta, w, out, outb, dim, eps, red);  // ops.cu's loops, reading h again
}

// gated_rmsnorm_bf: gated_rmsnorm (a warp per (row, head) of dim values:
// x/rms(x)·w·silu(z)) that also writes outb = bf16(out).
extern "C" __global__ void __launch_bounds__(256)
    gated_rmsnorm_bf(const float* __restrict__ x, const float* __restrict__ z, const float* __restrict__ w,
                     float* __restrict__ out, u16* __restrict__ outb, int count, int dim, float eps) {
  pdl_begin();
  gated_rmsnorm_task(x, z, w, out, outb, count, dim, eps);
}
