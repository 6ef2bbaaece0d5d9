// qmv.cu: y = W·x for MLX affine 4-bit matrices (spec 3.4), one token, a
// lane taking one whole group (32 bytes of codes, two 16-byte loads) of a
// row per step, in the arithmetic kinds of qgroup.h.
//
// A team of T lanes (a power of two, at most 32, at most the groups in a
// row) shares a row, lane t taking groups t, t+T, ...; each lane works on R
// rows at once, so 2R 16-byte loads are in flight before the first is used.
// The grid is persistent: each block stages x once (qstage) and loops over
// row groups.
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

template <int M, int R, int SB, bool G, bool N = false>
static __device__ __forceinline__ void qmv(const u32* __restrict__ words, const u16* __restrict__ scales,
                                           const u16* __restrict__ biases, const float* __restrict__ x,
                                           float* __restrict__ y, int rows, int cols, int team,
                                           const QMVGroup& grp, QMVNorm nrm = QMVNorm{}) {
  const int groups = cols / 64;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int sub = lane / team, tl = lane % team;
  const int rowsPerWarp = (32 / team) * R;
  const long long wpr = cols / 8;
  const int nwarps = PETAL_NCTAID_X() * QMV_WARPS;
  if (G) rows = group_rows(grp);
  const long long first = (long long)(PETAL_BID_X() * QMV_WARPS + warp) * rowsPerWarp;
  // PETAL_MARK's points: 0 start, 1 the first weights asked for, 2 x copied
  // (and normed), 3 x staged, 4 + i step i done (up to 9), 14 the rows done,
  // 15 the norm's write-back done (the last block).
  PETAL_MARK(0);
  // The weights do not depend on the kernel before. The grouped kernels (a
  // layer's first projections, launched at moe_down's start) ask L2 for
  // every row the warp will take, codes and scale/bias words, and then wait,
  // so that the whole matrix streams in while moe_down runs (decode at 4K
  // 2-3.5 % faster on an H200: gnpre1); the others ask for their first two
  // steps' rows below.
  if (G) {
    for (long long base = first; base < rows; base += (long long)nwarps * rowsPerWarp) {
#pragma unroll
      for (int j = 0; j < R; j++) {
        long long r = base + sub * R + j;
        r = r < rows ? r : rows - 1;
        const QRow row = qrow_at<G>(r, words, scales, y, wpr, groups, grp);
        for (int g = tl; g < groups; g += team) prefetch_l2(row.words + g * 8);
        if (tl == 0) prefetch_l2(row.sb + 2 * row.sbIndex);
      }
    }
    pdl_begin();
  }

  // In the grouped kernels (a layer's first projections) the first group of
  // the warp's first rows is loaded before x is staged (the weights do not
  // depend on x), so that the two waits for memory overlap; measured so, the
  // single-matrix kernels were slower (8.3 -> 8.8 us, run qmvpre1).
  u32x4 pw0[R], pw1[R];
  float ps[R], pb[R];
  const bool pre = G && first < rows && tl < groups;
  if (pre) {
#pragma unroll
    for (int j = 0; j < R; j++) {
      long long r = first + sub * R + j;
      r = r < rows ? r : rows - 1;
      qload<G ? 1 : SB>(qrow_at<G>(r, words, scales, y, wpr, groups, grp), tl, biases, pw0[j], pw1[j], ps[j], pb[j]);
    }
  }
  if (!G) {
    // the rows of the warp's first two steps asked of L2 (prefetch_l2)
    for (long long base = first; base < rows && base < first + 2LL * nwarps * rowsPerWarp;
         base += (long long)nwarps * rowsPerWarp) {
#pragma unroll
      for (int j = 0; j < R; j++) {
        long long r = base + sub * R + j;
        r = r < rows ? r : rows - 1;
        for (int g = tl; g < groups; g += team) prefetch_l2(words + r * wpr + g * 8);
      }
    }
    pdl_begin();
    // the next kernel (the router, the sampler's prep) is let launch now:
    // its own weights then stream into L2 before its wait, beside this one
    pdl_trigger();
  }
  PETAL_MARK(1);
  if (N) {
    extern __shared__ u32 smem[];
    nrm.in.keep = (float*)(smem + QSTAGE_BYTES(M, groups) / 4);  // cols floats past the staging
  }
  qstage_raw<N>(x, groups, nrm.in);
  PETAL_MARK(2);
  const QView q = qstage_layout<M>(groups);
  PETAL_MARK(3);
  // With the norm, a ticket once this block has read h (qstage ends with a
  // barrier): the block that takes the last one writes h and the normed row
  // back when it is done, once every block has read h. Thread 0 takes it
  // here and looks at it at the end, so the atomic's round trip overlaps
  // the mat-vec instead of following the stores.
  u32 ticket = 0;
  if (N && tid == 0) {
    fence_gpu();
    ticket = ticket_inc(nrm.counter, PETAL_NCTAID_X() - 1);
  }

  int step = 0;
  for (long long base = first; base < rows; base += (long long)nwarps * rowsPerWarp, step++) {
    QRow row[R];
#pragma unroll
    for (int j = 0; j < R; j++) {
      long long r = base + sub * R + j;
      r = r < rows ? r : rows - 1;  // load a real row; only the store is skipped
      row[j] = qrow_at<G>(r, words, scales, y, wpr, groups, grp);
    }
    float acc[R];
#pragma unroll
    for (int j = 0; j < R; j++) acc[j] = 0.f;
    for (int g = tl; g < groups; g += team) {
      u32x4 w0[R], w1[R];
      float s[R], b[R];
      if (pre && base == first && g == tl) {
#pragma unroll
        for (int j = 0; j < R; j++) w0[j] = pw0[j], w1[j] = pw1[j], s[j] = ps[j], b[j] = pb[j];
      } else {
#pragma unroll
        for (int j = 0; j < R; j++) qload<G ? 1 : SB>(row[j], g, biases, w0[j], w1[j], s[j], b[j]);
      }
      const float gs = q.gsum[g];
#pragma unroll
      for (int j = 0; j < R; j++) acc[j] += s[j] * qdot<M>(w0[j], w1[j], q.xs, groups, g, q.gd) + b[j] * gs;
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
      long long r = base + sub * R + j;
      if (tl == 0 && r < rows) *row[j].y = acc[j];
    }
    PETAL_MARK(4 + (step < 9 ? step : 9));
  }
  PETAL_MARK(14);
  pdl_trigger();  // the norm's write-back by the last block is all that is left
  if (N) {
    __shared__ int last;
    if (tid == 0) last = ticket == PETAL_NCTAID_X() - 1;
    __syncthreads();
    if (!last) return;
    fence_gpu();
    float* h = (float*)nrm.in.h;
    for (int i = tid; i < cols; i += PETAL_NTID_X()) {
      if (nrm.in.delta) h[i] = nrm.in.keep[i];
      nrm.out[i] = q.raw[i];
    }
#ifdef PETAL_CLOCK
    __syncthreads();
    PETAL_MARK(15);
#endif
  }
}

