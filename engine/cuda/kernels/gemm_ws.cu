// gemm_ws.cu: w256rp's dense GEMM (the weights as wgmma's A operand from
// registers, two warpgroups of 64 weight rows against 256 X rows) in two
// other forms, dense tiles only: w256rs, its copies issued by a producer
// warp, and w256r3 (below), three warpgroups of weight rows. gen.sh: sm_90a
//
// In w256rp every thread issues its share of a k-tile's copies and the
// block meets at a barrier each k-tile; Nsight Compute had its warps
// stalled at that barrier 0.90 and on memory (long scoreboard, their
// copies' waits among it) 0.74 of the 7.05 cycles between their issued
// instructions (docs/bench/cuda/2026-12-07-ncu2). Here a ninth warp only copies:
// it fills stage s of S and, once its copies have landed (a k-tile later,
// the next one's copies in flight meanwhile) and are fenced to the async
// proxy, completes the stage's "full" mbarrier; the two warpgroups wait for
// that barrier alone, and each of their warps arrives at the stage's
// "empty" mbarrier once the products that read it are done (after the
// next k-tile's first wait), which is what the producer waits for before
// it fills the stage again. No block-wide barrier after the start. The
// same products in the same order as w256rp: the same bits.
// A module of its own (gemm=wgrs, gemm=wgr3), so that gemm_wg.ptx and its
// machine code stay as they are.
#define GEMM_WG_MODULE
#include "gemm.cu"

static __device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// mbar_arrive is one arrival of this thread at bar.
static __device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
// mbar_try says whether bar's phase of the given parity has completed
// (mbar_wait spins on it).
static __device__ __forceinline__ bool mbar_try(u32 bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done;
}
// mbar_arrive_if is mbar_arrive where on is nonzero, predicated in the
// instruction rather than branched around.
static __device__ __forceinline__ void mbar_arrive_if(u32 bar, int on) {
  asm volatile("{\n.reg .b64 st;\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar),
               "r"(on)
               : "memory");
}
static __device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try(bar, parity)) {
  }
}

// The two tiles' shared parts. A consumer thread's weight rows are wrow
// and wrow + 8 of its block's (wrow = 64·(warp/4) + 16·(warp%4) + lane/4),
// its accumulators wacc[4j + i] weight row wrow (+8 for i >= 2), X row 8j
// + 2c + (i & 1), c = lane % 4: w256rp's.

// ra_ktile runs one k-tile's four k-steps of a warpgroup's register-A
// products (gemm_tile's with WG = 4: the fragments alternate between a[0]
// and a[1], each k-step waiting for the one before), from the stage at st
// (its X tile), cw (its codes) and sbw (its scale/bias words). at_first
// runs after the first k-step's products are issued and the ones before
// them waited for (the k-tile before is then done).
template <typename F>
static __device__ __forceinline__ void ra_ktile(float (&wacc)[128], u32 (&a)[2][4], u32 st, const u32* cw,
                                                const u32* sbw, int wrow, u32 sel, F at_first) {
  const u32 sb0 = sbw[wrow], sb1 = sbw[wrow + 8];
  const u32 s0 = prmt(sb0, sb0, 0x1010u), b0 = prmt(sb0, sb0, 0x3232u);
  const u32 s1 = prmt(sb1, sb1, 0x1010u), b1 = prmt(sb1, sb1, 0x3232u);
  U32x2 q0 = *(const U32x2*)(cw + wrow * 8), q1 = *(const U32x2*)(cw + (wrow + 8) * 8);
#pragma unroll
  for (int ks = 0; ks < 4; ks++) {
    u32* f = a[ks & 1];
    f[0] = dequant_pair2(q0.x, sel, s0, b0);
    f[1] = dequant_pair2(q1.x, sel, s1, b1);
    f[2] = dequant_pair2(q0.y, sel, s0, b0);
    f[3] = dequant_pair2(q1.y, sel, s1, b1);
    if (ks < 3) {
      q0 = *(const U32x2*)(cw + wrow * 8 + 2 * (ks + 1));
      q1 = *(const U32x2*)(cw + (wrow + 8) * 8 + 2 * (ks + 1));
    }
    wg_fence();
    wg_mma_n256_ra(wacc, f, wg_desc(st + ks * 32));
    wg_commit();
    wg_wait1();  // k-step ks-1's products: its fragment registers are rewritten next
    wg_keep4(a[(ks + 1) & 1]);
    if (ks == 0) at_first();
  }
}

