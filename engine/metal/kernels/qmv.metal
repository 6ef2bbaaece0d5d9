// qmv.metal: y = W·x for MLX affine 4-bit matrices (spec 3.4), one token:
// the sibling of engine/cuda/kernels/qmv.cu in its exact float32 kind.
//
// A team of p.team lanes (a power of two, at most 32, at most the groups in
// a row) shares a row, lane t taking groups t, t+team, ...; each lane works
// on R rows at once. The grid is persistent: threadgroup b of n takes row
// groups b, b+n, ... Launch threadgroups of QMV_SIMDGROUPS*32 threads.
//
// qmv_group takes the matrices of a QLinearGroup (up to QMV_GROUP of the
// same width against one x) in one dispatch, as qmv.cu's grouped path;
// qmv_group_norm forms x itself from the layer's add-and-norm, in every
// threadgroup (qmv.cu's last block writes h and x back; here that is the
// next dispatch, add_rmsnorm, after a barrier).
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "rowmath.h"

#define QMV_SIMDGROUPS 8
#define QMV_GROUP 4
// QMV_NORM_MAX_COLS bounds qmv_group_norm's row (staged in threadgroup
// memory: 16 KiB of Metal's 32).
#define QMV_NORM_MAX_COLS 4096

template <int R, int SB>
static inline void qmv(device const uint* words, device const ushort* scales, device const ushort* biases,
                       device const float* x, device float* y, constant QmvParams& p, uint tid, uint bid, uint nbid) {
  const int groups = p.cols / 64;
  const int lane = tid & 31, warp = tid >> 5;
  const int team = p.team, sub = lane / team, tl = lane % team;
  const int rowsPerWarp = (32 / team) * R;
  const ulong wpr = ulong(p.cols / 8);
  const int nwarps = int(nbid) * QMV_SIMDGROUPS;
  for (int base = (int(bid) * QMV_SIMDGROUPS + warp) * rowsPerWarp; base < p.rows; base += nwarps * rowsPerWarp) {
    ulong row[R];
    float acc[R];
    for (int j = 0; j < R; j++) {
      const int r = base + sub * R + j;
      row[j] = ulong(r < p.rows ? r : p.rows - 1);  // load a real row; only the store is skipped
      acc[j] = 0.f;
    }
    for (int g = tl; g < groups; g += team) {
      device const float* xg = x + 64 * g;
      const float gs = group_sum(xg);
      for (int j = 0; j < R; j++) {
        float s, b;
        load_sb<SB>(scales, biases, row[j] * ulong(groups) + ulong(g), s, b);
        // fma written out: left to contraction, s*q + b*gs fused either
        // product, and qmv_group's rows then differed from these in the
        // last bit
        acc[j] += fma(s, qdot_f32(words + row[j] * wpr + ulong(g * 8), xg), b * gs);
      }
    }
    for (int j = 0; j < R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) acc[j] += simd_shuffle_xor(acc[j], ushort(off));
      const int r = base + sub * R + j;
      if (tl == 0 && r < p.rows) y[r] = acc[j];
    }
  }
}

// Entry points qmv_f32_r<R>[_sb]: _sb takes the interleaved scale/bias
// words as scales (biases is bound but unused).
kernel void qmv_f32_r4(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                       device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                       device float* y [[buffer(4)]], constant QmvParams& p [[buffer(5)]],
                       uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                       uint nbid [[threadgroups_per_grid]]) {
  qmv<4, 0>(words, scales, biases, x, y, p, tid, bid, nbid);
}
kernel void qmv_f32_r4_sb(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                          device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                          device float* y [[buffer(4)]], constant QmvParams& p [[buffer(5)]],
                          uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                          uint nbid [[threadgroups_per_grid]]) {
  qmv<4, 1>(words, scales, biases, x, y, p, tid, bid, nbid);
}
kernel void qmv_f32_r2_sb(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                          device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                          device float* y [[buffer(4)]], constant QmvParams& p [[buffer(5)]],
                          uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                          uint nbid [[threadgroups_per_grid]]) {
  qmv<2, 1>(words, scales, biases, x, y, p, tid, bid, nbid);
}
kernel void qmv_f32_r1_sb(device const uint* words [[buffer(0)]], device const ushort* scales [[buffer(1)]],
                          device const ushort* biases [[buffer(2)]], device const float* x [[buffer(3)]],
                          device float* y [[buffer(4)]], constant QmvParams& p [[buffer(5)]],
                          uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                          uint nbid [[threadgroups_per_grid]]) {
  qmv<1, 1>(words, scales, biases, x, y, p, tid, bid, nbid);
}

// qmv_group_start is the first launch row of matrix m (end for m = 4).
static inline int qmv_group_start(constant QmvGroupParams& p, int m) {
  return m == 0 ? p.start0 : m == 1 ? p.start1 : m == 2 ? p.start2 : m == 3 ? p.start3 : p.end;
}

template <typename P>
static inline P qmv_pick(int m, P a, P b, P c, P d) {
  return m == 0 ? a : m == 1 ? b : m == 2 ? c : d;
}