// Entry points qmv_<kind>_r<R>[_sb]: sb takes the interleaved scale/bias
// array as scales (biases unused). Launch with QMV_WARPS*32 threads and
// QSTAGE_BYTES(kind, cols/64) bytes of shared memory; x must be 16-byte
// aligned.
#define QMV(M, R, SB, B, NAME)                                                                          \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                       \
      NAME(const u32* words, const u16* scales, const u16* biases, const float* x, float* y, int rows, \
           int cols, int team) {                                                                        \
    qmv<M, R, SB, false>(words, scales, biases, x, y, rows, cols, team, QMVGroup{});                       \
  }
QMV(QM_F32, 4, 0, 1, qmv_f32_r4)
QMV(QM_F32, 4, 1, 1, qmv_f32_r4_sb)
QMV(QM_F32, 2, 1, 2, qmv_f32_r2_sb)
QMV(QM_F32, 1, 1, 3, qmv_f32_r1_sb)
QMV(QM_F16, 4, 0, 1, qmv_f16_r4)
QMV(QM_F16, 4, 1, 1, qmv_f16_r4_sb)
QMV(QM_F16, 2, 1, 2, qmv_f16_r2_sb)
QMV(QM_I8X1, 4, 1, 1, qmv_i8x1_r4_sb)
QMV(QM_I8X2, 4, 0, 1, qmv_i8x2_r4)
QMV(QM_I8X2, 4, 1, 1, qmv_i8x2_r4_sb)
QMV(QM_I8X2, 2, 1, 2, qmv_i8x2_r2_sb)
QMV(QM_I8X2, 1, 1, 3, qmv_i8x2_r1_sb)
QMV(QM_I8X2, 8, 1, 1, qmv_i8x2_r8_sb)
QMV(QM_I8X3, 4, 1, 1, qmv_i8x3_r4_sb)
QMV(QM_I8X3, 2, 1, 2, qmv_i8x3_r2_sb)
QMV(QM_I8X3, 1, 1, 3, qmv_i8x3_r1_sb)
QMV(QM_I8X3, 2, 0, 2, qmv_i8x3_r2)

// Entry points qmv_group_<kind>_r<R>: the matrices of a QMVGroup (4-bit,
// interleaved scales and biases, the same width), in one launch with
// QMV_WARPS*32 threads and QSTAGE_BYTES(kind, cols/64) bytes of shared
// memory.
#define QMV_GROUPED(M, R, B, NAME)                                                                        \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                         \
      NAME(const QMVGroup grp, const float* x, int cols, int team) {                                       \
    qmv<M, R, 1, true>(nullptr, nullptr, nullptr, x, nullptr, 0, cols, team, grp);                        \
  }
QMV_GROUPED(QM_I8X3, 2, 2, qmv_group_i8x3_r2)
QMV_GROUPED(QM_I8X2, 2, 2, qmv_group_i8x2_r2)
QMV_GROUPED(QM_F32, 2, 2, qmv_group_f32_r2)
QMV_GROUPED(QM_F16, 2, 2, qmv_group_f16_r2)

// Entry points qmv_group_norm_<kind>_r2: qmv_group with the add-and-norm
// of a QMVNorm first (h, delta or null, the norm's weight, eps, the normed
// row's output, a ticket counter), in one launch, with cols floats of
// shared memory past QSTAGE_BYTES for h + delta (QNormIn's keep).
#define QMV_GROUPED_NORM(M, R, B, NAME)                                                                   \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                         \
      NAME(const QMVGroup grp, float* h, const float* delta, const float* w, float eps, float* out,     \
           u32* counter, int cols, int team) {                                                            \
    qmv<M, R, 1, true, true>(nullptr, nullptr, nullptr, nullptr, nullptr, 0, cols, team, grp,            \
                             QMVNorm{QNormIn{h, delta, w, eps}, out, counter});                          \
  }
QMV_GROUPED_NORM(QM_I8X3, 2, 2, qmv_group_norm_i8x3_r2)
QMV_GROUPED_NORM(QM_I8X2, 2, 2, qmv_group_norm_i8x2_r2)
QMV_GROUPED_NORM(QM_F32, 2, 2, qmv_group_norm_f32_r2)
QMV_GROUPED_NORM(QM_F16, 2, 2, qmv_group_norm_f16_r2)
