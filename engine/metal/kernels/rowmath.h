// rowmath.h: what the generic row kernels (ops.metal, sample.metal) share,
// the Metal side of engine/cuda/kernels/rowmath.h: threadgroup reductions
// and scans in the CUDA helpers' order, the quantised matrix read through a
// QShape (params.h) and its three buffers, and float32 exp where the CUDA
// kernels use float64 (Apple GPUs have none).
//
// The thread's index t and the threadgroup's size nt are arguments (Metal
// has them as attributes of the kernel only); threadgroups are a multiple
// of 32 threads, at most 1024; scratch is 32 elements of threadgroup
// memory, free again when a call returns.
#pragma once
#include "qgroup.h"

static inline float f32_nan() { return as_type<float>(0x7fc00000u); }
static inline float f32_inf() { return as_type<float>(0x7f800000u); }
static inline bool is_nan(float x) { return x != x; }

// exp_acc is e^x in float32 within about 2 units in the last place, for
// the results the CUDA kernels take from float64 (dexp: gates, softmax,
// sampling weights): x = n·ln2 + r (Cody-Waite, two parts), e^r by its
// Taylor series to r^7 on |r| <= 0.35, times 2^n in two steps so that
// results down to 2^-149 are formed; 0 below -104, inf above 89. Safe math
// (fma kept) is assumed, as everywhere in these kernels.
static inline float exp_acc(float x) {
  if (x < -104.f) return 0.f;
  if (x > 89.f) return f32_inf();
  const float n = rint(x * 1.44269504088896341f);
  float r = fma(-n, 0.693145751953125f, x);
  r = fma(-n, 1.42860682030941723e-6f, r);
  float p = 1.f / 5040;
  p = fma(p, r, 1.f / 720);
  p = fma(p, r, 1.f / 120);
  p = fma(p, r, 1.f / 24);
  p = fma(p, r, 1.f / 6);
  p = fma(p, r, 0.5f);
  p = fma(p, r, 1.f);
  p = fma(p, r, 1.f);
  const int e = int(n);
  const int e1 = e / 2, e2 = e - e1;  // 2^e as two factors, each a normal float
  return p * as_type<float>(uint(e1 + 127) << 23) * as_type<float>(uint(e2 + 127) << 23);
}

static inline float fsigmoid(float x) { return 1.f / (1.f + exp(-x)); }
static inline float fsilu(float x) { return x / (1.f + exp(-x)); }

// Threadgroup reductions for threadgroups of up to 1024 threads; every
// thread gets the result, in the order of rowmath.h's block_sum: each
// simdgroup's butterfly, then the simdgroups' sums in order.
static inline float block_sum(float v, threadgroup float* scratch, int t, int nt) {
  const int lane = t & 31, warp = t >> 5, warps = nt >> 5;
  v = warp_sum(v);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lane == 0) scratch[warp] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.f;
  for (int w = 0; w < warps; w++) s += scratch[w];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return s;
}

// add_rmsnorm_row is add_rmsnorm (ops.metal) on one row of dim by a
// threadgroup of nt threads: h += delta where hasDelta, then out =
// h/rms(h)·w, thread t taking elements t, t+nt, ... and the sum of
// squares reduced by block_sum. The fused kernels that write a norm's
// results back (route_select_norm) call it with the same nt (256), so
// their bits are add_rmsnorm's.
static inline void add_rmsnorm_row(device float* h, device const float* delta, device const float* w, device float* out,
                                   int dim, bool hasDelta, float eps, threadgroup float* red, int t, int nt) {
  float ss = 0.f;
  for (int i = t; i < dim; i += nt) {
    float v = h[i];
    if (hasDelta) {
      v += delta[i];
      h[i] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, red, t, nt);
  const float inv = 1.f / sqrt(ss / dim + eps);
  for (int i = t; i < dim; i += nt) out[i] = h[i] * inv * w[i];
}

// norm_stage is add_rmsnorm_row's out, written to xs (threadgroup memory)
// and nothing written to device memory: for a fused kernel whose every
// threadgroup forms the normed row it reads (route_logits_norm,
// qmv_group_norm) while another threadgroup may still be reading h. The
// same order of operations with the same nt, so xs is bit for bit what
// add_rmsnorm writes. Ends with a threadgroup barrier.
static inline void norm_stage(device const float* h, device const float* delta, device const float* w, int dim,
                              bool hasDelta, float eps, threadgroup float* xs, threadgroup float* red, int t, int nt) {
  float ss = 0.f;
  for (int i = t; i < dim; i += nt) {
    float v = h[i];
    if (hasDelta) v += delta[i];
    xs[i] = v;
    ss += v * v;
  }
  ss = block_sum(ss, red, t, nt);
  const float inv = 1.f / sqrt(ss / dim + eps);
  for (int i = t; i < dim; i += nt) xs[i] = xs[i] * inv * w[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
}

static inline int block_sum_int(int v, threadgroup int* scratch, int t, int nt) {
  const int lane = t & 31, warp = t >> 5, warps = nt >> 5;
  for (ushort o = 16; o > 0; o >>= 1) v += simd_shuffle_xor(v, o);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lane == 0) scratch[warp] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int s = 0;
  for (int w = 0; w < warps; w++) s += scratch[w];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return s;
}

// A 64-bit key crosses lanes as two 32-bit halves (Metal's simd shuffles
// of 64-bit types are not in every language version).
static inline ulong shuffle_xor_u64(ulong v, ushort m) {
  const uint lo = simd_shuffle_xor(uint(v), m), hi = simd_shuffle_xor(uint(v >> 32), m);
  return ulong(lo) | ulong(hi) << 32;
}

static inline ulong warp_max_u64(ulong v) {
  for (ushort o = 16; o > 0; o >>= 1) {
    const ulong u = shuffle_xor_u64(v, o);
    v = u > v ? u : v;
  }
  return v;
}

static inline ulong block_max_u64(ulong v, threadgroup ulong* scratch, int t, int nt) {
  const int lane = t & 31, warp = t >> 5, warps = nt >> 5;
  v = warp_max_u64(v);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lane == 0) scratch[warp] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  ulong m = 0;
  for (int w = 0; w < warps; w++) m = scratch[w] > m ? scratch[w] : m;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return m;
}

