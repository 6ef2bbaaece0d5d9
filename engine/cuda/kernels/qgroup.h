// qgroup.h: one group of 64 weights of an MLX affine 4-bit row against the
// matching 64 inputs, in three kinds of arithmetic, and the staging of the
// input vector in shared memory that each kind reads.
//
// A row's group g is 8 little-endian u32 words (element 8i+k in bits 4k..4k+3
// of word i), 32 contiguous bytes, and a bf16 scale s and bias b. The group's
// contribution to y is s*sum(q*x) + b*sum(x); sum(x) per group is staged in
// float32 once per block, so the inner loop is sum(q*x) alone.
//
//   QM_F32   exact float32: a code becomes the float 2^k+q with one LOP3
//            (OR-ing the nibble into 2^k's bits) and one FADD removes 2^k;
//            an FFMA per weight.
//   QM_F16   packed half: one LOP3 makes two codes a half2 (1024+q or
//            1024+16q, the 0x6400 magic exponent), one HSUB2/HFMA2 leaves q,
//            one HFMA2 multiplies two codes by x held in f16; 16 products
//            (8 per half) are summed in f16 before they join a float32 sum.
//   QM_I8xP  integer dot products: x is quantised per group of 64 to P int8
//            parts, x ~ d*(p0 + p1/254 + p2/254^2) with d = max|x|/127; the
//            codes, spread to bytes by two LOP3s per word, meet the parts in
//            dp4a (4 products per instruction) with exact int32 sums.
//
// Staged layouts (per group, padded so that 8 lanes reading 8 consecutive
// groups with 16-byte loads hit distinct banks):
//   QM_F32  68 floats: x in order, then 4 of padding.
//   QM_F16  36 words: word 4i+j (j<4) holds the half2 (x[8i+j], x[8i+j+4]).
//   QM_I8xP part-major, 20 words per (part, group): word 2i holds the bytes
//           of x[8i], x[8i+2], x[8i+4], x[8i+6], word 2i+1 those of the odd ones.
#pragma once
#include "device.h"

// u32x4a is a 16-byte aligned vector, so that staged reads are 16-byte loads.
struct __attribute__((aligned(16))) u32x4a {
  u32 x, y, z, w;
};
struct __attribute__((aligned(8))) u32x2a {
  u32 x, y;
};

#define QM_F32 0
#define QM_F16 1
#define QM_I8X1 2
#define QM_I8X2 3
#define QM_I8X3 4

static __device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = __builtin_fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <int M>
struct QStage {
  // Words of shared memory per group of the staged vector.
  static constexpr int words = M == QM_F32 ? 68 : M == QM_F16 ? 36 : 20 * (M - QM_I8X1 + 1);
  static constexpr int parts = M >= QM_I8X1 ? M - QM_I8X1 + 1 : 0;
};

// Shared memory bytes the staging of a vector of ngroups groups takes: the
// float32 copy, the staged layout, and per group sum(x) and d.
#define QSTAGE_BYTES(M, ngroups) ((ngroups) * (64 + QStage<M>::words + 2) * 4)

