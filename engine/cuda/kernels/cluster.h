// cluster.h: thread-block clusters (compute capability 9.0, launched with
// Stream.LaunchCluster): a block's rank in its cluster and the cluster's
// size, the cluster barrier, and loads and stores of another block's
// shared memory (distributed shared memory). For kernels whose blocks
// must trade a few values a step without a grid-wide wait (a value head's
// partial sums across the blocks that hold its state, say).
#pragma once
#include "device.h"

// cluster_rank is this block's rank in its cluster, 0 to cluster_blocks()-1.
static __device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// cluster_blocks is the number of blocks in this block's cluster.
static __device__ __forceinline__ u32 cluster_blocks() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

// cluster_sync: every thread of every block of the cluster arrives and
// waits for all the others; shared-memory writes before it (release) are
// seen by every block of the cluster after it (acquire). A block must not
// exit while another may still read its shared memory: such kernels end
// with one.
static __device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// cluster_addr is the address in block rank's shared memory of what p is
// in this block's (p a shared-memory pointer), for the ld_cluster loads.
static __device__ __forceinline__ u32 cluster_addr(const void* p, u32 rank) {
  u32 a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32(p)), "r"(rank));
  return a;
}

static __device__ __forceinline__ int ld_cluster_i32(u32 addr) {
  int v;
  asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
static __device__ __forceinline__ float ld_cluster_f32(u32 addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