// ra_store waits for the last products and writes the tile's outputs at
// Y[r0 .. rend, n0 ..] (row stride N, columns from N on dropped).
static __device__ __forceinline__ void ra_store(float (&wacc)[128], u32 (&a)[2][4], float* __restrict__ Y, int N,
                                                int r0, int rend, int n0, int wrow, int c) {
  wg_wait0();
  wg_keep4(a[0]);
  wg_keep4(a[1]);
  wg_keep<128>(wacc);
#pragma unroll
  for (int j = 0; j < 32; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int r = r0 + 8 * j + 2 * c + e;
      if (r >= rend) continue;
      float* y = Y + (long long)r * N + n0;
      if (n0 + wrow < N) y[wrow] = wacc[4 * j + e];
      if (n0 + wrow + 8 < N) y[wrow + 8] = wacc[4 * j + 2 + e];
    }
}

// group_member finds block bx's matrix in a grouped launch of BN-row
// blocks (GEMM_DENSE_ENTRIES' gemm_group walk, which keeps its own copy
// inline so that gemm.cu's families and their built machine code stay as
// they are): its words, scale/bias words, output and rows, and the block
// within it; false for a block past the group.
template <int BN>
static __device__ __forceinline__ bool group_member(const QMVGroup& g, int bx, const u32*& W, const u32*& SB,
                                                    float*& Y, int& N, int& lx) {
  int b0 = 0, at = -1;
  N = 0, lx = 0;
#pragma unroll
  for (int i = 0; i < QMV_GROUP; i++) {
    if (i < g.n) {
      const int ni = g.start[i + 1] - g.start[i], nb = (ni + BN - 1) / BN;
      if (bx >= b0 && bx < b0 + nb) at = i, N = ni, lx = bx - b0;
      b0 += nb;
    }
  }
  W = g.words[0], SB = g.sb[0], Y = g.y[0];
#pragma unroll
  for (int i = 1; i < QMV_GROUP; i++)
    if (at == i) W = g.words[i], SB = g.sb[i], Y = g.y[i];
  return at >= 0;
}

#define WS_BM 256
#define WS_BN 128
#define WS_S 5
// WS_LEAD: how many k-tiles the producer's copies run ahead of the k-tile it
// marks full; at most WS_S - 2, or it would wait at an empty barrier for
// products that wait for its own full one
#define WS_LEAD 3
static_assert(WS_LEAD >= 1 && WS_LEAD <= WS_S - 2, "WS_LEAD");
#define WS_CONSUMERS 256  // two warpgroups
#define WS_THREADS (WS_CONSUMERS + 32)