// qmv_group is qmv's loop over the launch rows of the group's matrices
// (interleaved scale/bias words, R rows per lane): a launch row r belongs
// to the last matrix m whose start is <= r (qmv.cu's mapping), as its row
// r - start<m>. x is in device memory (qmv_group) or threadgroup memory
// (qmv_group_norm).
template <int R, typename X>
static inline void qmv_group(device const uint* w0, device const uint* w1, device const uint* w2, device const uint* w3,
                             device const ushort* sb0, device const ushort* sb1, device const ushort* sb2,
                             device const ushort* sb3, device float* y0, device float* y1, device float* y2,
                             device float* y3, X x, constant QmvGroupParams& p, uint tid, uint bid, uint nbid) {
  const int groups = p.cols / 64;
  const int lane = tid & 31, warp = tid >> 5;
  const int team = p.team, sub = lane / team, tl = lane % team;
  const int rowsPerWarp = (32 / team) * R;
  const ulong wpr = ulong(p.cols / 8);
  const int nwarps = int(nbid) * QMV_SIMDGROUPS;
  const int rows = p.end;
  for (int base = (int(bid) * QMV_SIMDGROUPS + warp) * rowsPerWarp; base < rows; base += nwarps * rowsPerWarp) {
    ulong row[R];
    int mat[R];
    float acc[R];
    for (int j = 0; j < R; j++) {
      int r = base + sub * R + j;
      r = r < rows ? r : rows - 1;  // load a real row; only the store is skipped
      int m = 0;
      while (m + 1 < p.n && r >= qmv_group_start(p, m + 1)) m++;
      row[j] = ulong(r - qmv_group_start(p, m));
      mat[j] = m;
      acc[j] = 0.f;
    }
    for (int g = tl; g < groups; g += team) {
      const float gs = group_sum(x + 64 * g);
      for (int j = 0; j < R; j++) {
        const int m = mat[j];
        float s, b;
        load_sb<1>(qmv_pick(m, sb0, sb1, sb2, sb3), sb0, row[j] * ulong(groups) + ulong(g), s, b);
        // qmv's fma, so that a row is bit for bit the same
        acc[j] += fma(s, qdot_f32(qmv_pick(m, w0, w1, w2, w3) + row[j] * wpr + ulong(g * 8), x + 64 * g), b * gs);
      }
    }
    for (int j = 0; j < R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) acc[j] += simd_shuffle_xor(acc[j], ushort(off));
      const int r = base + sub * R + j;
      if (tl == 0 && r < rows) qmv_pick(mat[j], y0, y1, y2, y3)[row[j]] = acc[j];
    }
  }
}

// Entry point qmv_group_f32_r2_sb: matrix m's codes at words<m>, its
// interleaved scale/bias words at sb<m>, its output at y<m>; the slots
// past p.n are bound to any valid buffer and not read.
kernel void qmv_group_f32_r2_sb(device const uint* words0 [[buffer(0)]], device const uint* words1 [[buffer(1)]],
                                device const uint* words2 [[buffer(2)]], device const uint* words3 [[buffer(3)]],
                                device const ushort* sb0 [[buffer(4)]], device const ushort* sb1 [[buffer(5)]],
                                device const ushort* sb2 [[buffer(6)]], device const ushort* sb3 [[buffer(7)]],
                                device float* y0 [[buffer(8)]], device float* y1 [[buffer(9)]],
                                device float* y2 [[buffer(10)]], device float* y3 [[buffer(11)]],
                                device const float* x [[buffer(12)]], constant QmvGroupParams& p [[buffer(13)]],
                                uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                                uint nbid [[threadgroups_per_grid]]) {
  qmv_group<2>(words0, words1, words2, words3, sb0, sb1, sb2, sb3, y0, y1, y2, y3, x, p, tid, bid, nbid);
}

// Entry point qmv_group_norm_f32_r2_sb: qmv_group_f32_r2_sb with x the
// add-and-norm of h (h + delta where p.hasDelta, over the norm weight nw),
// formed by every threadgroup in add_rmsnorm's order (threadgroups of 256,
// as add_rmsnorm's, so x is bit for bit its output); h is only read, and
// neither h nor the normed row is written: the lowering dispatches
// add_rmsnorm after a barrier for that. p.cols <= QMV_NORM_MAX_COLS.
kernel void qmv_group_norm_f32_r2_sb(device const uint* words0 [[buffer(0)]], device const uint* words1 [[buffer(1)]],
                                     device const uint* words2 [[buffer(2)]], device const uint* words3 [[buffer(3)]],
                                     device const ushort* sb0 [[buffer(4)]], device const ushort* sb1 [[buffer(5)]],
                                     device const ushort* sb2 [[buffer(6)]], device const ushort* sb3 [[buffer(7)]],
                                     device float* y0 [[buffer(8)]], device float* y1 [[buffer(9)]],
                                     device float* y2 [[buffer(10)]], device float* y3 [[buffer(11)]],
                                     device const float* h [[buffer(12)]], device const float* delta [[buffer(13)]],
                                     device const float* nw [[buffer(14)]], constant QmvGroupParams& p [[buffer(15)]],
                                     uint tid [[thread_position_in_threadgroup]],
                                     uint bid [[threadgroup_position_in_grid]], uint nbid [[threadgroups_per_grid]],
                                     uint ntid [[threads_per_threadgroup]]) {
  threadgroup float xs[QMV_NORM_MAX_COLS];
  threadgroup float red[32];
  norm_stage(h, delta, nw, p.cols, p.hasDelta != 0, p.eps, xs, red, int(tid), int(ntid));
  qmv_group<2>(words0, words1, words2, words3, sb0, sb1, sb2, sb3, y0, y1, y2, y3, xs, p, tid, bid, nbid);
}
