// f64mma.h: float64 products on the tensor cores (sm_90's m16n8k16), for
// the router's exact logits (ops.cu's qgemm_f64_h, route_f64.cu).
#pragma once
#include "device.h"

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