// ws_dense_tile computes Y[r0 .., n0 .. n0+127] (+ z·M·N under split-K) of
// block (bx, blockIdx.y, blockIdx.z), as gemm_tile<256, 128, 4, 2, 5,
// MODE_DENSE, 4> does, with WS_THREADS threads: warps 0-7 the consumers,
// warp 8 the producer. Dynamic shared memory: WS_S stages as w256rp's,
// then 2·WS_S mbarriers.
static __device__ __forceinline__ void ws_dense_tile(const u16* __restrict__ X, const u32* __restrict__ W,
                                                     const u32* __restrict__ SB, float* __restrict__ Y, int M, int N,
                                                     int K, int bx) {
  constexpr int A_BYTES = WS_BM * 128, C_BYTES = WS_BN * 32;
  constexpr int STAGE = (A_BYTES + WS_BN * 36 + 1023) / 1024 * 1024;
  extern __shared__ __attribute__((aligned(128))) unsigned char gsm[];
  const u32 sbase = smem_u32(gsm);
  if (sbase & 1023) __builtin_trap();  // the descriptors assume the swizzle's alignment
  const u32 fullb = sbase + WS_S * STAGE, emptyb = fullb + 8 * WS_S;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;

  const int r0 = G_BID_Y() * WS_BM, rend = M, n0 = bx * WS_BN;
  const int z = G_BID_Z(), splits = G_NBID_Z();
  const int kt0 = z * (K / 64) / splits, kt1 = (z + 1) * (K / 64) / splits, nk = kt1 - kt0;
  Y += (long long)z * M * N;
  const long long wpr = K / 8, gpr = K / 64;

  if (tid == 0) {
    for (int s = 0; s < WS_S; s++) {
      mbar_init(fullb + 8 * s, 32);                   // the producer's lanes, once their copies land
      mbar_init(emptyb + 8 * s, WS_CONSUMERS / 32);  // each consumer warp's lane 0, once done with the stage
    }
  }
  __syncthreads();

  if (warp == WS_CONSUMERS / 32) {
    // The producer: k-tile kt into stage kt % WS_S, once the consumers are
    // done with what it held (k-tile kt - WS_S); k-tile kt - WS_LEAD marked
    // full once it has landed, so that WS_LEAD + 1 k-tiles' copies are in
    // flight (fw2, with one k-tile ahead: w256rs at a third of w256rp's
    // rate, each k-tile waiting out a copy's whole latency).
    // This lane's X copies: rows lane/8 + 4j (j < 64), chunk lane % 8; the
    // swizzle (ch ^ (row & 7)) takes two values, by j's parity.
    const int xrow = lane >> 3, xch = lane & 7;
    const u32 xdst0 = xrow * 128 + ((xch ^ xrow) << 4), xdst1 = (xrow + 4) * 128 + ((xch ^ (xrow + 4)) << 4);
    for (int kt = 0; kt < nk; kt++) {
      const int s = kt % WS_S;
      if (kt >= WS_S) mbar_wait(emptyb + 8 * s, (kt / WS_S - 1) & 1);
      const u32 st = sbase + s * STAGE;
      const long long k0 = (long long)(kt0 + kt) * 64;
      // X: 256 rows of 8 chunks of 16 bytes, swizzled as gemm_tile's
      const u16* xs = X + (long long)r0 * K + k0 + xch * 8;
#pragma unroll 8
      for (int j = 0; j < WS_BM / 4; j++) {
        const int r = r0 + xrow + 4 * j;
        cp_async16(st + 512 * (j & ~1) + ((j & 1) ? xdst1 : xdst0), xs + (long long)(r < rend ? xrow + 4 * j : 0) * K, r < rend);
      }
      // the codes: 128 rows of 2 chunks; the scale/bias words: 128
      for (int i = lane; i < WS_BN * 2; i += 32) {
        const int n = n0 + (i >> 1);
        cp_async16(st + A_BYTES + i * 16, W + (n < N ? n : 0) * wpr + (kt0 + kt) * 8 + (i & 1) * 4, n < N);
      }
      for (int row = lane; row < WS_BN; row += 32) {
        const int n = n0 + row;
        cp_async4(st + A_BYTES + C_BYTES + row * 4, SB + (n < N ? n : 0) * gpr + kt0 + kt, n < N);
      }
      cp_commit();
      // k-tile kt - WS_LEAD's copies landed (the later ones still in
      // flight): to the async proxy that wgmma reads through, then its
      // stage is full
      if (kt >= WS_LEAD) {
        cp_wait<WS_LEAD>();
        fence_proxy_async();
        mbar_arrive(fullb + 8 * ((kt - WS_LEAD) % WS_S));
      }
    }
    cp_wait<0>();
    fence_proxy_async();
    for (int kt = nk > WS_LEAD ? nk - WS_LEAD : 0; kt < nk; kt++) mbar_arrive(fullb + 8 * (kt % WS_S));
    return;
  }

  // The consumers: gemm_tile's register-A k-steps (WG = 4), each k-tile
  // waited for at its full barrier instead of a block-wide one.
  const int g = lane >> 2, c = lane & 3;
  const int wrow = 64 * (warp >> 2) + 16 * (warp & 3) + g;  // this thread's weight rows: wrow, wrow + 8
  const u32 sel = (u32)c * 0x1111u + 0x4400u;               // dequant_pair2's selector of byte c
  float wacc[WS_BM / 2];
#pragma unroll
  for (int i = 0; i < WS_BM / 2; i++) wacc[i] = 0.f;
  u32 a[2][4];
  for (int kt = 0; kt < nk; kt++) {
    const int s = kt % WS_S;
    mbar_wait(fullb + 8 * s, (kt / WS_S) & 1);
    // after the first k-step, k-tile kt-1's products are all done: its
    // stage is free. Each warp's lane 0 arrives (its lanes are past the
    // same aligned wgmma wait, their reads of the stage done), predicated
    // in the instruction rather than branched around: with a branch ptxas
    // serialised the wgmma (C7513, run fw1). One arrival a warp, not 256
    // a k-tile on one shared-memory word (fw3, every thread arriving,
    // 276-293 TFLOP/s; fw4, one a warp, 273-287: not what holds it).
    ra_ktile(wacc, a, sbase + s * STAGE, (const u32*)(gsm + s * STAGE + A_BYTES),
             (const u32*)(gsm + s * STAGE + A_BYTES + C_BYTES), wrow, sel,
             [&]() __attribute__((always_inline)) { mbar_arrive_if(emptyb + 8 * ((kt + WS_S - 1) % WS_S), kt > 0 && lane == 0); });
  }
  ra_store(wacc, a, Y, N, r0, rend, n0, wrow, c);
}

