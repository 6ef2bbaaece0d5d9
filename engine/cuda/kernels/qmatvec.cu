// qmatvec.cu: y = W·x for MLX affine 4-bit matrices (spec 3.4), one token.
//
// W is [rows, cols]: each row is cols/8 little-endian u32 words (element 0 in
// the lowest nibble) and cols/64 bf16 scales and biases; w = scale*q + bias.
// The kernel streams every weight byte once in 16-byte chunks of 32 weights
// (half a group). A team of T lanes (a power of two, at most 32, at most the
// chunks in a row) shares a row, lane t taking chunks t, t+T, ...; each lane
// works on R rows at once so that R*U 16-byte loads are in flight before the
// first is used. x lives in shared memory (padded so the team's 16-byte reads
// hit distinct banks) with the sum of each chunk's 32 inputs, so that
//   y[r] = sum over chunks of scale*sum(q*x) + bias*sum(x),
// all in float32. Codes become floats without a conversion instruction:
// OR-ing a nibble left at bit 4k into the bits of 2^(23-4k) gives the float
// 2^(23-4k) + q exactly, and one subtraction leaves q.
//
// The grid is persistent (a few blocks per multiprocessor, each looping over
// row groups), so x is staged once per block, not once per row.
#include "device.h"

#define QMV_WARPS 8
#define QMV_PAD 36  // floats per staged chunk of 32 inputs

struct __attribute__((aligned(16))) f32x4 {
  float x, y, z, w;
};

// dot32 is sum(q*x) over the 32 codes of one chunk.
static __device__ __forceinline__ float dot32(u32x4 w, const float* xc) {
  const f32x4* xv = (const f32x4*)xc;
  u32 ws[4] = {w.x, w.y, w.z, w.w};
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f32x4 a = xv[2 * i], b = xv[2 * i + 1];
    u32 lo = ws[i], hi = ws[i] >> 16;
    s0 += (__uint_as_float((lo & 0xFu) | 0x4B000000u) - 8388608.f) * a.x;
    s1 += (__uint_as_float((lo & 0xF0u) | 0x49000000u) - 524288.f) * a.y;
    s0 += (__uint_as_float((lo & 0xF00u) | 0x47000000u) - 32768.f) * a.z;
    s1 += (__uint_as_float((lo & 0xF000u) | 0x45000000u) - 2048.f) * a.w;
    s0 += (__uint_as_float((hi & 0xFu) | 0x4B000000u) - 8388608.f) * b.x;
    s1 += (__uint_as_float((hi & 0xF0u) | 0x49000000u) - 524288.f) * b.y;
    s0 += (__uint_as_float((hi & 0xF00u) | 0x47000000u) - 32768.f) * b.z;
    s1 += (__uint_as_float((hi & 0xF000u) | 0x45000000u) - 2048.f) * b.w;
  }
  return s0 + s1;
}

