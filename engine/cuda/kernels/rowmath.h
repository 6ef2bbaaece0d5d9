// rowmath.h: what the generic row kernels (ops.cu, sample.cu) share: block
// reductions and scans, float exp through ex2, and float64 exp and log
// (series after a range reduction) where a result must be float32-exact
// (gates, sampling weights, log-sum-exp), since the kernels are built
// without libdevice.
#pragma once
#include "qgroup.h"

static __device__ __forceinline__ int tid_y() { return __nvvm_read_ptx_sreg_tid_y(); }
static __device__ __forceinline__ int bid_y() { return __nvvm_read_ptx_sreg_ctaid_y(); }
static __device__ __forceinline__ int bid_z() { return __nvvm_read_ptx_sreg_ctaid_z(); }
static __device__ __forceinline__ int nbid_z() { return __nvvm_read_ptx_sreg_nctaid_z(); }
static __device__ __forceinline__ float f32_nan() { return __uint_as_float(0x7fc00000u); }
static __device__ __forceinline__ bool is_nan(float x) { return x != x; }

// order_key maps a float to a u32 of the same order (for non-NaN values).
static __device__ __forceinline__ u32 order_key(float v) {
  const u32 b = __float_as_uint(v);
  return b ^ ((u32)((int)b >> 31) | 0x80000000u);
}

// nan_low_key is order_key with -0 as +0 and NaN below every number (0),
// so that keys of any logits are ordered and NaNs are all equal.
static __device__ __forceinline__ u32 nan_low_key(float v) { return is_nan(v) ? 0u : order_key(v + 0.f); }

// rank_key orders values for a choice: larger first, NaN last, -0 as +0,
// then the lower id; the largest rank_key is the best; rank_id gives its id.
static __device__ __forceinline__ unsigned long long rank_key(float v, int id) {
  return (unsigned long long)nan_low_key(v) << 32 | (0xffffffffu - (u32)id);
}
static __device__ __forceinline__ int rank_id(unsigned long long k) { return (int)(0xffffffffu - (u32)k); }

static __device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
static __device__ __forceinline__ void atomic_add(int* p, int v) { __nvvm_atom_add_gen_i(p, v); }
static __device__ __forceinline__ void atomic_add(float* p, float v) { __nvvm_atom_add_gen_f(p, v); }

static __device__ __forceinline__ int shfl_up_i(int v, int d) {
  return __nvvm_shfl_sync_up_i32(0xffffffffu, v, d, 0);
}
static __device__ __forceinline__ float shfl_up_f(float v, int d) {
  return __nvvm_shfl_sync_up_f32(0xffffffffu, v, d, 0);
}
static __device__ __forceinline__ int shfl_xor_int(int v, int m) {
  return __nvvm_shfl_sync_bfly_i32(0xffffffffu, v, m, 0x1f);
}
static __device__ __forceinline__ unsigned long long shfl_xor_u64(unsigned long long v, int m) {
  const int lo = shfl_xor_int((int)(u32)v, m), hi = shfl_xor_int((int)(u32)(v >> 32), m);
  return (unsigned long long)(u32)lo | (unsigned long long)(u32)hi << 32;
}

static __device__ __forceinline__ double shfl_xor_f64(double v, int m) {
  return __builtin_bit_cast(double, shfl_xor_u64(__builtin_bit_cast(unsigned long long, v), m));
}

// fexp is e^x in float32 through ex2.approx (relative error about 2^-22).
static __device__ __forceinline__ float fexp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
static __device__ __forceinline__ float fsigmoid(float x) { return 1.f / (1.f + fexp(-x)); }
static __device__ __forceinline__ float fsilu(float x) { return x / (1.f + fexp(-x)); }

// conv4_silu is the Gated DeltaNet's causal conv of width 4 at one token,
// then SiLU: taps w0..w3 over the three inputs before it (p0 the oldest)
// and its own, x; the sums in this order wherever it is computed
// (conv_silu, gdn_chunk_prep_conv), so that they give the same bits.
static __device__ __forceinline__ float conv4_silu(float w0, float w1, float w2, float w3, float p0, float p1, float p2,
                                                   float x) {
  float s = w3 * x;
  s += w0 * p0;
  s += w1 * p1;
  s += w2 * p2;
  return fsilu(s);
}

// pow2d is 2^n for -1022 <= n <= 1023.
static __device__ __forceinline__ double pow2d(long long n) {
  return __builtin_bit_cast(double, (unsigned long long)(n + 1023) << 52);
}

