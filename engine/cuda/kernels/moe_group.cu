// moe_group.cu: a prefill chunk's (token, slot) pairs grouped by expert
// over many blocks (moegroup=blocks), where gemm.cu's moe_route8 does it
// in one: at 4096 tokens its one block issues every load and store of the
// 32,768 pairs itself, 43.6 us a layer on an H100 (2026-12-07-moeys1). The
// same outputs as moe_route8 (counts, offsets, the tile map, status, and
// each pair's row and each row's token), in three launches:
//
//	moe_group_count  block b ranks the pairs [b·GROUP_PAIRS, ..) within
//	                 their experts (shared-memory atomics) and writes its
//	                 counts to hist[b·E ..] and its bad ids to hist[G·E + b]
//	moe_group_scan   one block: the counts, offsets and tile map from the
//	                 G blocks' counts, and each block's first row for each
//	                 expert in place of its count
//	moe_group_place  pos = that first row + the rank; rowTok[pos] = token
//
// A pair's rank within its block is the order of its atomic, as in
// moe_route8: which row of its expert's group a pair takes may change from
// run to run, the rows' results do not (each row is computed alone).
#include "device.h"

#if defined(__NVCC__)
static __device__ __forceinline__ int mg_shfl_up(int v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
#else
static __device__ __forceinline__ int mg_shfl_up(int v, int d) { return __nvvm_shfl_sync_up_i32(0xffffffffu, v, d, 0); }
#endif

#define MG_TOPK 8
#define GROUP_THREADS 1024
#define GROUP_PAIRS 2048  // pairs a block of moe_group_count and moe_group_place
#define MG_AHEAD (GROUP_PAIRS / GROUP_THREADS)

// moe_group_count: see above. n = T·MG_TOPK pairs, E <= GROUP_THREADS;
// grid ceil(n / GROUP_PAIRS) blocks; hist holds G·(E + 1) ints, G the grid.
extern "C" __global__ void __launch_bounds__(GROUP_THREADS)
    moe_group_count(const int* __restrict__ ids, int n, int E, int* __restrict__ pos, int* __restrict__ hist) {
  pdl_begin();
  __shared__ int h[GROUP_THREADS];
  __shared__ int bad;
  const int tid = PETAL_TID_X(), b = PETAL_BID_X(), G = PETAL_NCTAID_X();
  h[tid] = 0;
  if (tid == 0) bad = 0;
  __syncthreads();
  int ev[MG_AHEAD];
#pragma unroll
  for (int u = 0; u < MG_AHEAD; u++) {
    const int i = b * GROUP_PAIRS + u * GROUP_THREADS + tid;
    ev[u] = i < n ? ids[i] : 0;
  }
#pragma unroll
  for (int u = 0; u < MG_AHEAD; u++) {
    const int i = b * GROUP_PAIRS + u * GROUP_THREADS + tid, e = ev[u];
    if (i >= n) break;
    int rank = -1;
    if (e >= 0 && e < E) {
      asm volatile("atom.shared.add.u32 %0, [%1], 1;" : "=r"(rank) : "r"(smem_u32(&h[e])) : "memory");
    } else {
      asm volatile("red.shared.add.u32 [%0], 1;" ::"r"(smem_u32(&bad)) : "memory");
    }
    pos[i] = rank;
  }
  __syncthreads();
  if (tid < E) hist[b * E + tid] = h[tid];
  if (tid == 0) hist[G * E + b] = bad;
}

// moe_group_scan: one block of GROUP_THREADS threads, G the count pass's
// blocks: counts[E], offsets[E+1], the tile map (expert, first row) of
// each BM-row tile, ntiles[0] and status[0] (the bad ids), as moe_route8
// writes them; hist[b][e] becomes block b's first row for expert e.
extern "C" __global__ void __launch_bounds__(GROUP_THREADS, 1)
    moe_group_scan(int G, int E, int BM, int* __restrict__ hist, int* __restrict__ counts, int* __restrict__ offsets,
                   int* __restrict__ tiles, int* __restrict__ ntiles, int* __restrict__ status) {
  pdl_begin();
  __shared__ int warpSum[2][32];
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  int cnt = 0;
  if (tid < E)
    for (int b = 0; b < G; b++) cnt += hist[b * E + tid];
  const int nt = (cnt + BM - 1) / BM;
  // exclusive scans of the counts and of the tiles
  int a = cnt, t = nt;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int ua = mg_shfl_up(a, d), ut = mg_shfl_up(t, d);
    if (lane >= d) a += ua, t += ut;
  }
  if (lane == 31) warpSum[0][warp] = a, warpSum[1][warp] = t;
  __syncthreads();
  if (warp == 0) {
    int wa = warpSum[0][lane], wt = warpSum[1][lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int ua = mg_shfl_up(wa, d), ut = mg_shfl_up(wt, d);
      if (lane >= d) wa += ua, wt += ut;
    }
    warpSum[0][lane] = wa, warpSum[1][lane] = wt;
  }
  __syncthreads();
  const int off = a - cnt + (warp > 0 ? warpSum[0][warp - 1] : 0);
  const int toff = t - nt + (warp > 0 ? warpSum[1][warp - 1] : 0);
  if (tid < E) {
    counts[tid] = cnt;
    offsets[tid] = off;
    int row = off;
    for (int b = 0; b < G; b++) {
      const int c = hist[b * E + tid];
      hist[b * E + tid] = row;
      row += c;
    }
    for (int j = 0; j < nt; j++) tiles[2 * (toff + j)] = tid, tiles[2 * (toff + j) + 1] = off + j * BM;
  }
  if (tid == E - 1) offsets[E] = off + cnt, ntiles[0] = toff + nt;
  if (tid == 0) {
    int bad = 0;
    for (int b = 0; b < G; b++) bad += hist[G * E + b];
    status[0] = bad;
  }
}

// moe_group_place: the grid of moe_group_count; each pair's row, its block's
// first row for its expert plus its rank (a bad id keeps -1), and each
// row's token.
extern "C" __global__ void __launch_bounds__(GROUP_THREADS)
    moe_group_place(const int* __restrict__ ids, int n, int E, const int* __restrict__ hist, int* __restrict__ pos,
                    int* __restrict__ rowTok) {
  pdl_begin();
  const int tid = PETAL_TID_X(), b = PETAL_BID_X();
  int ev[MG_AHEAD], rv[MG_AHEAD];
#pragma unroll
  for (int u = 0; u < MG_AHEAD; u++) {
    const int i = b * GROUP_PAIRS + u * GROUP_THREADS + tid;
    ev[u] = i < n ? ids[i] : -1;
    rv[u] = i < n ? pos[i] : 0;
  }
#pragma unroll
  for (int u = 0; u < MG_AHEAD; u++) {
    const int i = b * GROUP_PAIRS + u * GROUP_THREADS + tid, e = ev[u];
    if (e < 0 || e >= E) continue;
    const int p = hist[b * E + e] + rv[u];
    pos[i] = p;
    rowTok[p] = i / MG_TOPK;
  }
}
