// gdn_chunk_cl.cu: the chunked delta rule's state pass over thread-block
// clusters (gdn_chunk_state_cl, delta=cluster), in a module of its own so
// that gdn_chunk.ptx and its machine code stay as they are while it is
// measured: gdn_chunk.cu's helpers and workspace, its entry points left out.
#include "cluster.h"
#define GDN_CHUNK_CL_MODULE
#include "gdn_chunk.cu"

// The state pass over a thread-block cluster (gdn_chunk_state_cl;
// delta=cluster; written, not yet run on a GPU). gdn_chunk_state_sk's
// block and step is latency, about 1,250 products and four barriers for
// one multiprocessor; here a cluster of GC_CL blocks shares a (value head,
// slice of GC_VT state rows), block q holding key columns kq = q·GC_KC ..
// of those rows, so that each block has about half the products a step:
//
//	the partials Pv = W[:, kq]·S0[:, kq]ᵀ and Po = γQ[:, kq]·S0[:, kq]ᵀ
//	  (tokens x rows), each warp a 16 x 16 tile of one of them;
//	a cluster barrier; Vn = U - (Pv_0 + Pv_1) in every block (the partials
//	  read through distributed shared memory, summed in rank order, so
//	  both blocks hold the same Vn), and γ·S0·q = Po_0 + Po_1 for this
//	  block's half of the rows;
//	o for that half = γ·S0·q + M·Vn; S[:, kq] = γ_{n-1}·S0[:, kq] +
//	  Vnᵀ·Kd[:, kq].
//
// The partials alternate between two buffers by the block's parity, so
// one cluster barrier a step keeps a block from overwriting partials the
// other still reads; a last one keeps either from exiting while the other
// reads its shared memory. The same products as the other forms, the
// float32 sums in another order.
#define GC_CL 2
#define GC_KC (GC_D / GC_CL)
#define GC_LKC (GC_KC + 4)
#define GC_LKCD (GC_KC + 8)
// a buffer: W's and γ·Q's columns kq [C][LKC], the decayed K's [C][LKCD],
// U's slice [C][LV], M [C][LC], γ_{n-1} and padding
#define GC_CBUF (2 * GC_C * GC_LKC + GC_C * GC_LKCD + GC_C * GC_LV + GC_C * GC_LC + 4)
// shared memory: the state's part [VT][LKC], two buffers, the partials of
// two steps [2][Pv, Po][C][LV], Vn [C][LV]
#define GC_STATE_CL_SHARED (4 * (GC_VT * GC_LKC + 2 * GC_CBUF + 5 * GC_C * GC_LV))

// gc_fetch_cl is gc_fetch for the key columns k0.. of W, γ·Q and the
// decayed K.
static __device__ __forceinline__ void gc_fetch_cl(const float* __restrict__ src, float* bf, int a0, int k0, int tid) {
  constexpr int part = GC_C * GC_KC / 4;  // 16-byte pieces of W's, γ·Q's or the decayed K's columns
  for (int i = tid; i < 3 * part; i += GC_STATE_THREADS) {
    const int m = i / part, r = i % part / (GC_KC / 4), c = i % (GC_KC / 4) * 4;
    gc_cp16(bf + m * GC_C * GC_LKC + r * (m == 2 ? GC_LKCD : GC_LKC) + c, src + m * GC_C * GC_D + r * GC_D + k0 + c);
  }
  float* U = bf + 2 * GC_C * GC_LKC + GC_C * GC_LKCD;
  gc_fetch_um(src, U, U + GC_C * GC_LV, a0, tid);
}

