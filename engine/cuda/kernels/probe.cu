// probe.cu: small kernels that test and measure the device layer itself:
// launch, graph replay, and the read bandwidth the mat-vec is held against.
#include "cluster.h"

// empty does nothing: its time is the cost of a launch.
extern "C" __global__ void empty() {
  pdl_begin();}

// add_f32 sets y[i] = y[i] + a for i < n (a kernel whose effect shows how many
// times it ran, for graph replay).
extern "C" __global__ void add_f32(float* y, float a, int n) {
  pdl_begin();
  int i = PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  if (i < n) y[i] += a;
}

// read_xor reads n16 16-byte words with the mat-vec's load (grid-stride,
// four loads in flight per thread) and writes one word per block so the
// loads cannot be dropped: the device's streaming read bandwidth.
extern "C" __global__ void __launch_bounds__(256) read_xor(const u32x4* p, long long n16, u32* out) {
  pdl_begin();
  long long i = (long long)PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  long long stride = (long long)PETAL_NCTAID_X() * PETAL_NTID_X();
  u32 acc = 0;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    u32x4 a = ld_stream_16(p + i), b = ld_stream_16(p + i + stride);
    u32x4 c = ld_stream_16(p + i + 2 * stride), d = ld_stream_16(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    u32x4 a = ld_stream_16(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  __shared__ u32 red[256];
  red[PETAL_TID_X()] = acc;
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    u32 s = 0;
    for (int k = 0; k < (int)PETAL_NTID_X(); k++) s ^= red[k];
    out[PETAL_BID_X()] = s;
  }
}

// cluster_sum checks thread-block clusters (cluster.h): each block writes
// its cluster rank and block index into its shared memory, the cluster
// meets at its barrier, and thread 0 reads every block's pair of the
// cluster through distributed shared memory: out[4b..4b+3] of block b =
// its rank, the cluster's size, the sum of the ranks read and the sum of
// the block indexes read. One-dimensional grids and clusters.
extern "C" __global__ void cluster_sum(int* out) {
  pdl_begin();
  __shared__ int mine[2];
  const u32 rank = cluster_rank(), n = cluster_blocks();
  if (PETAL_TID_X() == 0) mine[0] = (int)rank, mine[1] = (int)PETAL_BID_X();
  cluster_sync();
  if (PETAL_TID_X() == 0) {
    int ranks = 0, blocks = 0;
    for (u32 r = 0; r < n; r++) {
      ranks += ld_cluster_i32(cluster_addr(&mine[0], r));
      blocks += ld_cluster_i32(cluster_addr(&mine[1], r));
    }
    int* o = out + 4 * PETAL_BID_X();
    o[0] = (int)rank, o[1] = (int)n, o[2] = ranks, o[3] = blocks;
  }
  cluster_sync();  // every block's reads done before any block exits
}
