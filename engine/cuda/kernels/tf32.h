// tf32.h: float32-accurate products on the tensor cores, for kernels that
// must keep float32's error (the chunked delta rule, the router's logits):
// mma.sync m16n8k8 in tf32 with each float32 operand split into two tf32
// parts, hi + lo, and three products (lo·hi, hi·lo, hi·hi; lo·lo dropped),
// about 2^-21 relative per operand where a single tf32 product is 2^-11.
#pragma once
#include "device.h"

// tf32_round rounds x to tf32 (nearest, ties away), in a float32 register
// with the low 13 bits zero.
static __device__ __forceinline__ u32 tf32_round(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

static __device__ __forceinline__ void tf32_split(float x, u32& hi, u32& lo) {
  hi = tf32_round(x);
  lo = tf32_round(x - __uint_as_float(hi));
}

// TfA and TfB are the hi and lo parts of a warp's m16n8k8 fragments: A
// [16 x 8] row-major (a0 at row g, col t; a1 row g+8; a2 col t+4; a3 both,
// g = lane/4, t = lane%4), B [8 x 8] (b0 at row t, col g; b1 row t+4).
struct TfA {
  u32 hi[4], lo[4];
};
struct TfB {
  u32 hi[2], lo[2];
};

static __device__ __forceinline__ void mma_tf32(float* c, const u32* a, const u32* b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// mma_tf32x3 adds a·b to the m16n8 accumulator c (c0, c1 at row g, cols 2t,
// 2t+1; c2, c3 at row g+8), the small products first.
static __device__ __forceinline__ void mma_tf32x3(float* c, const TfA& a, const TfB& b) {
  mma_tf32(c, a.lo, b.hi);
  mma_tf32(c, a.hi, b.lo);
  mma_tf32(c, a.hi, b.hi);
}

// shfl_xor_double is __shfl_xor_sync for a double, as its two 32-bit halves.
static __device__ __forceinline__ double shfl_xor_double(double v, int lane) {
  const unsigned long long b = __builtin_bit_cast(unsigned long long, v);
  const u32 lo = __nvvm_shfl_sync_bfly_i32(0xffffffffu, (u32)b, lane, 0x1f);
  const u32 hi = __nvvm_shfl_sync_bfly_i32(0xffffffffu, (u32)(b >> 32), lane, 0x1f);
  return __builtin_bit_cast(double, (unsigned long long)hi << 32 | lo);
}
