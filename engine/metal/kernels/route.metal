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
//   route_logits_norm<bits>, route_select_norm: the same with the
//     add-and-norm before the router (route.cu's route_norm): every
//     threadgroup of the logits forms x from h and delta itself, in
//     add_rmsnorm's order with as many threads (256), so x is bit for bit
//     add_rmsnorm's, and writes nothing but logits; the selection, once
//     every threadgroup has read h, writes h and x back (add_rmsnorm_row).
//
// CUDA lets the last block select (a ticket and a device-scope fence);
// Metal before MSL 3.2 has no device-scope fence, so the selection is the
// next dispatch, after a barrier in the same encoder. The arithmetic and
// its order are the CUDA kernel's.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "rowmath.h"

#define ROUTE_SIMDGROUPS 8
#define ROUTE_MAX_EXPERTS 1024
#define ROUTE_MAX_TOPK 32
// ROUTE_NORM_MAX_COLS bounds route_logits_norm's row (staged in
// threadgroup memory: 16 KiB of Metal's 32).
#define ROUTE_NORM_MAX_COLS 4096

// group_dot is s*sum(q*x) + b*sum(x) over one group of 64: 8 words of
// 4-bit codes or 16 of 8-bit ones at p, x the matching inputs (device or
// threadgroup memory).
template <int BITS, typename X>
static inline float group_dot(device const uint* p, X x, float s, float b) {
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

template <int BITS, typename X>
static inline void route_logits(device const uint* words, device const ushort* scales, device const ushort* biases,
                                X x, device float* logits, int experts, int cols, uint tid, uint bid, uint nbid) {
  const int lane = tid & 31, warp = tid >> 5;
  const int groups = cols / 64;
  const int wpg = BITS * 2;  // words per group
  const ulong wpr = ulong(groups * wpg);
  for (int r = int(bid) * ROUTE_SIMDGROUPS + warp; r < experts; r += int(nbid) * ROUTE_SIMDGROUPS) {
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
  route_logits<4>(words, scales, biases, x, logits, p.experts, p.cols, tid, bid, nbid);
}
kernel void route_logits8(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                          device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                          device float* logits [[buffer(4)]], constant RouteParams& p [[buffer(5)]],
                          uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                          uint nbid [[threadgroups_per_grid]]) {
  route_logits<8>(words, scales, biases, x, logits, p.experts, p.cols, tid, bid, nbid);
}

// route_key orders logits as ints (route.cu's): a larger logit a larger
// key, -0 as +0, NaN below every number.
static inline int route_key(float v) {
  if (is_nan(v)) return int(0x80000000u);
  const int b = as_type<int>(v + 0.f);
  return b >= 0 ? b : int(0x80000000u - uint(b));
}

// route_choose is the selection of route_select over logits, in one
// threadgroup of ROUTE_SIMDGROUPS*32 threads, with its threadgroup arrays
// (ls and ks of ROUTE_MAX_EXPERTS, selV and selI of ROUTE_MAX_TOPK). The
// ranks are over order keys, computed once per logit, so that they are
// distinct even for NaN logits (every NaN equal, below every number) and
// every slot of the topk gets an expert in range: ranking the floats gave
// every NaN rank 0 and left slots unwritten.
static inline void route_choose(device const float* logits, device int* ids, device float* wts, int experts, int topk,
                                int normalize, threadgroup float* ls, threadgroup int* ks, threadgroup float* selV,
                                threadgroup int* selI, uint tid) {
  const int lane = tid & 31, warp = tid >> 5;
  for (int e = tid; e < experts; e += ROUTE_SIMDGROUPS * 32) {
    ls[e] = logits[e];
    ks[e] = route_key(ls[e]);
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int e = tid; e < experts; e += ROUTE_SIMDGROUPS * 32) {
    const float v = ls[e];
    const int kv = ks[e];
    int rank = 0;
    for (int f = 0; f < experts; f++) {
      const int ku = ks[f];
      rank += (ku > kv || (ku == kv && f < e)) ? 1 : 0;
    }
    if (rank < topk) {
      selV[rank] = v;
      selI[rank] = e;
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (warp != 0) return;
  const float m = selV[0];
  const float mine = lane < topk ? exp(selV[lane] - m) : 0.f;
  float denom = 0.f;
  if (normalize != 0) {
    denom = warp_sum(mine);
  } else {
    for (int e = lane; e < experts; e += 32) denom += exp(ls[e] - m);
    denom = warp_sum(denom);
  }
  if (lane < topk) {
    ids[lane] = selI[lane];
    wts[lane] = mine / denom;
  }
}

// route_select: experts <= ROUTE_MAX_EXPERTS, topk <= ROUTE_MAX_TOPK.
kernel void route_select(device const float* logits [[buffer(0)]], device int* ids [[buffer(1)]],
                         device float* wts [[buffer(2)]], constant RouteParams& p [[buffer(3)]],
                         uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float ls[ROUTE_MAX_EXPERTS];
  threadgroup int ks[ROUTE_MAX_EXPERTS];
  threadgroup float selV[ROUTE_MAX_TOPK];
  threadgroup int selI[ROUTE_MAX_TOPK];
  route_choose(logits, ids, wts, p.experts, p.topk, p.normalize, ls, ks, selV, selI, tid);
}

// route_logits_norm<bits>: route_logits<bits> with x the add-and-norm of h
// (h + delta where p.hasDelta, over the norm weight nw), formed in
// threadgroup memory by every threadgroup; h is only read. Threadgroups of
// ROUTE_SIMDGROUPS*32 (256) threads, p.cols <= ROUTE_NORM_MAX_COLS.
template <int BITS>
static inline void route_logits_norm(device const uint* words, device const ushort* scales, device const ushort* biases,
                                     device const float* h, device const float* delta, device const float* nw,
                                     device float* logits, constant RouteNormParams& p, uint tid, uint bid, uint nbid,
                                     threadgroup float* xs, threadgroup float* red) {
  norm_stage(h, delta, nw, p.cols, p.hasDelta != 0, p.eps, xs, red, int(tid), ROUTE_SIMDGROUPS * 32);
  route_logits<BITS>(words, scales, biases, xs, logits, p.experts, p.cols, tid, bid, nbid);
}

kernel void route_logits_norm4(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                               device const ushort* biases [[buffer(2)]], device const float* h [[buffer(3)]],
                               device const float* delta [[buffer(4)]], device const float* nw [[buffer(5)]],
                               device float* logits [[buffer(6)]], constant RouteNormParams& p [[buffer(7)]],
                               uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                               uint nbid [[threadgroups_per_grid]]) {
  threadgroup float xs[ROUTE_NORM_MAX_COLS];
  threadgroup float red[32];
  route_logits_norm<4>(words, scales, biases, h, delta, nw, logits, p, tid, bid, nbid, xs, red);
}
kernel void route_logits_norm8(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                               device const ushort* biases [[buffer(2)]], device const float* h [[buffer(3)]],
                               device const float* delta [[buffer(4)]], device const float* nw [[buffer(5)]],
                               device float* logits [[buffer(6)]], constant RouteNormParams& p [[buffer(7)]],
                               uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                               uint nbid [[threadgroups_per_grid]]) {
  threadgroup float xs[ROUTE_NORM_MAX_COLS];
  threadgroup float red[32];
  route_logits_norm<8>(words, scales, biases, h, delta, nw, logits, p, tid, bid, nbid, xs, red);
}

// route_select_norm: route_select after route_logits_norm, first writing
// the add-and-norm back as add_rmsnorm does (h += delta where p.hasDelta,
// out = the normed row: add_rmsnorm_row with add_rmsnorm's 256 threads),
// now that every threadgroup of the logits has read h.
kernel void route_select_norm(device const float* logits [[buffer(0)]], device int* ids [[buffer(1)]],
                              device float* wts [[buffer(2)]], device float* h [[buffer(3)]],
                              device const float* delta [[buffer(4)]], device const float* nw [[buffer(5)]],
                              device float* out [[buffer(6)]], constant RouteNormParams& p [[buffer(7)]],
                              uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float ls[ROUTE_MAX_EXPERTS];
  threadgroup int ks[ROUTE_MAX_EXPERTS];
  threadgroup float selV[ROUTE_MAX_TOPK];
  threadgroup int selI[ROUTE_MAX_TOPK];
  threadgroup float red[32];
  add_rmsnorm_row(h, delta, nw, out, p.cols, p.hasDelta != 0, p.eps, red, int(tid), ROUTE_SIMDGROUPS * 32);
  route_choose(logits, ids, wts, p.experts, p.topk, p.normalize, ls, ks, selV, selI, tid);
}
