// qgroup.h: one group of 64 weights of an MLX affine 4-bit row against the
// matching 64 inputs, for the Metal kernels: the QM_F32 kind of
// engine/cuda/kernels/qgroup.h (exact float32: a code OR-ed into 2^k's bits
// is the float 2^k+q, one subtraction leaves q), in the same order of
// additions (two interleaved sums). The CUDA kernels stage x and its group
// sums in shared memory; these read x from device memory and form the
// group sum where it is used, in the order the CUDA staging sums it (eight
// strided partial sums, then a tree), so that no threadgroup-memory limit
// caps the row length.
#pragma once

static inline float bf16_to_f32(ushort b) { return as_type<float>(uint(b) << 16); }

// f32_to_bf16 rounds to nearest even (a NaN stays a NaN).
static inline ushort f32_to_bf16(float f) {
  const uint u = as_type<uint>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ushort((u >> 16) | 0x40u);
  return ushort((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// warp_sum is the butterfly of qgroup.h's warp_sum (offsets 16 down to 1):
// the CUDA kernels' order, which simd_sum does not promise.
static inline float warp_sum(float v) {
  for (ushort o = 16; o > 0; o >>= 1) v += simd_shuffle_xor(v, o);
  return v;
}

// group_sum is sum(x) over 64 inputs: lane-like partial sums of x[s],
// x[s+8], ..., x[s+56] for s = 0..7, combined as the three shuffles of the
// CUDA staging combine them. X is a pointer to the inputs in device or
// threadgroup memory (a kernel that forms x itself stages it there).
template <typename X>
static inline float group_sum(X x) {
  float p[8];
  for (int s = 0; s < 8; s++) {
    float a = 0.f;
    for (int k = 0; k < 8; k++) a += x[s + 8 * k];
    p[s] = a;
  }
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

// qdot_f32 is sum(q*x) over one group: w its 8 code words (element 8i+k in
// bits 4k..4k+3 of word i), x its 64 inputs (device or threadgroup
// memory, as group_sum's).
template <typename X>
static inline float qdot_f32(device const uint* w, X x) {
  float s0 = 0.f, s1 = 0.f;
  for (int i = 0; i < 8; i++) {
    const uint lo = w[i], hi = w[i] >> 16;
    const int c = 8 * i;
    s0 += (as_type<float>((lo & 0xFu) | 0x4B000000u) - 8388608.f) * x[c + 0];
    s1 += (as_type<float>((lo & 0xF0u) | 0x49000000u) - 524288.f) * x[c + 1];
    s0 += (as_type<float>((lo & 0xF00u) | 0x47000000u) - 32768.f) * x[c + 2];
    s1 += (as_type<float>((lo & 0xF000u) | 0x45000000u) - 2048.f) * x[c + 3];
    s0 += (as_type<float>((hi & 0xFu) | 0x4B000000u) - 8388608.f) * x[c + 4];
    s1 += (as_type<float>((hi & 0xF0u) | 0x49000000u) - 524288.f) * x[c + 5];
    s0 += (as_type<float>((hi & 0xF00u) | 0x47000000u) - 32768.f) * x[c + 6];
    s1 += (as_type<float>((hi & 0xF000u) | 0x45000000u) - 2048.f) * x[c + 7];
  }
  return s0 + s1;
}

// load_sb reads group i's scale and bias: MLX's two bf16 arrays (SB 0), or
// one u32 per group, scale in the low half and bias in the high (SB 1, made
// at upload), passed as sc.
template <int SB>
static inline void load_sb(device const ushort* sc, device const ushort* bi, ulong i, thread float& s, thread float& b) {
  if (SB) {
    const uint v = ((device const uint*)sc)[i];
    s = as_type<float>(v << 16);
    b = as_type<float>(v & 0xffff0000u);
  } else {
    s = bf16_to_f32(sc[i]);
    b = bf16_to_f32(bi[i]);
  }
}
