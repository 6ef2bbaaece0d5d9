// route.h: the parts of the MoE router of one decoded token (spec 2.8
// steps 1-2) that route.cu's kernels and moe.cu's one-launch MoE layer
// share: the router's logits, a warp per expert, and the selection of the
// top-k experts and their softmax weights over all the logits, which one
// block does once every block has written its logits.
#pragma once
#include "qgroup.h"

#define ROUTE_WARPS 8

static __device__ __forceinline__ float route_exp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}

// group_dot is s*sum(q*x) + b*sum(x) over one group of 64 of a row: 8 words
// of 4-bit codes or 16 of 8-bit ones at p, x the matching 64 inputs (16-byte
// aligned, read 16 bytes at a time; the sums in element order).
template <int BITS>
static __device__ __forceinline__ float group_dot(const u32* __restrict__ p, const float* x, float s, float b) {
  const float4v* x4 = (const float4v*)x;
  float acc = 0.f, xs = 0.f;
  if (BITS == 8) {
    u32x4 w[4] = {ld_stream_16(p), ld_stream_16(p + 4), ld_stream_16(p + 8), ld_stream_16(p + 12)};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const float4v v = x4[4 * i + c];
        const float xv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int m = 0; m < 4; m++) {
          // A byte OR-ed into 2^23's bits is the float 2^23 + q, exactly.
          const float q = __uint_as_float(((ws[c] >> (8 * m)) & 0xFFu) | 0x4B000000u) - 8388608.f;
          acc += q * xv[m];
          xs += xv[m];
        }
      }
    }
  } else {
    u32x4 w[2] = {ld_stream_16(p), ld_stream_16(p + 4)};
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
      for (int c = 0; c < 8; c++) {
        const float4v v = x4[8 * i + c];
        const float xv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int m = 0; m < 4; m++) {
          const float q = __uint_as_float(((ws[c >> 1] >> (4 * (4 * (c & 1) + m))) & 0xFu) | 0x4B000000u) - 8388608.f;
          acc += q * xv[m];
          xs += xv[m];
        }
      }
    }
  }
  return s * acc + b * xs;
}

// route_key orders logits as ints: nan_low_key's order (rowmath.h) as a
// signed int, a larger logit a larger key, -0 as +0, NaN below every
// number. (Kept apart from nan_low_key: the decode kernel's PTX with it
// has not run on a GPU yet.)
static __device__ __forceinline__ int route_key(float v) {
  if (v != v) return (int)0x80000000;
  const int b = (int)__float_as_uint(v + 0.f);
  return b >= 0 ? b : (int)(0x80000000u - (u32)b);
}

// route_logits writes logits[r] = router row r · xs for the rows of the
// warps of block vb of nvb (ROUTE_WARPS warps a block, a warp a row); xs is
// x in shared memory, XS floats a group of 64 (68: padded so that the lanes,
// a group each, read distinct banks).
template <int BITS, int XS>
static __device__ __forceinline__ void route_logits(const u32* __restrict__ words, const u16* __restrict__ scales,
                                                    const u16* __restrict__ biases, const float* xs, float* logits,
                                                    int experts, int cols, int vb, int nvb) {
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int groups = cols / 64;
  const int wpg = BITS * 2;  // words per group
  const long long wpr = (long long)groups * wpg;
  for (int r = vb * ROUTE_WARPS + warp; r < experts; r += nvb * ROUTE_WARPS) {
    float acc = 0.f;
    for (int g = lane; g < groups; g += 32) {
      const long long gi = (long long)r * groups + g;
      acc += group_dot<BITS>(words + r * wpr + g * wpg, xs + XS * g, bf16_to_f32(scales[gi]), bf16_to_f32(biases[gi]));
    }
    acc = warp_sum(acc);
    if (lane == 0) logits[r] = acc;
  }
}

