// moe_route.cu: the MoE block of one decoded token in two launches
// (moelayer=cluster) instead of three (route_norm, moe_gate_up, moe_down):
// the router runs inside the gate/up launch, once in every thread-block
// cluster, so that no kernel boundary and no ticket stand between the
// router's choice and the experts' first rows. A module of its own, built
// on moe.cu (MOE_LIBRARY leaves that file's entry points out), so
// that moe.ptx and its machine code stay as they are. Measured slower
// than the three kernels in 2026-12-07-gl1.
//
//   moe_route_up: every block computes the post-attention norm's x from h
//     and delta itself (qstage's norm, bit for bit add_rmsnorm's) and the
//     logits of its eighth of the experts into its own shared memory; its
//     cluster meets, every block reads all the logits from the cluster's
//     shared memory (distributed shared memory) and selects (route_select:
//     the same arithmetic and tie order as the router's kernels, so every
//     block of every cluster holds the same choice), asks L2 for the down
//     rows of the choice (a slice a block), and does its gate/up rows as
//     moe_gate_up does. Block 0 writes the logits, the ids, the weights and
//     the normed x out. The sum h + delta is not written back here: other
//     clusters may not have read h yet, and there is no grid-wide wait.
//   moe_route_down: moe_down after its wait (the ids come from moe_route_up,
//     complete by then), whose thread that writes out[r] first writes
//     h[r] += delta[r] (delta may be out: the MoE's output reuses the
//     attention's buffer).
//
// The router's rows are read once a cluster (17 MB of L2 reads at 33
// clusters of the 35B router, 0.5 MB from memory); what that costs against
// the kernel boundary and the ticket it saves is what moelayer=cluster
// measures.
#define MOE_LIBRARY
#include "moe.cu"
#include "cluster.h"

#define MR_BLOCKS 8  // the cluster: each block an eighth of the experts
#define MR_RPW 4     // router rows a warp, their loads in flight together

// mr_pad is where element i of x lives in the router's copy: 68 floats a
// group of 64, so that the lanes (a group each) read distinct banks.
static __device__ __forceinline__ int mr_pad(int i) { return i + (i >> 6) * 4; }

// mr_down_prefetch asks L2 for this block's slice of the down rows of the
// choice (eid, in shared memory: the slot is computed, not unrolled; then
// the shared expert's), codes and scale/bias words, a 128-byte line at a
// time: moe_route_down reads them after its wait.
template <int SB>
static __device__ __forceinline__ void mr_down_prefetch(const MoELayerArgs& a, const int* eid) {
  const int H = a.hidden, gpr = a.inter / 64;
  const long long wpr = a.inter / 8;
  const int lines = (int)((wpr + 31) / 32);
  const long long total = (long long)(MOE_TOPK + 1) * H * lines;
  const long long step = (long long)PETAL_NCTAID_X() * PETAL_NTID_X();
  for (long long i = (long long)PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X(); i < total; i += step) {
    const int k = (int)(i / ((long long)H * lines));
    const long long rest = i - (long long)k * H * lines;
    const int r = (int)(rest / lines), l = (int)(rest - (long long)r * lines);
    const long long row = k < MOE_TOPK ? (long long)eid[k] * H + r : r;
    prefetch_l2((k < MOE_TOPK ? a.dw : a.sdw) + row * wpr + 32 * l);
    if (SB && l == 0) prefetch_l2((k < MOE_TOPK ? a.ds : a.sds) + 2 * row * gpr);
  }
}

