// qmv.metal: y = W·x for MLX affine 4-bit matrices (spec 3.4), one token:
// the sibling of engine/cuda/kernels/qmv.cu in its exact float32 kind.
//
// A team of p.team lanes (a power of two, at most 32, at most the groups in
// a row) shares a row, lane t taking groups t, t+team, ...; each lane works
// on R rows at once. The grid is persistent: threadgroup b of n takes row
// groups b, b+n, ... Launch threadgroups of QMV_SIMDGROUPS*32 threads.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"

#define QMV_SIMDGROUPS 8

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
        acc[j] += s * qdot_f32(words + row[j] * wpr + ulong(g * 8), xg) + b * gs;
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