// block_scan_int and block_scan_f are exclusive prefix sums in thread
// order: an inclusive scan within each simdgroup (shifts 1, 2, 4, 8, 16),
// then the simdgroups' totals before this one, in order.
static inline int block_scan_int(int v, threadgroup int* scratch, int t, int nt) {
  const int lane = t & 31, warp = t >> 5, warps = nt >> 5;
  int inc = v;
  for (ushort d = 1; d < 32; d <<= 1) {
    const int u = simd_shuffle_up(inc, d);
    if (lane >= d) inc += u;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lane == 31) scratch[warp] = inc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int base = 0;
  for (int w = 0; w < warp && w < warps; w++) base += scratch[w];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return base + inc - v;
}

static inline float block_scan_f(float v, threadgroup float* scratch, int t, int nt) {
  const int lane = t & 31, warp = t >> 5, warps = nt >> 5;
  float inc = v;
  for (ushort d = 1; d < 32; d <<= 1) {
    const float u = simd_shuffle_up(inc, d);
    if (lane >= d) inc += u;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lane == 31) scratch[warp] = inc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float base = 0.f;
  for (int w = 0; w < warp && w < warps; w++) base += scratch[w];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return base + (inc - v);
}

// A quantised matrix as the generic kernels read it: its codes, MLX's bf16
// scales and biases, and its QShape (params.h; rows counts every row of an
// expert stack).
struct QMat {
  device const uint* w;
  device const ushort* s;
  device const ushort* b;
  int rows, cols, bits, group, wpr, gpr;
};

static inline QMat qmat(device const uint* w, device const ushort* s, device const ushort* b, constant QShape& d) {
  QMat m;
  m.w = w, m.s = s, m.b = b;
  m.rows = d.rows, m.cols = d.cols, m.bits = d.bits, m.group = d.group, m.wpr = d.wpr, m.gpr = d.gpr;
  return m;
}

// qweight is element (r, c), dequantised: q·scale + bias in one fma (the
// product is exact, so this is one rounding, as on the CPU).
static inline float qweight(thread const QMat& d, ulong r, int c) {
  const int per = 32 / d.bits;
  const uint word = d.w[r * ulong(d.wpr) + ulong(c / per)];
  const uint q = (word >> uint(d.bits * (c % per))) & ((1u << uint(d.bits)) - 1u);
  const ulong g = r * ulong(d.gpr) + ulong(c / d.group);
  return fma(float(q), bf16_to_f32(d.s[g]), bf16_to_f32(d.b[g]));
}

// qrow_dot is row r times x[0:cols], summed over the simdgroup (every lane
// gets the sum): a lane takes a whole word of codes at a time (a group
// holds whole words), with its group's scale and bias.
template <int BITS>
static inline float qrow_dot_bits(thread const QMat& d, ulong r, device const float* x, int lane) {
  const int per = 32 / BITS;
  const uint mask = (1u << BITS) - 1u;
  device const uint* w = d.w + r * ulong(d.wpr);
  device const ushort* s = d.s + r * ulong(d.gpr);
  device const ushort* b = d.b + r * ulong(d.gpr);
  float acc = 0.f;
  for (int i = lane; i < d.wpr; i += 32) {
    const uint word = w[i];
    const int c0 = i * per, g = c0 / d.group;
    const float sc = bf16_to_f32(s[g]), bi = bf16_to_f32(b[g]);
    for (int j = 0; j < per; j++) acc += fma(float((word >> uint(BITS * j)) & mask), sc, bi) * x[c0 + j];
  }
  return warp_sum(acc);
}
static inline float qrow_dot(thread const QMat& d, ulong r, device const float* x, int lane) {
  return d.bits == 4 ? qrow_dot_bits<4>(d, r, x, lane) : qrow_dot_bits<8>(d, r, x, lane);
}