// route_prefetch asks L2 for the first router row of each warp of block vb
// (prefetch_l2), before x is staged.
template <int BITS>
static __device__ __forceinline__ void route_prefetch(const u32* __restrict__ words, int experts, int cols, int vb) {
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int r = vb * ROUTE_WARPS + warp, wpg = BITS * 2;
  for (int g = lane; r < experts && g < cols / 64; g += 32) prefetch_l2(words + (long long)r * (cols / 64) * wpg + g * wpg);
}

// route_rank_key orders experts for the choice: a larger logit first (NaN
// below every number, -0 as +0: route_key's order), then the lower id;
// every key is distinct and above 0. (rowmath.h's rank_key is the same
// key; route.h does not include rowmath.h, whose fexp moe.cu defines too.)
static __device__ __forceinline__ u64 route_rank_key(float v, int e) {
  return (u64)((u32)route_key(v) ^ 0x80000000u) << 32 | (0xffffffffu - (u32)e);
}

static __device__ __forceinline__ u64 route_warp_max(u64 k) {
  for (int o = 16; o > 0; o >>= 1) {
    const u32 hi = __nvvm_shfl_sync_bfly_i32(0xffffffffu, (int)(k >> 32), o, 0x1f);
    const u32 lo = __nvvm_shfl_sync_bfly_i32(0xffffffffu, (int)k, o, 0x1f);
    const u64 other = (u64)hi << 32 | lo;
    k = other > k ? other : k;
  }
  return k;
}

// route_select, by every thread of one block once all the logits are
// written (and made visible to it), writes the topk largest logits' experts
// to ids, in order, and their softmax weights to wts, over the selected
// experts (normalize) or over all; ls and ks are 2·experts words of shared
// memory.
static __device__ __forceinline__ void route_select(const float* logits, float* ls, int* ks, int* ids, float* wts,
                                                    int experts, int topk, int normalize) {
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, nthreads = PETAL_NTID_X(), nwarps = nthreads >> 5;
  __shared__ u64 wmax[32];
  __shared__ int ncand;
  __shared__ float selV[32];
  __shared__ int selI[32];
  if (tid == 0) ncand = 0;
  u64 best = 0;  // below every key
  for (int e = tid; e < experts; e += nthreads) {
    const float v = ((volatile const float*)logits)[e];
    ls[e] = v;
    const u64 k = route_rank_key(v, e);
    best = k > best ? k : best;
  }
  best = route_warp_max(best);
  if (lane == 0) wmax[warp] = best;
  __syncthreads();
  // Only keys at least the least of the warps' largest can be among the
  // topk where at least topk warps hold experts (each warp's largest is
  // one such key); they are the candidates, about twice topk for 256
  // experts, and are ranked among themselves (the number of candidates
  // with a larger key: the keys are distinct). With fewer warps every
  // expert is a candidate.
  const int holding = nwarps < (experts + 31) / 32 ? nwarps : (experts + 31) / 32;
  u64 least = 0;
  if (holding >= topk) {
    least = ~0ull;
    for (int w = 0; w < holding; w++) least = wmax[w] < least ? wmax[w] : least;
  }
  for (int e = tid; e < experts; e += nthreads) {
    if (route_rank_key(ls[e], e) >= least) ks[__nvvm_atom_add_gen_i(&ncand, 1)] = e;
  }
  __syncthreads();
  const int C = ncand;
  for (int c = tid; c < C; c += nthreads) {
    const int e = ks[c];
    const u64 kc = route_rank_key(ls[e], e);
    int rank = 0;
    for (int j = 0; j < C; j++) {
      const int f = ks[j];
      rank += route_rank_key(ls[f], f) > kc;
    }
    if (rank < topk) selV[rank] = ls[e], selI[rank] = e;
  }
  __syncthreads();
  if (warp == 0) {
    const float m = selV[0];
    const float mine = lane < topk ? route_exp(selV[lane] - m) : 0.f;
    float denom = 0.f;
    if (normalize) {
      denom = warp_sum(mine);
    } else {
      for (int e = lane; e < experts; e += 32) denom += route_exp(ls[e] - m);
      denom = warp_sum(denom);
    }
    if (lane < topk) {
      ids[lane] = selI[lane];
      wts[lane] = mine / denom;
    }
  }
}