// add_rn is a + b rounded to nearest, never fused with a product before
// it (an explicit rounding mode keeps the compilers from contracting it).
static __device__ __forceinline__ float add_rn(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

static __device__ __forceinline__ u32 pack_f16x2(float lo, float hi) {
  u32 r;
  asm("{.reg .f16 l, h;\n\tcvt.rn.f16.f32 l, %1;\n\tcvt.rn.f16.f32 h, %2;\n\tmov.b32 %0, {l, h};}"
      : "=r"(r)
      : "f"(lo), "f"(hi));
  return r;
}

// QView is a staged vector in shared memory: its float32 copy, M's layout,
// and per group sum(x) and (integer kinds) d.
struct QView {
  const float* raw;
  const u32* xs;
  const float* gsum;
  const float* gd;
};

// QNormIn is an add-and-norm for qstage to apply as it stages (an
// AddRMSNorm of one row before the mat-vec): x = (h + delta)/rms·w, delta
// optional (null), all 16-byte aligned.
struct QNormIn {
  const float* h;
  const float* delta;
  const float* w;
  float eps;
  // keep, in shared memory (or null), receives h + delta, so that the
  // block that writes the sum back to h stores it from there instead of
  // reading h and delta again (a wait for memory at the kernel's end).
  float* keep;
};

// QSTAGE_LOADS is how many 16-byte loads a thread of qstage has in flight.
#define QSTAGE_LOADS 8
// QNORM_THREADS is the threads of add_rmsnorm (ops.cu), whose order of
// sums qstage's norm keeps; blocks have at least as many.
#define QNORM_THREADS 256

// ld_global_16_if is the 16 bytes at p where ok, else zeros: a load
// predicated on ok into registers (p need not be valid where !ok).
static __device__ __forceinline__ u32x4 ld_global_16_if(const void* p, bool ok) {
  u32x4 v = {0u, 0u, 0u, 0u};
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %4, 0;\n\t@q ld.global.v4.u32 {%0, %1, %2, %3}, [%5];\n\t}"
               : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
               : "r"((int)ok), "l"(p));
  return v;
}

// ld_global_f32_if is *p where ok, else 0.
static __device__ __forceinline__ float ld_global_f32_if(const float* p, bool ok) {
  float v = 0.f;
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %1, 0;\n\t@q ld.global.f32 %0, [%2];\n\t}"
               : "+f"(v)
               : "r"((int)ok), "l"(p));
  return v;
}

// qstage_raw is qstage's first part: x (or NORM's x) in float32 at the start
// of the block's dynamic shared memory, ending with a barrier.
template <bool NORM = false>
static __device__ __forceinline__ float* qstage_raw(const float* __restrict__ x, int ngroups, QNormIn n = QNormIn{}) {
  extern __shared__ u32 smem[];
  float* raw = (float*)smem;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, nthreads = PETAL_NTID_X();
  // With NORM, a thread's elements of delta and of the norm's weight are
  // loaded with h, not after it: one wait for memory instead of three.
  // The norm is computed by the first QNORM_THREADS threads whatever the
  // block's size, so that its sum is in add_rmsnorm's order.
  constexpr int PRE = NORM ? 16 : 1;  // elements a thread holds: 16 x 256 threads covers 4096 columns
  constexpr int NT = QNORM_THREADS;
  const bool normer = tid < NT;
  float dv[PRE], wv[PRE];
  if (NORM) {
    const int cols = 64 * ngroups;
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * NT;
      dv[k] = ld_global_f32_if(n.delta + i, normer && n.delta && i < cols);
      wv[k] = ld_global_f32_if(n.w + i, normer && i < cols);
    }
  }
  {
    // QSTAGE_LOADS 16-byte loads a thread in flight, into registers, before
    // the first store (loads guarded in a conditional copy into an array
    // were compiled as a load and a store to local memory at a time, each
    // waiting for its load: 2.3-3.8 us to stage 18 KB, run phases2)
    const u32x4* x4 = (const u32x4*)(NORM ? n.h : x);
    u32x4a* r4 = (u32x4a*)raw;
    const int n4 = 16 * ngroups;
    for (int b = 0; b < n4; b += QSTAGE_LOADS * nthreads) {
      u32x4 v[QSTAGE_LOADS];
#pragma unroll
      for (int k = 0; k < QSTAGE_LOADS; k++) {
        const int i = b + k * nthreads + tid;
        v[k] = ld_global_16_if(x4 + (i < n4 ? i : 0), i < n4);
      }
#pragma unroll
      for (int k = 0; k < QSTAGE_LOADS; k++) {
        const int i = b + k * nthreads + tid;
        if (i < n4) r4[i] = u32x4a{v[k].x, v[k].y, v[k].z, v[k].w};
      }
    }
  }
  __syncthreads();
  if (NORM) {
    __shared__ float red[32];
    const int cols = 64 * ngroups;
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * NT;
      if (!normer || i >= cols) break;
      float v = raw[i];
      if (n.delta) {
        v += dv[k];
        raw[i] = v;
        if (n.keep) n.keep[i] = v;
      }
      ss += v * v;
    }
    for (int i = tid + PRE * NT; normer && i < cols; i += NT) {  // columns past the preloaded ones
      float v = raw[i];
      if (n.delta) {
        v += n.delta[i];
        raw[i] = v;
        if (n.keep) n.keep[i] = v;
      }
      ss += v * v;
    }
    ss = warp_sum(ss);
    __syncthreads();
    if (lane == 0 && normer) red[warp] = ss;
    __syncthreads();
    float tot = 0.f;
    for (int w = 0; w < NT / 32; w++) tot += red[w];
    const float inv = 1.f / __builtin_sqrtf(tot / cols + n.eps);