// gdn_chunk_state_cl: Hv·(GC_D/GC_VT)·GC_CL blocks of GC_STATE_THREADS
// threads in clusters of GC_CL, GC_STATE_CL_SHARED bytes of dynamic shared
// memory; two blocks a multiprocessor (the 35B model's 256 blocks at once
// on 132).
extern "C" __global__ void __launch_bounds__(GC_STATE_THREADS, 2)
    gdn_chunk_state_cl(const float* __restrict__ ws, float* __restrict__ state, float* __restrict__ out, int rows,
                       int Hv) {
  pdl_begin();
  extern __shared__ __attribute__((aligned(16))) float gc_state_smem[];
  if (gc_dyn_smem() < GC_STATE_CL_SHARED) __builtin_trap();  // a launch with too little shared memory is a bug
  float* Sb = gc_state_smem;  // [VT][LKC]: the slice's rows, this block's key columns
  float* bufs = Sb + GC_VT * GC_LKC;
  float* XP = bufs + 2 * GC_CBUF;  // [parity][Pv, Po][C][LV]
  float* Vn = XP + 4 * GC_C * GC_LV;

  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int q = (int)cluster_rank(), cl = PETAL_BID_X() / GC_CL;
  const int slices = GC_D / GC_VT;
  const int j = cl / slices, a0 = (cl % slices) * GC_VT, k0 = q * GC_KC;
  if (j >= Hv) return;  // the whole cluster alike
  const int nb = (rows + GC_C - 1) / GC_C;
  const float* wsj = ws + (long long)j * nb * GC_WS;
  float* st = state + ((long long)j * GC_D + a0) * GC_D + k0;  // row a of the slice at st + a·GC_D
  // the cluster's partials: block r's at xr[r] (shared::cluster addresses)
  u32 xr[GC_CL];
#pragma unroll
  for (int r = 0; r < GC_CL; r++) xr[r] = cluster_addr(XP, r);
  gc_fetch_cl(wsj, bufs, a0, k0, tid);
  asm volatile("cp.async.commit_group;" ::: "memory");
  for (int i = tid; i < GC_VT * GC_KC; i += GC_STATE_THREADS) Sb[(i / GC_KC) * GC_LKC + i % GC_KC] = st[(i / GC_KC) * GC_D + i % GC_KC];

  for (int blk = 0; blk < nb; blk++) {
    if (blk + 1 < nb) gc_fetch_cl(wsj + (long long)(blk + 1) * GC_WS, bufs + ((blk + 1) & 1) * GC_CBUF, a0, k0, tid);
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    const float* W = bufs + (blk & 1) * GC_CBUF;
    const float* Qg = W + GC_C * GC_LKC;
    const float* Kd = Qg + GC_C * GC_LKC;
    const float* U = Kd + GC_C * GC_LKCD;
    const float* M = U + GC_C * GC_LV;
    const float gl = M[GC_C * GC_LC];
    const int par = blk & 1;

    // this block's partials: warp w the tile of tokens r0.., rows n0.. of
    // Pv (w < 4) or Po, even and odd k-steps apart
    {
      const int pw = warp >> 2, r0 = ((warp >> 1) & 1) * 16, n0 = (warp & 1) * 16;
      const GcMat A{pw ? Qg : W, GC_LKC, 1}, S{Sb, 1, GC_LKC};
      float c0[2][4] = {}, c1[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < GC_KC; kk += 8) {
        const TfA a = gc_frag_a(A, r0, kk, lane);
#pragma unroll
        for (int nt = 0; nt < 2; nt++) mma_tf32x3((kk >> 3) & 1 ? c1[nt] : c0[nt], a, gc_frag_b(S, kk, n0 + nt * 8, lane));
      }
      float* xp = XP + (par * 2 + pw) * GC_C * GC_LV;
#pragma unroll
      for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) xp[(r0 + g + (e >> 1) * 8) * GC_LV + n0 + nt * 8 + 2 * tq + (e & 1)] = c0[nt][e] + c1[nt][e];
    }
    cluster_sync();

    // Vn = U - the cluster's Pv, in rank order
    for (int i = tid; i < GC_C * GC_VT; i += GC_STATE_THREADS) {
      const int r = i / GC_VT, a = i % GC_VT;
      const u32 at = 4u * (u32)((par * 2) * GC_C * GC_LV + r * GC_LV + a);
      float p = ld_cluster_f32(xr[0] + at);
#pragma unroll
      for (int k = 1; k < GC_CL; k++) p += ld_cluster_f32(xr[k] + at);
      Vn[r * GC_LV + a] = U[r * GC_LV + a] - p;
    }
    __syncthreads();

    const int t0 = blk * GC_C, n = imin(GC_C, rows - t0);
    // o = γ·S0·q (the cluster's Po) + M·Vn for this block's rows of the
    // slice: warps 0-3, a tile of 16 tokens and 8 rows each
    if (warp < 4) {
      const int r0 = (warp >> 1) * 16, n0 = q * (GC_VT / GC_CL) + (warp & 1) * 8;
      const GcMat Mm{M, GC_LC, 1}, V{Vn, GC_LV, 1};
      float c[4] = {0.f, 0.f, 0.f, 0.f}, cb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int k = 0; k < GC_C; k += 8) gc_mma3_split(cb, c, gc_frag_a(Mm, r0, k, lane), gc_frag_b(V, k, n0, lane));
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = r0 + g + (e >> 1) * 8, a = n0 + 2 * tq + (e & 1);
        const u32 at = 4u * (u32)((par * 2 + 1) * GC_C * GC_LV + r * GC_LV + a);
        float og = ld_cluster_f32(xr[0] + at);
#pragma unroll
        for (int k = 1; k < GC_CL; k++) og += ld_cluster_f32(xr[k] + at);
        if (r < n) out[((long long)(t0 + r) * Hv + j) * GC_D + a0 + a] = og + (c[e] + cb[e]);
      }
    }
    // S[:, kq] = γ_{n-1}·S0 + Vnᵀ·Kd[:, kq]: warp w rows s0.., key
    // columns c0.. and c0 + 8.. of this block's; each element read and
    // written by one thread
    {
      const int s0 = (warp >> 2) * 16, c0 = (warp & 3) * 16;
      const GcMat Vt{Vn, 1, GC_LV}, K{Kd, GC_LKCD, 1};
      float cs[2][4], css[2][4] = {};
#pragma unroll
      for (int u = 0; u < 2; u++)
#pragma unroll
        for (int e = 0; e < 4; e++) cs[u][e] = gl * Sb[(s0 + g + (e >> 1) * 8) * GC_LKC + c0 + u * 8 + 2 * tq + (e & 1)];
#pragma unroll
      for (int k = 0; k < GC_C; k += 8) {
        const TfA a = gc_frag_a(Vt, s0, k, lane);
#pragma unroll
        for (int u = 0; u < 2; u++) gc_mma3_split(cs[u], css[u], a, gc_frag_b(K, k, c0 + u * 8, lane));
      }
#pragma unroll
      for (int u = 0; u < 2; u++)
#pragma unroll
        for (int e = 0; e < 4; e++) Sb[(s0 + g + (e >> 1) * 8) * GC_LKC + c0 + u * 8 + 2 * tq + (e & 1)] = cs[u][e] + css[u][e];
    }
    __syncthreads();
  }
  for (int i = tid; i < GC_VT * GC_KC; i += GC_STATE_THREADS) st[(i / GC_KC) * GC_D + i % GC_KC] = Sb[(i / GC_KC) * GC_LKC + i % GC_KC];
  cluster_sync();  // the other block's last reads of this one's partials done before either exits
}