// dexp is e^x in float64 (about 1e-16 relative) for |x| < 700; 0 below, inf above.
static __device__ __forceinline__ double dexp(double x) {
  if (x < -700) return 0;
  if (x > 700) return __builtin_inf();
  const double n = __builtin_rint(x * 1.4426950408889634074);
  double r = __builtin_fma(-n, 6.93147180369123816490e-01, x);
  r = __builtin_fma(-n, 1.90821492927058770002e-10, r);
  double p = 1.0 / 479001600;  // Taylor to r^12, |r| <= 0.35
  p = __builtin_fma(p, r, 1.0 / 39916800);
  p = __builtin_fma(p, r, 1.0 / 3628800);
  p = __builtin_fma(p, r, 1.0 / 362880);
  p = __builtin_fma(p, r, 1.0 / 40320);
  p = __builtin_fma(p, r, 1.0 / 5040);
  p = __builtin_fma(p, r, 1.0 / 720);
  p = __builtin_fma(p, r, 1.0 / 120);
  p = __builtin_fma(p, r, 1.0 / 24);
  p = __builtin_fma(p, r, 1.0 / 6);
  p = __builtin_fma(p, r, 0.5);
  p = __builtin_fma(p, r, 1.0);
  p = __builtin_fma(p, r, 1.0);
  return p * pow2d((long long)n);
}

// dlog is the natural log of x > 0 (a normal float64), about 1e-16 relative:
// x = 2^e·m with m in [sqrt(1/2), sqrt(2)), log m = 2·atanh((m-1)/(m+1)).
static __device__ __forceinline__ double dlog(double x) {
  if (!(x > 0)) return x == 0 ? -__builtin_inf() : __builtin_nan("");
  if (x == __builtin_inf()) return x;
  unsigned long long b = __builtin_bit_cast(unsigned long long, x);
  long long e = (long long)(b >> 52) - 1023;
  double m = __builtin_bit_cast(double, (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 1.4142135623730951) m *= 0.5, e++;
  const double s = (m - 1) / (m + 1), s2 = s * s;
  double p = 1.0 / 23;
  for (int k = 21; k >= 1; k -= 2) p = __builtin_fma(p, s2, 1.0 / k);
  return 2 * s * p + (double)e * 0.69314718055994530942;
}

static __device__ __forceinline__ double dsigmoid(double x) { return 1 / (1 + dexp(-x)); }

// dsoftplus is log(1 + e^x): x itself past 20, a series where e^x is small.
static __device__ __forceinline__ double dsoftplus(double x) {
  if (x > 20) return x;
  const double e = dexp(x);
  if (e < 1e-5) return e * (1 - e * (0.5 - e / 3));
  return dlog(1 + e);
}

// Block reductions for blocks of up to 1024 threads (a multiple of 32);
// every thread gets the result. scratch is 32 elements of shared memory,
// free again when the call returns.
static __device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int t = PETAL_TID_X(), lane = t & 31, warp = t >> 5, warps = PETAL_NTID_X() >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float s = 0.f;
  for (int w = 0; w < warps; w++) s += scratch[w];
  __syncthreads();
  return s;
}

