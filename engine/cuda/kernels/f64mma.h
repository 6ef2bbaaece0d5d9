// f64mma.h: float64 products on the tensor cores (sm_90's m16n8k16) and the
// staging of a router tile's groups, for the router's exact logits (ops.cu's
// qgemm_f64 kernels).
#pragma once
#include "device.h"
#include "rowmath.h"

// mma_f64_16: m16n8k16 in float64, a shape sm_90 added beside m8n8k4.
// Fragments (g = lane / 4, t = lane % 4): a[i] is A[g + 8 (i & 1)][t + 4 (i / 2)],
// b[i] is B[k = t + 4 i][n = g], c[i] is C[g + 8 (i / 2)][2 t + (i & 1)].
static __device__ __forceinline__ void mma_f64_16(double* c, const double* a, const double* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7, %8, %9, %10, %11}, "
      "{%12, %13, %14, %15}, {%0, %1, %2, %3};"
      : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]), "d"(b[0]), "d"(b[1]),
        "d"(b[2]), "d"(b[3]));
}

// qf_fetch and qf_store_w stage one group of K columns of a router tile
// as its block's 128 threads share it (ops.cu's qf_gemm). qf_fetch loads the group into registers, XR rows of x a
// warp (two columns a lane) and WORDS words of codes a thread with their
// rows' scales and biases, so that the loads run while the products of
// the group before do; qf_store_w writes the weights dequantised to
// float64 (q·s + b, exact) into ws.
template <int XR, int WORDS, int BN, int K>
static __device__ __forceinline__ void qf_fetch(const QDesc& d, const float* __restrict__ x, int T, int m0, long long n0,
                                                int grp, int tid, int warp, int lane, int wpg, float (&nx)[2 * XR],
                                                u32 (&nw)[WORDS], u16 (&ns)[WORDS], u16 (&nb)[WORDS]) {
  const int k0 = grp * K;
#pragma unroll
  for (int i = 0; i < XR; i++) {
    const int r = m0 + warp * XR + i;
    const float* xr = x + (long long)(r < T ? r : 0) * d.cols + k0;
    nx[2 * i] = r < T ? xr[lane] : 0.f;
    nx[2 * i + 1] = r < T ? xr[lane + 32] : 0.f;
  }
#pragma unroll
  for (int i = 0; i < WORDS; i++) {
    const int e = tid + 128 * i, n = e / wpg, wi = e % wpg;
    const bool in = e < BN * wpg && n0 + n < d.rows;
    nw[i] = in ? d.w[(n0 + n) * d.wpr + grp * wpg + wi] : 0u;
    ns[i] = in ? d.s[(n0 + n) * d.gpr + grp] : (u16)0;
    nb[i] = in ? d.b[(n0 + n) * d.gpr + grp] : (u16)0;
  }
}

template <int WORDS, int BN, int LD>
static __device__ __forceinline__ void qf_store_w(const QDesc& d, double (*__restrict__ ws)[LD], int tid, int wpg,
                                                  int per, u32 mask, const u32 (&nw)[WORDS], const u16 (&ns)[WORDS],
                                                  const u16 (&nb)[WORDS]) {
#pragma unroll
  for (int i = 0; i < WORDS; i++) {
    const int e = tid + 128 * i, n = e / wpg, wi = e % wpg;
    if (e < BN * wpg) {
      const double sc = (double)bf16_to_f32(ns[i]), bi = (double)bf16_to_f32(nb[i]);
      for (int c = 0; c < per; c++) {
        const u32 code = (nw[i] >> (d.bits * c)) & mask;
        ws[n][wi * per + c] = __builtin_fma((double)code, sc, bi);
      }
    }
  }
}