#pragma unroll
    for (int k = 0; k < PRE; k++) {
      const int i = tid + k * NT;
      if (normer && i < cols) raw[i] = raw[i] * inv * wv[k];
    }
    for (int i = tid + PRE * NT; normer && i < cols; i += NT) raw[i] = raw[i] * inv * n.w[i];
    __syncthreads();
  }
  return raw;
}

// qstage_layout is qstage's second part: the staged layout of M, the group
// sums and (integer kinds) d from the float32 copy qstage_raw left, ending
// with a barrier.
template <int M>
static __device__ __forceinline__ QView qstage_layout(int ngroups) {
  extern __shared__ u32 smem[];
  float* raw = (float*)smem;
  u32* st = smem + 64 * ngroups;
  float* gsum = (float*)(st + ngroups * QStage<M>::words);
  float* gd = gsum + ngroups;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, nwarps = PETAL_NTID_X() >> 5;
  // Eight lanes per group, four groups per warp at once (three shuffles
  // reduce a group), lane sl taking elements sl, sl+8, ..., sl+56, or, for
  // the integer kinds, elements 8sl .. 8sl+7: the two words of each part
  // that hold them (below), packed and stored at once.
  constexpr bool INT = M >= QM_I8X1;
  const int sl = lane & 7, gw = lane >> 3;
  for (int g0 = 4 * warp; g0 < ngroups; g0 += 4 * nwarps) {
    const int g = g0 + gw;
    const bool live = g < ngroups;
    float v[8];
    if (INT) {
      const float4v* r = (const float4v*)(raw + 64 * (live ? g : 0) + 8 * sl);
      const float4v a = r[0], b = r[1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
      for (int k = 0; k < 8; k++) v[k] = live ? raw[64 * g + sl + 8 * k] : 0.f;
    }
    float s = 0.f, amax = 0.f;
#pragma unroll
    for (int k = 0; k < 8; k++) s += v[k], amax = __builtin_fmaxf(amax, __builtin_fabsf(v[k]));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      amax = __builtin_fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    }
    if (!live) continue;
    if (sl == 0) gsum[g] = s;
    if (M == QM_F32) {
      float* xs = (float*)(st + g * 68);
#pragma unroll
      for (int k = 0; k < 8; k++) xs[sl + 8 * k] = v[k];
    } else if (M == QM_F16) {
      // Word 4i+j holds (x[8i+j], x[8i+j+4]): lanes sl < 4 write word
      // 4k+sl from their elements sl+8k and partners sl+8k+4 (in raw).
      if (sl < 4) {
#pragma unroll
        for (int k = 0; k < 8; k++) st[g * 36 + 4 * k + sl] = pack_f16x2(v[k], raw[64 * g + sl + 8 * k + 4]);
      }
    } else {
      constexpr int P = QStage<M>::parts;
      float inv = amax > 0.f ? 127.f / amax : 0.f;
      if (sl == 0) gd[g] = amax / 127.f;
      // Element 8sl+j: word 2sl+(j&1), byte j>>1; the lane's two words
      // of part p at 8-byte offset sl of the part's group.
      float t[8];
#pragma unroll
      for (int j = 0; j < 8; j++) t[j] = v[j] * inv;
#pragma unroll
      for (int p = 0; p < P; p++) {
        u32 w[2] = {0u, 0u};
#pragma unroll
        for (int j = 0; j < 8; j++) {
          // rint(t) and its low byte without conversions (a quarter-rate
          // unit: 48 a group took most of the layout's 1-2 us, run pad1):
          // 1.5*2^23 + t, rounded to nearest even, is a float whose low
          // mantissa bits are rint(t) in two's complement (|t| <= 127.5).
          const float m = add_rn(t[j], 12582912.f);
          const float q = add_rn(m, -12582912.f);
          w[j & 1] |= (__float_as_uint(m) & 0xFFu) << (8 * (j >> 1));
          t[j] = (t[j] - q) * 254.f;
        }
        *(u32x2a*)(st + (p * ngroups + g) * 20 + 2 * sl) = u32x2a{w[0], w[1]};
      }
    }
  }
  __syncthreads();
  return QView{raw, st, gsum, gd};
}