static __device__ __forceinline__ int block_sum_int(int v, int* scratch) {
  const int t = PETAL_TID_X(), lane = t & 31, warp = t >> 5, warps = PETAL_NTID_X() >> 5;
  for (int o = 16; o > 0; o >>= 1) v += shfl_xor_int(v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  int s = 0;
  for (int w = 0; w < warps; w++) s += scratch[w];
  __syncthreads();
  return s;
}

static __device__ __forceinline__ unsigned long long block_max_u64(unsigned long long v, unsigned long long* scratch) {
  const int t = PETAL_TID_X(), lane = t & 31, warp = t >> 5, warps = PETAL_NTID_X() >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long u = shfl_xor_u64(v, o);
    v = u > v ? u : v;
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  unsigned long long m = 0;
  for (int w = 0; w < warps; w++) m = scratch[w] > m ? scratch[w] : m;
  __syncthreads();
  return m;
}

// block_scan_int and block_scan_f are exclusive prefix sums in thread order.
static __device__ __forceinline__ int block_scan_int(int v, int* scratch) {
  const int t = PETAL_TID_X(), lane = t & 31, warp = t >> 5, warps = PETAL_NTID_X() >> 5;
  int inc = v;
  for (int d = 1; d < 32; d <<= 1) {
    const int u = shfl_up_i(inc, d);
    if (lane >= d) inc += u;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  int base = 0;
  for (int w = 0; w < warp && w < warps; w++) base += scratch[w];
  __syncthreads();
  return base + inc - v;
}

static __device__ __forceinline__ float block_scan_f(float v, float* scratch) {
  const int t = PETAL_TID_X(), lane = t & 31, warp = t >> 5, warps = PETAL_NTID_X() >> 5;
  float inc = v;
  for (int d = 1; d < 32; d <<= 1) {
    const float u = shfl_up_f(inc, d);
    if (lane >= d) inc += u;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  float base = 0.f;
  for (int w = 0; w < warp && w < warps; w++) base += scratch[w];
  __syncthreads();
  return base + (inc - v);
}

// QDesc is a quantised matrix as the generic kernels read it (written by
// the host, cuda.matrixDesc): rows counts every row of an expert stack.
struct QDesc {
  const u32* w;
  const u16* s;
  const u16* b;
  int rows, cols, bits, group, wpr, gpr;
};

// qweight is element (r, c) of the matrix, dequantised: q·scale + bias
// (the product is exact, so this is one rounding, as on the CPU).
static __device__ __forceinline__ float qweight(const QDesc& d, long long r, int c) {
  const int per = 32 / d.bits;
  const u32 word = d.w[r * d.wpr + c / per];
  const u32 q = (word >> (d.bits * (c % per))) & ((1u << d.bits) - 1u);
  const long long g = r * d.gpr + c / d.group;
  return __builtin_fmaf((float)q, bf16_to_f32(d.s[g]), bf16_to_f32(d.b[g]));
}

// qrow_dot is row r of the matrix times x[0:cols], summed over a warp (every
// lane gets the sum): a lane takes a whole word of codes at a time (a group
// holds whole words), with its group's scale and bias.
template <int BITS>
static __device__ __forceinline__ float qrow_dot_bits(const QDesc& d, long long r, const float* x) {
  constexpr int per = 32 / BITS;
  constexpr u32 mask = (1u << BITS) - 1u;
  const int lane = PETAL_TID_X() & 31;
  const u32* w = d.w + r * d.wpr;
  const u16* s = d.s + r * d.gpr;
  const u16* b = d.b + r * d.gpr;
  float acc = 0.f;
  for (int i = lane; i < d.wpr; i += 32) {
    const u32 word = w[i];
    const int c0 = i * per, g = c0 / d.group;
    const float sc = bf16_to_f32(s[g]), bi = bf16_to_f32(b[g]);
#pragma unroll
    for (int j = 0; j < per; j++) acc += __builtin_fmaf((float)((word >> (BITS * j)) & mask), sc, bi) * x[c0 + j];
  }
  return warp_sum(acc);
}
static __device__ __forceinline__ float qrow_dot(const QDesc& d, long long r, const float* x) {
  return d.bits == 4 ? qrow_dot_bits<4>(d, r, x) : qrow_dot_bits<8>(d, r, x);
}

// The norms of ops.cu (add_rmsnorm, gated_rmsnorm) and norm_bf.cu's forms,
// which also write each output rounded to bf16 to outb (nullptr: not).
static __device__ __forceinline__ void norm_store(float* __restrict__ out, u16* __restrict__ outb,
                                                  long long i, float o) {
#ifdef NORM_OUT_OPTIONAL  // norm_bfo.cu: out null, the bf16 copy alone
  if (out)
#endif
    out[i] = o;
  if (outb) {
    u16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(o));
    outb[i] = r;
  }
}

// add_rmsnorm_row: this block's row of dim values (one block a row): h +=
// delta (when given), then out = h/rms(h)·w. red is 32 floats of shared
// memory.
static __device__ __forceinline__ void add_rmsnorm_row(float* __restrict__ h, const float* __restrict__ delta,
                                                       const float* __restrict__ w, float* __restrict__ out,
                                                       u16* __restrict__ outb, int dim, float eps,
                                                       float* red) {
  const long long base = (long long)PETAL_BID_X() * dim;
  float ss = 0.f;
  for (int i = PETAL_TID_X(); i < dim; i += PETAL_NTID_X()) {
    float v = h[base + i];
    if (delta) {
      v += delta[base + i];
      h[base + i] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = 1.f / __builtin_sqrtf(ss / dim + eps);
  for (int i = PETAL_TID_X(); i < dim; i += PETAL_NTID_X()) norm_store(out, outb, base + i, h[base + i] * inv * w[i]);
}

// gated_rmsnorm_task: a warp per (row, head) of dim values, count of
// them: out = x/rms(x)·w·silu(z).
static __device__ __forceinline__ void gated_rmsnorm_task(const float* __restrict__ x, const float* __restrict__ z,
                                                          const float* __restrict__ w, float* __restrict__ out,
                                                          u16* __restrict__ outb, int count, int dim,
                                                          float eps) {
  const int lane = PETAL_TID_X() & 31;
  const int task = PETAL_BID_X() * (PETAL_NTID_X() >> 5) + (PETAL_TID_X() >> 5);
  if (task >= count) return;
  const long long base = (long long)task * dim;
  float ss = 0.f;
  for (int i = lane; i < dim; i += 32) ss += x[base + i] * x[base + i];
  ss = warp_sum(ss);
  const float inv = 1.f / __builtin_sqrtf(ss / dim + eps);
  for (int i = lane; i < dim; i += 32) norm_store(out, outb, base + i, x[base + i] * inv * w[i] * fsilu(z[base + i]));
}

// kv_put stores v into a KV cache of float32 or bf16 (rounded to nearest
// even); kv_get reads an element back as float32.
template <typename T>
static __device__ __forceinline__ void kv_put(T* p, float v);
template <>
__device__ __forceinline__ void kv_put<float>(float* p, float v) { *p = v; }
template <>
__device__ __forceinline__ void kv_put<u16>(u16* p, float v) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
  *p = r;
}
static __device__ __forceinline__ float kv_get(const float* p) { return *p; }
static __device__ __forceinline__ float kv_get(const u16* p) { return bf16_to_f32(*p); }
