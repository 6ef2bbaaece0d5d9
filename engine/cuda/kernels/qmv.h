// qmv.h: what qmv.cu's mat-vecs and qmv_bulk.cu's share: where a launch
// row lives (a single matrix or one of a QMVGroup's), the add-and-norm a
// grouped launch does first, and a lane's load of one group of a row.
#pragma once
#include "qgroup.h"

#define QMV_WARPS 8

// QMVGroup (device.h): the table of a grouped launch.

// QRow is where one launch row lives: its codes, its scales and biases
// (the interleaved words of a group matrix, else the scales) and the index
// of its first group there, its output element.
struct QRow {
  const u32* words;
  const u16* sb;
  long long sbIndex;
  float* y;
};

// group_rows is the rows of all of grp's matrices, start[n].
static __device__ __forceinline__ int group_rows(const QMVGroup& grp) {
  int rows = grp.start[1];
#pragma unroll
  for (int k = 2; k <= QMV_GROUP; k++) rows = grp.n >= k ? grp.start[k] : rows;
  return rows;
}

// QMVNorm is the add-and-norm a grouped mat-vec does first (the input
// norm of a layer): x staged from in (qstage's NORM); the block that takes
// the last ticket from counter (a u32 that wraps by itself, so the launch
// replays in a graph) once it has read h writes the sum to in.h and the
// normed row to out when it is done.
struct QMVNorm {
  QNormIn in;
  float* out;
  u32* counter;
};

// qrow_at is launch row r: in matrix m of the group (G), else of words.
template <bool G>
static __device__ __forceinline__ QRow qrow_at(long long r, const u32* words, const u16* scales, float* y,
                                               long long wpr, int groups, const QMVGroup& grp) {
  if (G) {
    const u32* w = grp.words[0];
    const u32* sb = grp.sb[0];
    float* out = grp.y[0];
    int start = 0;
#pragma unroll
    for (int k = 1; k < QMV_GROUP; k++) {
      if (k < grp.n && r >= grp.start[k]) w = grp.words[k], sb = grp.sb[k], out = grp.y[k], start = grp.start[k];
    }
    const long long local = r - start;
    return QRow{w + local * wpr, (const u16*)sb, local * groups, out + local};
  }
  return QRow{words + r * wpr, scales, r * groups, y + r};
}

template <int SB>
static __device__ __forceinline__ void qload(const QRow& row, int g, const u16* __restrict__ biases, u32x4& w0,
                                             u32x4& w1, float& s, float& b) {
  const u32* p = row.words + g * 8;
  w0 = ld_stream_16(p);
  w1 = ld_stream_16(p + 4);
  load_sb<SB>(row.sb, biases, row.sbIndex + g, s, b);
}