// qstage stages x[0 : 64*ngroups] (16-byte aligned) in the block's dynamic
// shared memory. Every thread of the block calls it; it ends with a
// barrier. The copy comes first, with sixteen 16-byte loads in flight per
// thread, so that a block waits for memory about once, not once per group.
// With NORM, x is n's add-and-norm of h, computed in add_rmsnorm's order
// (each thread's elements tid, tid+256, ... summed in turn, then the
// warps' sums in warp order) by a block of 256 threads: bit for bit what
// add_rmsnorm (ops.cu) writes.
template <int M, bool NORM = false>
static __device__ __forceinline__ QView qstage(const float* __restrict__ x, int ngroups, QNormIn n = QNormIn{}) {
  qstage_raw<NORM>(x, ngroups, n);
  return qstage_layout<M>(ngroups);
}

// small_int_to_f32 is (float)(int)v for |v| < 2^22 (a group's dp4a sum is
// at most 64*15*127), without the conversion unit: v added to the bits of
// 1.5*2^23, whose unit in the last place is 1, then 1.5*2^23 taken away.
static __device__ __forceinline__ float small_int_to_f32(u32 v) {
  return __uint_as_float(0x4B400000u + v) - 12582912.f;
}

static __device__ __forceinline__ u32 dp4a_us(u32 a, u32 b, u32 c) {
  u32 d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
static __device__ __forceinline__ u32 hfma2(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
static __device__ __forceinline__ float f16x2_sum(u32 v) {
  float a, b;
  asm("{.reg .f16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;}"
      : "=f"(a), "=f"(b)
      : "r"(v));
  return a + b;
}

// qdot returns sum(q*x) over group g (times d for the integer kinds) of the
// staged vector, w the group's 8 code words.
template <int M>
static __device__ __forceinline__ float qdot(const u32x4& w0, const u32x4& w1, const u32* smem, int ngroups, int g,
                                             const float* gd) {
  const u32 w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  if (M == QM_F32) {
    const u32x4a* xv = (const u32x4a*)(smem + g * 68);
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const u32x4a xa = xv[2 * i], xb = xv[2 * i + 1];
      const float xc[8] = {__uint_as_float(xa.x), __uint_as_float(xa.y), __uint_as_float(xa.z), __uint_as_float(xa.w),
                           __uint_as_float(xb.x), __uint_as_float(xb.y), __uint_as_float(xb.z), __uint_as_float(xb.w)};
      u32 lo = w[i], hi = w[i] >> 16;
      s0 += (__uint_as_float((lo & 0xFu) | 0x4B000000u) - 8388608.f) * xc[0];
      s1 += (__uint_as_float((lo & 0xF0u) | 0x49000000u) - 524288.f) * xc[1];
      s0 += (__uint_as_float((lo & 0xF00u) | 0x47000000u) - 32768.f) * xc[2];
      s1 += (__uint_as_float((lo & 0xF000u) | 0x45000000u) - 2048.f) * xc[3];
      s0 += (__uint_as_float((hi & 0xFu) | 0x4B000000u) - 8388608.f) * xc[4];
      s1 += (__uint_as_float((hi & 0xF0u) | 0x49000000u) - 524288.f) * xc[5];
      s0 += (__uint_as_float((hi & 0xF00u) | 0x47000000u) - 32768.f) * xc[6];
      s1 += (__uint_as_float((hi & 0xF000u) | 0x45000000u) - 2048.f) * xc[7];
    }
    return s0 + s1;
  } else if (M == QM_F16) {
    const u32x4a* xv = (const u32x4a*)(smem + g * 36);
    const u32 magic = 0x64006400u, one = 0x3C003C00u, sixteenth = 0x2C002C00u;
    const u32 m1024 = 0xE400E400u, m64 = 0xD400D400u;  // -1024, -64
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
      u32 acc = 0;
#pragma unroll
      for (int k = 0; k < 2; k++) {
        u32 v = w[i + k], v8 = v >> 8;
        const u32x4a xq = xv[i + k];
        const u32 xc[4] = {xq.x, xq.y, xq.z, xq.w};
        u32 a = hfma2((v & 0x000F000Fu) | magic, one, m1024);        // q0, q4
        u32 b = hfma2((v & 0x00F000F0u) | magic, sixteenth, m64);    // q1, q5
        u32 c = hfma2((v8 & 0x000F000Fu) | magic, one, m1024);       // q2, q6
        u32 d = hfma2((v8 & 0x00F000F0u) | magic, sixteenth, m64);   // q3, q7
        acc = hfma2(a, xc[0], acc);
        acc = hfma2(b, xc[1], acc);
        acc = hfma2(c, xc[2], acc);
        acc = hfma2(d, xc[3], acc);
      }
      s += f16x2_sum(acc);
    }
    return s;
  } else {
    constexpr int P = QStage<M>::parts;
    u32 acc[P];
#pragma unroll
    for (int p = 0; p < P; p++) {
      const u32x4a* xv = (const u32x4a*)(smem + (p * ngroups + g) * 20);
      u32 xs[16];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        u32x4a t = xv[i];
        xs[4 * i] = t.x, xs[4 * i + 1] = t.y, xs[4 * i + 2] = t.z, xs[4 * i + 3] = t.w;
      }
      acc[p] = 0;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        acc[p] = dp4a_us(w[i] & 0x0F0F0F0Fu, xs[2 * i], acc[p]);
        acc[p] = dp4a_us((w[i] >> 4) & 0x0F0F0F0Fu, xs[2 * i + 1], acc[p]);
      }
    }
    float r = small_int_to_f32(acc[0]);
    if (P > 1) r += small_int_to_f32(acc[1]) * (1.f / 254.f);
    if (P > 2) r += small_int_to_f32(acc[P - 1]) * (1.f / (254.f * 254.f));
    return gd[g] * r;
  }
}

// Scales and biases: MLX's two bf16 arrays (SB 0), or one u32 per group
// with the scale in the low half and the bias in the high half (SB 1, made
// at upload), passed as the scales pointer.
template <int SB>
static __device__ __forceinline__ void load_sb(const u16* __restrict__ sc, const u16* __restrict__ bi, long long i,
                                               float& s, float& b) {
  if (SB) {
    u32 v = ((const u32*)sc)[i];
    s = __uint_as_float(v << 16);
    b = __uint_as_float(v & 0xffff0000u);
  } else {
    s = bf16_to_f32(sc[i]);
    b = bf16_to_f32(bi[i]);
  }
}
