// route.metal: the MoE router of one decoded token (spec 2.8 steps 1-2):
// the sibling of engine/cuda/kernels/route.cu, in two dispatches where the
// CUDA kernel uses one:
//
//   route_logits<bits>: logits = router·x (MLX affine 4- or 8-bit, groups
//     of 64, float32), one simdgroup per expert row; any grid size.
//   route_select: one threadgroup of ROUTE_SIMDGROUPS*32 threads: the topk
//     largest logits (rank = how many beat a logit: a larger one, or an
//     equal one with a lower id) and their softmax weights, renormalised
//     over the selected experts or not.
//
// CUDA lets the last block select (a ticket and a device-scope fence);
// Metal before MSL 3.2 has no device-scope fence, so the selection is the
// next dispatch, after a barrier in the same encoder. The arithmetic and
// its order are the CUDA kernel's.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"

#define ROUTE_SIMDGROUPS 8
#define ROUTE_MAX_EXPERTS 1024
#define ROUTE_MAX_TOPK 32

// group_dot is s*sum(q*x) + b*sum(x) over one group of 64: 8 words of
// 4-bit codes or 16 of 8-bit ones at p, x the matching inputs.
template <int BITS>
static inline float group_dot(device const uint* p, device const float* x, float s, float b) {
  float acc = 0.f, xs = 0.f;
  if (BITS == 8) {
    for (int k = 0; k < 64; k++) {
      const float q = as_type<float>(((p[k >> 2] >> (8 * (k & 3))) & 0xFFu) | 0x4B000000u) - 8388608.f;
      acc += q * x[k];
      xs += x[k];
    }
  } else {
    for (int k = 0; k < 64; k++) {
      const float q = as_type<float>(((p[k >> 3] >> (4 * (k & 7))) & 0xFu) | 0x4B000000u) - 8388608.f;
      acc += q * x[k];
      xs += x[k];
    }
  }
  return s * acc + b * xs;
}

template <int BITS>
static inline void route_logits(device const uint* words, device const ushort* scales, device const ushort* biases,
                                device const float* x, device float* logits, constant RouteParams& p, uint tid,
                                uint bid, uint nbid) {
  const int lane = tid & 31, warp = tid >> 5;
  const int groups = p.cols / 64;
  const int wpg = BITS * 2;  // words per group
  const ulong wpr = ulong(groups * wpg);
  for (int r = int(bid) * ROUTE_SIMDGROUPS + warp; r < p.experts; r += int(nbid) * ROUTE_SIMDGROUPS) {
    float acc = 0.f;
    for (int g = lane; g < groups; g += 32) {
      const ulong gi = ulong(r) * ulong(groups) + ulong(g);
      acc += group_dot<BITS>(words + ulong(r) * wpr + ulong(g * wpg), x + 64 * g, bf16_to_f32(scales[gi]),
                             bf16_to_f32(biases[gi]));
    }
    acc = warp_sum(acc);
    if (lane == 0) logits[r] = acc;
  }
}

kernel void route_logits4(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                          device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                          device float* logits [[buffer(4)]], constant RouteParams& p [[buffer(5)]],
                          uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                          uint nbid [[threadgroups_per_grid]]) {
  route_logits<4>(words, scales, biases, x, logits, p, tid, bid, nbid);
}
kernel void route_logits8(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                          device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                          device float* logits [[buffer(4)]], constant RouteParams& p [[buffer(5)]],
                          uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                          uint nbid [[threadgroups_per_grid]]) {
  route_logits<8>(words, scales, biases, x, logits, p, tid, bid, nbid);
}

// route_select: experts <= ROUTE_MAX_EXPERTS, topk <= ROUTE_MAX_TOPK.
kernel void route_select(device const float* logits [[buffer(0)]], device int* ids [[buffer(1)]],
                         device float* wts [[buffer(2)]], constant RouteParams& p [[buffer(3)]],
                         uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float ls[ROUTE_MAX_EXPERTS];
  threadgroup float selV[ROUTE_MAX_TOPK];
  threadgroup int selI[ROUTE_MAX_TOPK];
  const int lane = tid & 31, warp = tid >> 5;
  for (int e = tid; e < p.experts; e += ROUTE_SIMDGROUPS * 32) ls[e] = logits[e];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int e = tid; e < p.experts; e += ROUTE_SIMDGROUPS * 32) {
    const float v = ls[e];
    int rank = 0;
    for (int f = 0; f < p.experts; f++) {
      const float u = ls[f];
      rank += (u > v || (u == v && f < e)) ? 1 : 0;
    }
    if (rank < p.topk) {
      selV[rank] = v;
      selI[rank] = e;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (warp != 0) return;
  const float m = selV[0];
  const float mine = lane < p.topk ? exp(selV[lane] - m) : 0.f;
  float denom = 0.f;
  if (p.normalize != 0) {
    denom = warp_sum(mine);
  } else {
    for (int e = lane; e < p.experts; e += 32) denom += exp(ls[e] - m);
    denom = warp_sum(denom);
  }
  if (lane < p.topk) {
    ids[lane] = selI[lane];
    wts[lane] = mine / denom;
  }
}