// gemm_dense_w256rs and gemm_group_w256rs take gemm_dense_ and
// gemm_group_w256rp's arguments and grids, WS_THREADS threads and w256rp's
// dynamic shared memory and 16·WS_S bytes more; no MoE entries (a dense
// tile only).
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
    gemm_dense_w256rs(const u16* X, const u32* W, const u32* SB, float* Y, int M, int N, int K) {
  pdl_begin();
  ws_dense_tile(X, W, SB, Y, M, N, K, PETAL_BID_X());
}
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1) gemm_group_w256rs(const QMVGroup g, const u16* X, int M, int K) {
  pdl_begin();
  const u32 *W, *SB;
  float* Y;
  int N, lx;
  if (group_member<WS_BN>(g, PETAL_BID_X(), W, SB, Y, N, lx)) ws_dense_tile(X, W, SB, Y, M, N, K, lx);
}

// w256r3: w256rp's dense GEMM with three warpgroups of 64 weight rows, 192
// a block, against its 256 X rows (384 threads, one block a
// multiprocessor). In w256rp (two warpgroups) Nsight Compute had each warp
// take 7.05 cycles an issued instruction (ncu2): with its k-tile loop's 227
// instructions (CUDA 12.4's build), an estimated 1,600 cycles a k-tile,
// where the tensor cores' peak rate would do its products in about 1,024.
// A third warpgroup adds half again as many products a k-tile to about the
// same per-warp stream (251 instructions), and each X tile read from L2
// serves 192 weight rows, not 128. (Estimates, not measurements: run-fw2.sh
// times it.)
// The same k-steps and products in the same order as w256rp: the same
// bits. Copies by every thread, each predicated (no branch between a
// k-tile's products and their wait), then w256rp's barrier a k-tile.
#define W3_BM 256
#define W3_BN 192
#define W3_S 5
#define W3_THREADS 384  // three warpgroups
static_assert(WS_BM == 256 && W3_BM == 256, "ra_ktile and ra_store: 256 X rows, 128 accumulators a thread");

