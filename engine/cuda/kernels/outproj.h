// outproj.h: a layer's output projection (a 4-bit mat-vec whose input is
// the layer's heads' outputs) computed from inside the launch that makes
// those outputs, one column slice a thread-block cluster: the heads a
// cluster holds are a run of the projection's columns, so its blocks
// gather the slice through distributed shared memory and each computes the
// partial products of those columns for an eighth of the projection's rows
// into a partials buffer (every weight read once over the grid, as by the
// mat-vec). The last cluster to leave its partials of an eighth (a ticket
// an eighth) sums them, slice by slice in order, into the output: the same
// output as the mat-vec's to float32's rounding (another order of sums),
// and no launch of its own.
#pragma once
#include "qgroup.h"
#include "cluster.h"

#define OP_BLOCKS 8  // the cluster: an eighth of the rows a block
#define OP_R 2       // rows a lane at once (qmv's R)

// OutProj is the projection's operands: its codes and interleaved
// scale/bias words (4-bit, groups of 64), its output, the partials
// [slices][rows] and OP_BLOCKS ticket counters (zero, and left so by every
// complete launch), its shape.
struct OutProj {
  const u32* w;
  const u32* sb;
  float* y;
  float* part;
  u32* counters;
  int rows, cols;
};

// out_proj_prefetch asks L2 for rows r0 .. r1-1 of the slice's columns
// (NCOLS from column slice·NCOLS; a 128-byte line of codes a row at
// NCOLS = 256), before the launch's wait: the weights do not depend on the
// kernel before.
template <int NCOLS>
static __device__ __forceinline__ void out_proj_prefetch(const OutProj& o, int slice, int r0, int r1) {
  constexpr int ng = NCOLS / 64;
  const int g0 = slice * ng;
  const long long wpr = o.cols / 8, gpr = o.cols / 64;
  for (int r = r0 + PETAL_TID_X(); r < r1; r += PETAL_NTID_X()) {
    for (int g = 0; g < ng; g += 4) prefetch_l2(o.w + r * wpr + (g0 + g) * 8);
    prefetch_l2(o.sb + r * gpr + g0);
  }
}

// out_proj_share: every thread of the block, with the slice (NCOLS of the
// projection's columns from slice·NCOLS) staged as x at the start of the
// block's dynamic shared memory (qstage_raw's float32 copy): its partial
// products for rows r0 .. r1-1 (share share of the rows) into the
// partials, and, where this block is the last of the slices' to leave its
// partials of that share (a ticket a share), their sum slice by slice into
// the output.
template <int M, int NCOLS, int WARPS>
static __device__ __forceinline__ void out_proj_share(const OutProj& o, int slice, int slices, int share, int r0, int r1) {
  constexpr int ng = NCOLS / 64, team = ng < 32 ? ng : 32, rpw = (32 / team) * OP_R;
  __shared__ int lastOne;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g0 = slice * ng, sub = lane / team, tl = lane % team;
  const long long wpr = o.cols / 8, gpr = o.cols / 64;
  const QView q = qstage_layout<M>(ng);
  PETAL_MARK(7);
  for (int base = r0 + warp * rpw; base < r1; base += WARPS * rpw) {
    float acc[OP_R];
    long long rr[OP_R];
#pragma unroll
    for (int j = 0; j < OP_R; j++) {
      const int r = base + sub * OP_R + j;
      rr[j] = r < r1 ? r : r1 - 1;  // a real row; only the store is skipped
      acc[j] = 0.f;
    }
    for (int g = tl; g < ng; g += team) {
      u32x4 w0[OP_R], w1[OP_R];
      float s[OP_R], b[OP_R];
#pragma unroll
      for (int j = 0; j < OP_R; j++) {
        const u32* p = o.w + rr[j] * wpr + (g0 + g) * 8;
        w0[j] = ld_stream_16(p);
        w1[j] = ld_stream_16(p + 4);
        load_sb<1>((const u16*)(o.sb + rr[j] * gpr + g0), nullptr, g, s[j], b[j]);
      }
      const float gs = q.gsum[g];
#pragma unroll
      for (int j = 0; j < OP_R; j++) acc[j] += s[j] * qdot<M>(w0[j], w1[j], q.xs, ng, g, q.gd) + b[j] * gs;
    }
#pragma unroll
    for (int j = 0; j < OP_R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
      const int r = base + sub * OP_R + j;
      if (tl == 0 && r < r1) o.part[(long long)slice * o.rows + r] = acc[j];
    }
  }
  // The last block to leave its partials of this share sums them, slice
  // by slice.
  __syncthreads();
  if (tid == 0) {
    fence_gpu();
    lastOne = ticket_inc(o.counters + share, (u32)slices - 1) == (u32)slices - 1;
  }
  __syncthreads();
  if (lastOne) {
    fence_gpu();
    for (int r = r0 + tid; r < r1; r += PETAL_NTID_X()) {
      float sum = 0.f;
      for (int k = 0; k < slices; k++) sum += ((volatile const float*)o.part)[(long long)k * o.rows + r];
      o.y[r] = sum;
    }
  }
  PETAL_MARK(9);
}

// out_proj_partial: every block of the cluster (OP_BLOCKS blocks of
// WARPS warps) calls it with its NCOLS/OP_BLOCKS outputs of the slice in
// mine (shared memory; block rank's are columns rank·NCOLS/OP_BLOCKS ..
// of the slice): the cluster meets, each block stages the slice (the
// start of its dynamic shared memory is overwritten: QSTAGE_BYTES(M,
// NCOLS/64) bytes), computes its eighth of the rows' partials, and the
// last of the slices' clusters to do so for that eighth sums it. It ends
// having arrived at the cluster barrier: the caller waits (cluster_wait)
// before it exits.
template <int M, int NCOLS, int WARPS>
static __device__ __forceinline__ void out_proj_partial(const OutProj& o, const float* mine, int slice, int slices,
                                                        u32 rank) {
  extern __shared__ u32 smem[];
  constexpr int per_block = NCOLS / OP_BLOCKS;
  const int tid = PETAL_TID_X();
  const int per = o.rows / OP_BLOCKS, r0 = rank * per;
  cluster_sync();  // every block's outputs written (and the staging's last reader done)
  float* raw = (float*)smem;
  for (int c = tid; c < NCOLS; c += PETAL_NTID_X()) raw[c] = ld_cluster_f32(cluster_addr(mine + c % per_block, c / per_block));
  cluster_arrive();  // done with the others' shared memory
  __syncthreads();
  out_proj_share<M, NCOLS, WARPS>(o, slice, slices, rank, r0, r0 + per);
}