// MODE 0 is the mat-vec. MODE 1 and 2 are lab probes that give wrong
// results on purpose, to place the time: 1 keeps the loads and drops the
// arithmetic (a cheap use of the words), 2 keeps the arithmetic and reads
// rows 0..R-1 again and again (from cache, not device memory).
template <int R, int U, int MODE = 0>
static __device__ __forceinline__ void qmatvec4(const u32* __restrict__ words, const u16* __restrict__ scales,
                                                const u16* __restrict__ biases, const float* __restrict__ x,
                                                float* __restrict__ y, int rows, int cols, int team) {
  extern __shared__ float smem[];
  const int nchunks = cols / 32, groups = cols / 64;
  float* xs = smem;                       // [nchunks][QMV_PAD]
  float* csum = smem + nchunks * QMV_PAD;  // [nchunks]
  const int tid = PETAL_TID_X(), nthreads = PETAL_NTID_X();
  for (int i = tid; i < cols; i += nthreads) xs[(i >> 5) * QMV_PAD + (i & 31)] = x[i];
  __syncthreads();
  for (int c = tid; c < nchunks; c += nthreads) {
    float s = 0.f;
    for (int i = 0; i < 32; i++) s += xs[c * QMV_PAD + i];
    csum[c] = s;
  }
  __syncthreads();

  const int lane = tid & 31, warp = tid >> 5;
  const int sub = lane / team, tl = lane % team;
  const int rowsPerWarp = (32 / team) * R;
  const long long wpr = cols / 8;  // words per row
  const int nwarps = PETAL_NCTAID_X() * QMV_WARPS;
  for (long long base = (long long)(PETAL_BID_X() * QMV_WARPS + warp) * rowsPerWarp; base < rows;
       base += (long long)nwarps * rowsPerWarp) {
    long long row[R];
#pragma unroll
    for (int j = 0; j < R; j++) {
      long long r = base + sub * R + j;
      row[j] = r < rows ? r : rows - 1;  // load a real row; only the store is skipped
      if (MODE == 2) row[j] = j;
    }
    float acc[R];
#pragma unroll
    for (int j = 0; j < R; j++) acc[j] = 0.f;
    for (int c0 = tl; c0 < nchunks; c0 += team * U) {
      u32x4 w[U][R];
      float sc[U][R], bi[U][R];
#pragma unroll
      for (int u = 0; u < U; u++) {
        int c = c0 + u * team;
        c = c < nchunks ? c : nchunks - 1;
#pragma unroll
        for (int j = 0; j < R; j++) {
          w[u][j] = ld_stream_16(words + row[j] * wpr + c * 4);
          sc[u][j] = bf16_to_f32(scales[row[j] * groups + (c >> 1)]);
          bi[u][j] = bf16_to_f32(biases[row[j] * groups + (c >> 1)]);
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        int c = c0 + u * team;
        if (U == 1 || c < nchunks) {
          const float* xc = xs + c * QMV_PAD;
          float cs = csum[c];
#pragma unroll
          for (int j = 0; j < R; j++) {
            if (MODE == 1)
              acc[j] += __uint_as_float((w[u][j].x ^ w[u][j].y ^ w[u][j].z ^ w[u][j].w) & 0x3fffffffu) + sc[u][j] + bi[u][j];
            else
              acc[j] += sc[u][j] * dot32(w[u][j], xc) + bi[u][j] * cs;
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
      long long r = base + sub * R + j;
      if (tl == 0 && r < rows) y[r] = acc[j];
    }
  }
}

// qmatvec4_pipe is the same computation with the loads software-pipelined:
// a lane walks one flat sequence of (row group, chunk step) items, all
// lanes of a warp in step (a step past a row's last chunk adds nothing), and
// issues the loads of item k+1 before it computes item k, so its loads are in
// flight while it computes instead of only between computations.
template <int R>
static __device__ __forceinline__ void qmatvec4_pipe(const u32* __restrict__ words, const u16* __restrict__ scales,
                                                     const u16* __restrict__ biases, const float* __restrict__ x,
                                                     float* __restrict__ y, int rows, int cols, int team) {
  extern __shared__ float smem[];
  const int nchunks = cols / 32, groups = cols / 64;
  float* xs = smem;
  float* csum = smem + nchunks * QMV_PAD;
  const int tid = PETAL_TID_X(), nthreads = PETAL_NTID_X();
  for (int i = tid; i < cols; i += nthreads) xs[(i >> 5) * QMV_PAD + (i & 31)] = x[i];
  __syncthreads();
  for (int c = tid; c < nchunks; c += nthreads) {
    float s = 0.f;
    for (int i = 0; i < 32; i++) s += xs[c * QMV_PAD + i];
    csum[c] = s;
  }
  __syncthreads();

  const int lane = tid & 31, warp = tid >> 5;
  const int sub = lane / team, tl = lane % team;
  const int rowsPerWarp = (32 / team) * R;
  const long long wpr = cols / 8;
  const long long stride = (long long)PETAL_NCTAID_X() * QMV_WARPS * rowsPerWarp;
  const long long first = (long long)(PETAL_BID_X() * QMV_WARPS + warp) * rowsPerWarp;
  if (first >= rows) return;
  const int steps = (nchunks + team - 1) / team;
  const int total = (int)((rows - first + stride - 1) / stride) * steps;

  u32x4 w[2][R];
  float sc[2][R], bi[2][R];
  // Cursors (chunk step, first row of the group) of the next item to load
  // and of the item to compute, advanced without divisions.
  int lstep = 0, cstep = 0;
  long long lbase = first, cbase = first;
  auto load = [&](int buf) {
    int c = tl + lstep * team;
    c = c < nchunks ? c : nchunks - 1;
#pragma unroll
    for (int j = 0; j < R; j++) {
      long long r = lbase + sub * R + j;
      r = r < rows ? r : rows - 1;
      w[buf][j] = ld_stream_16(words + r * wpr + c * 4);
      sc[buf][j] = bf16_to_f32(scales[r * groups + (c >> 1)]);
      bi[buf][j] = bf16_to_f32(biases[r * groups + (c >> 1)]);
    }
    if (++lstep == steps) lstep = 0, lbase += stride;
  };
  float acc[R];
#pragma unroll
  for (int j = 0; j < R; j++) acc[j] = 0.f;
  load(0);
  for (int k = 0; k < total; k += 2) {
    // Two items per trip so that the buffers are named by constants.
#pragma unroll
    for (int b = 0; b < 2; b++) {
      if (k + b < total) {
        if (k + b + 1 < total) load(b ^ 1);
        int c = tl + cstep * team;
        if (c < nchunks) {
          const float* xc = xs + c * QMV_PAD;
          float cs = csum[c];
#pragma unroll
          for (int j = 0; j < R; j++) acc[j] += sc[b][j] * dot32(w[b][j], xc) + bi[b][j] * cs;
        }
        if (cstep == steps - 1) {
#pragma unroll
          for (int j = 0; j < R; j++) {
            float v = acc[j];
            for (int off = team >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            long long r = cbase + sub * R + j;
            if (tl == 0 && r < rows) y[r] = v;
            acc[j] = 0.f;
          }
        }
        if (++cstep == steps) cstep = 0, cbase += stride;
      }
    }
  }
}

// Entry points, one per variant: qmatvec4_r<R>u<U>[_b<B>] and
// qmatvec4_p<R>[_b<B>] (pipelined), B the blocks per multiprocessor the
// register budget is cut for. Launch with QMV_WARPS*32 threads and
// (cols/32)*(QMV_PAD+1)*4 bytes of shared memory.
#define QMATVEC4(R, U, B, NAME)                                                                        \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                      \
      NAME(const u32* words, const u16* scales, const u16* biases, const float* x, float* y, int rows, \
           int cols, int team) { pdl_begin();                                                          \
    qmatvec4<R, U>(words, scales, biases, x, y, rows, cols, team);                                     \
  }
#define QMATVEC4LAB(R, U, B, MODE, NAME)                                                               \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                      \
      NAME(const u32* words, const u16* scales, const u16* biases, const float* x, float* y, int rows, \
           int cols, int team) { pdl_begin();                                                          \
    qmatvec4<R, U, MODE>(words, scales, biases, x, y, rows, cols, team);                               \
  }
#define QMATVEC4P(R, B, NAME)                                                                          \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                      \
      NAME(const u32* words, const u16* scales, const u16* biases, const float* x, float* y, int rows, \
           int cols, int team) { pdl_begin();                                                          \
    qmatvec4_pipe<R>(words, scales, biases, x, y, rows, cols, team);                                   \
  }
QMATVEC4(4, 1, 1, qmatvec4_r4u1)
QMATVEC4(4, 2, 1, qmatvec4_r4u2)
QMATVEC4(2, 2, 1, qmatvec4_r2u2)
QMATVEC4(2, 2, 4, qmatvec4_r2u2_b4)
QMATVEC4(4, 1, 3, qmatvec4_r4u1_b3)
QMATVEC4(4, 2, 3, qmatvec4_r4u2_b3)
QMATVEC4P(2, 1, qmatvec4_p2)
QMATVEC4P(2, 4, qmatvec4_p2_b4)
QMATVEC4P(4, 1, qmatvec4_p4)
QMATVEC4P(4, 3, qmatvec4_p4_b3)
QMATVEC4P(1, 4, qmatvec4_p1_b4)
QMATVEC4LAB(4, 1, 1, 1, qmatvec4_lab_r4u1_nomath)
QMATVEC4LAB(4, 1, 1, 2, qmatvec4_lab_r4u1_noload)
QMATVEC4LAB(2, 2, 4, 1, qmatvec4_lab_r2u2_b4_nomath)
QMATVEC4LAB(2, 2, 4, 2, qmatvec4_lab_r2u2_b4_noload)