// w3_dense_tile computes Y[r0 .., n0 .. n0+191] (+ z·M·N under split-K) of
// block (bx, blockIdx.y, blockIdx.z). Dynamic shared memory: W3_S stages
// of the X tile (256 rows of 128 bytes, swizzled), the codes (192 rows of
// 32 bytes) and the scale/bias words (192), each 1024-byte aligned.
static __device__ __forceinline__ void w3_dense_tile(const u16* __restrict__ X, const u32* __restrict__ W,
                                                     const u32* __restrict__ SB, float* __restrict__ Y, int M, int N,
                                                     int K, int bx) {
  constexpr int A_BYTES = W3_BM * 128, C_BYTES = W3_BN * 32;
  constexpr int STAGE = (A_BYTES + W3_BN * 36 + 1023) / 1024 * 1024;
  constexpr int PD = W3_S - 2;  // k-tiles the copies run ahead (undrained, as w256rp)
  constexpr int A_PER = (W3_BM * 8 + W3_THREADS - 1) / W3_THREADS;
  static_assert(W3_BN * 2 == W3_THREADS && W3_BN <= W3_THREADS && W3_THREADS % 8 == 0 && W3_THREADS / 8 == 48,
                "a code chunk a thread, a scale/bias word a thread, a thread's X chunks 48 rows apart");
  extern __shared__ __attribute__((aligned(128))) unsigned char gsm[];
  const u32 sbase = smem_u32(gsm);
  if (sbase & 1023) __builtin_trap();  // the descriptors assume the swizzle's alignment
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;

  const int r0 = G_BID_Y() * W3_BM, rend = M, n0 = bx * W3_BN;
  const int z = G_BID_Z(), splits = G_NBID_Z();
  const int kt0 = z * (K / 64) / splits, kt1 = (z + 1) * (K / 64) / splits, nk = kt1 - kt0;
  Y += (long long)z * M * N;
  const long long wpr = K / 8, gpr = K / 64;

  // load queues k-tile kt's copies into stage kt % W3_S (none past nk)
  // A thread's X chunks are rows tid/8 + 48j of the tile, the same chunk
  // ch = tid % 8 of each (384 is a multiple of 8), so one source pointer
  // and a stride serve them, and one destination (the swizzle depends on
  // row % 8, which 48j keeps). Rows past rend copy zeros from row 0. The
  // rest is worked out again each k-tile from t (tid, hidden from the
  // compiler so that it does not hold every source across the loop: six
  // row pointers spilled 92 bytes at the 168 registers of 384 threads).
  const int xrow = tid >> 3, xch = tid & 7;
  const u16* xsrc = X + (long long)(r0 + xrow) * K + xch * 8;
  const u32 xdst = (u32)(xrow * 128 + ((xch ^ (xrow & 7)) << 4));
  const int xlive = rend - r0 - xrow;  // rows xrow + 48j live for 48j < xlive
  auto load = [&](int kt) __attribute__((always_inline)) {
    int t = tid;
    asm volatile("" : "+r"(t));
    const bool live = kt < nk;
    const u32 st = sbase + (kt % W3_S) * STAGE;
    const int k0 = (kt0 + kt) * 64;
#pragma unroll
    for (int j = 0; j < A_PER; j++) {  // X: 256 rows of 8 chunks, swizzled as gemm_tile's
      const bool in = 48 * j < xlive;
      cp_async16_if(st + xdst + j * 48 * 128, in ? xsrc + (long long)(48 * j) * K + k0 : X,
                    live && xrow + 48 * j < W3_BM, in);
    }
    const int nc = n0 + (t >> 1), ns = n0 + t;  // this thread's code chunk's row, its scale/bias row
    cp_async16_if(st + A_BYTES + t * 16, W + (long long)(nc < N ? nc : 0) * wpr + (kt0 + kt) * 8 + (t & 1) * 4,
                  live, nc < N);
    cp_async4_if(st + A_BYTES + C_BYTES + t * 4, SB + (long long)(ns < N ? ns : 0) * gpr + kt0 + kt,
                 live && t < W3_BN, ns < N);
    cp_commit();
  };
#pragma unroll
  for (int kt = 0; kt < PD; kt++) load(kt);

  const int g = lane >> 2, c = lane & 3;
  const int wrow = 64 * (warp >> 2) + 16 * (warp & 3) + g;  // this thread's weight rows: wrow, wrow + 8
  const u32 sel = (u32)c * 0x1111u + 0x4400u;               // dequant_pair2's selector of byte c
  float wacc[W3_BM / 2];
#pragma unroll
  for (int i = 0; i < W3_BM / 2; i++) wacc[i] = 0.f;
  u32 a[2][4];
  for (int kt = 0; kt < nk; kt++) {
    cp_wait<PD - 1>();
    fence_proxy_async();  // this thread's copies of the X tile to the async proxy, before the barrier
    __syncthreads();      // k-tile kt staged; every warp's products of k-tile kt-2 done (its stage is the next load's)
    load(kt + PD);
    const int s = kt % W3_S;
    ra_ktile(wacc, a, sbase + s * STAGE, (const u32*)(gsm + s * STAGE + A_BYTES),
             (const u32*)(gsm + s * STAGE + A_BYTES + C_BYTES), wrow, sel, []() __attribute__((always_inline)) {});
  }
  cp_wait<0>();
  ra_store(wacc, a, Y, N, r0, rend, n0, wrow, c);
}

// gemm_dense_w256r3 and gemm_group_w256r3 take gemm_dense_ and
// gemm_group_w256rp's arguments, W3_THREADS threads, 192 weight rows a
// block (the grid's x) and their stages' dynamic shared memory; no MoE
// entries (a dense tile only).
extern "C" __global__ void __launch_bounds__(W3_THREADS, 1)
    gemm_dense_w256r3(const u16* X, const u32* W, const u32* SB, float* Y, int M, int N, int K) {
  pdl_begin();
  w3_dense_tile(X, W, SB, Y, M, N, K, PETAL_BID_X());
}
extern "C" __global__ void __launch_bounds__(W3_THREADS, 1) gemm_group_w256r3(const QMVGroup g, const u16* X, int M, int K) {
  pdl_begin();
  const u32 *W, *SB;
  float* Y;
  int N, lx;
  if (group_member<W3_BN>(g, PETAL_BID_X(), W, SB, Y, N, lx)) w3_dense_tile(X, W, SB, Y, M, N, K, lx);
}