// moe_route_up: the grid a whole number of clusters of MR_BLOCKS blocks of
// MOE_UP_WARPS*32 threads; experts a multiple of MR_BLOCKS, at most 1024;
// QSTAGE_BYTES(M, hidden/64) rounded up to 16 + 4·(hidden/64·68 +
// experts/MR_BLOCKS + 2·experts) bytes of dynamic shared memory.
template <int M, int SB, int BITS>
static __device__ __forceinline__ void moe_route_up(const MoELayerArgs& a) {
  extern __shared__ u32 smem[];
  const int tid = PETAL_TID_X(), nthreads = PETAL_NTID_X(), bid = PETAL_BID_X();
  const int H = a.hidden, I = a.inter, E = a.experts, ng = H / 64, per = E / MR_BLOCKS;
  const u32 rank = cluster_rank();
  float* xr = (float*)((char*)smem + ((QSTAGE_BYTES(M, ng) + 15) & ~15));  // x for the router (mr_pad's layout, 16-byte aligned)
  float* bl = xr + ng * 68;                                 // this block's logits, read by its cluster
  float* ls = bl + per;                                     // all the logits, then route_select's
  int* ks = (int*)(ls + E);
  __shared__ int sid[MOE_TOPK];
  __shared__ float swt[MOE_TOPK];
  // PETAL_MARK's points (clock builds): 0 start, 1 x normed, 2 the logits
  // written, 3 the cluster met, 4 the choice made, 5 the tasks done.
  PETAL_MARK(0);
  // Before the wait: this block's router rows and the shared expert's
  // rows, which do not depend on the kernel before.
  route_prefetch_part<BITS>(a.rw, E, H, rank, MR_BLOCKS);
  moe_gate_up_shared_prefetch<1, SB>(a.sgw, a.sgs, a.suw, a.sus, a.ew, I, H, a.upTeam);
  pdl_begin();
  pdl_trigger();  // moe_route_down reads nothing before its own wait

  const float* raw = qstage_raw<true>(nullptr, ng, QNormIn{a.h, a.delta, a.normw, a.eps, nullptr});
  for (int i = tid; i < H; i += nthreads) xr[mr_pad(i)] = raw[i];
  __syncthreads();
  PETAL_MARK(1);
  route_logits_part<BITS, 68, MR_RPW>(a.rw, a.rs, a.rb, xr, bl, E, H, rank, MR_BLOCKS);
  PETAL_MARK(2);
  cluster_sync();  // every block's logits written, and seen by the cluster
  PETAL_MARK(3);
  for (int e = tid; e < E; e += nthreads) ls[e] = ld_cluster_f32(cluster_addr(bl + e % per, e / per));
  cluster_arrive();  // done with the others' shared memory; cluster_wait before exit
  route_select(ls, ls, ks, sid, swt, E, MOE_TOPK, a.normalize);  // reads ls[e] back by the thread that wrote it
  __syncthreads();
  PETAL_MARK(4);
  mr_down_prefetch<SB>(a, sid);
  if (bid == 0) {
    for (int e = tid; e < E; e += nthreads) a.logits[e] = ls[e];
    if (tid < MOE_TOPK) a.ids[tid] = sid[tid], a.wts[tid] = swt[tid];
    for (int i = tid; i < H; i += nthreads) a.xout[i] = raw[i];
  }
  const QView q = qstage_layout<M>(ng);
  moe_gate_up_tasks<M, 1, SB>(a.gw, a.gs, a.gb, a.uw, a.us, a.ub, a.sgw, a.sgs, a.sgb, a.suw, a.sus, a.sub, a.ew, a.es,
                              a.eb, sid, q, a.act, a.slogit, I, H, a.upTeam, 0, (MOE_TOPK + 1) * I + 1,
                              bid * MOE_UP_WARPS + (tid >> 5), PETAL_NCTAID_X() * MOE_UP_WARPS);
  PETAL_MARK(5);
  cluster_wait();
}

// moe_route_down: moe_down's grid and shared memory (MOE_DOWN_WARPS*32
// threads, QSTAGE_BYTES(kind, (MOE_TOPK+1)·inter/64) bytes).
template <int M, int SB>
static __device__ __forceinline__ void moe_route_down(const MoELayerArgs& a) {
  const int H = a.hidden, I = a.inter;
  // PETAL_MARK's points (clock builds): 8 start, 9 waited, 10 the
  // activations copied, 11 staged, 12 the rows done.
  PETAL_MARK(8);
  pdl_begin();
  pdl_trigger();  // the next layer's first projections stream their rows in beside this kernel
  PETAL_MARK(9);
  int eid[MOE_TOPK];
  float coef[MOE_TOPK + 1];
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) eid[k] = a.ids[k], coef[k] = a.wts[k];
  coef[MOE_TOPK] = sigmoid(a.slogit[0]);
  qstage_raw(a.act, (MOE_TOPK + 1) * (I / 64));
  PETAL_MARK(10);
  const QView q = qstage_layout<M>((MOE_TOPK + 1) * (I / 64));
  PETAL_MARK(11);
  const int warp = PETAL_TID_X() >> 5;
  if (a.delta) {
    moe_down_rows<M, SB, true>(a.dw, a.ds, a.db, a.sdw, a.sds, a.sdb, eid, coef, q, a.resid, a.out, H, I, a.downTeam,
                               PETAL_BID_X() * MOE_DOWN_WARPS + warp, PETAL_NCTAID_X() * MOE_DOWN_WARPS, a.h, a.delta);
  } else {
    moe_down_rows<M, SB>(a.dw, a.ds, a.db, a.sdw, a.sds, a.sdb, eid, coef, q, a.resid, a.out, H, I, a.downTeam,
                         PETAL_BID_X() * MOE_DOWN_WARPS + warp, PETAL_NCTAID_X() * MOE_DOWN_WARPS);
  }
  PETAL_MARK(12);
}

// Entry points moe_route_up_<kind>_sb_r8 and moe_route_down_<kind>_sb, over
// moe_layer's operands (MoELayerArgs; ticket, bar and routerBlocks unused):
// an 8-bit router, the kinds of qmv=exact and qmv=fast.
#define MOE_ROUTE_UP(M, BITS, NAME)                                                                  \
  extern "C" __global__ void __launch_bounds__(MOE_UP_WARPS * 32, 2) NAME(const MoELayerArgs a) { \
    moe_route_up<M, 1, BITS>(a);                                                                   \
  }
#define MOE_ROUTE_DOWN(M, NAME)                                                                                 \
  extern "C" __global__ void __launch_bounds__(MOE_DOWN_WARPS * 32, 16 / MOE_DOWN_WARPS) NAME(const MoELayerArgs a) { \
    moe_route_down<M, 1>(a);                                                                                    \
  }
MOE_ROUTE_UP(QM_I8X3, 8, moe_route_up_i8x3_sb_r8)
MOE_ROUTE_UP(QM_I8X2, 8, moe_route_up_i8x2_sb_r8)
MOE_ROUTE_DOWN(QM_I8X3, moe_route_down_i8x3_sb)
MOE_ROUTE_DOWN(QM_I8X2, moe_route_down_i8x2_sb)
