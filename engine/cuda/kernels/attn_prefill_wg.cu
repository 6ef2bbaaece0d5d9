// attn_prefill_wg.cu: attn_prefill.cu's flash attention with its products on
// Hopper's wgmma (sm_90a), in a module of its own so that attn_prefill.ptx
// stays sm_90 PTX that newer GPUs can compile. The same rows, softmax
// (fa_softmax) and epilogue (fa_store) as flash_wide, over a bf16 cache.
// gen.sh: sm_90a
#define FA_WG_MODULE
#include "attn_prefill.cu"
#include "wgmma.h"

// flash_wg_bf16_d256: a block takes 128 query rows (16 tokens times the 8
// query heads of one KV head, as flash_wide) in two warpgroups of 64, and
// FG_BN keys a tile, two tiles in flight (the next one's cp.async copies
// issued before this one's products). Per tile and warpgroup: S = Q·Kᵀ,
// sixteen m64n64k16 wgmma with Q and K from shared memory; fa_softmax on
// the accumulators, which are then P's A fragments (bf16, in registers);
// O += P·V, four m64n256k16 wgmma with V as the N-major B operand. O (64 x
// 256 a warpgroup) stays in the accumulators: 128 floats a thread.
//
// Shared memory, 1024-byte aligned for the 128-byte swizzle: Q as two
// warpgroup tiles of 64 rows, then two K and two V tiles of FG_BN rows.
// A tile of R rows of D = 256 bf16 is four panels of 64 columns, each R
// rows of 128 bytes, 16-byte chunk c of row r at c ^ (r & 7) (fg_off):
// the canonical K-major layout for Q and K, and for V, read N-major, the
// same bytes with the panels FG_BN·128 bytes apart (the descriptor's
// leading byte offset) and 8-row groups 1024 apart (its stride). (The
// other reading, the two offsets swapped, failed every case in its one
// run, docs/bench/cuda/2026-12-06-flashwg1, and went.)
#define FG_BM 128
#define FG_BN 64
#define FG_THREADS 256
#define FG_D 256
#define FG_QTILE (64 * 2 * FG_D)     // one warpgroup's Q rows: 32 KiB
#define FG_KVTILE (FG_BN * 2 * FG_D)  // a K or V tile: 32 KiB

// fg_off is the byte offset of 16-byte chunk c (of D/8) of row r in a tile
// of `rows` rows.
static __device__ __forceinline__ u32 fg_off(int r, int c, int rows) {
  return (u32)((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// fg_desc_mn is the descriptor of an N-major operand with the 128-byte
// swizzle: 64-column panels lbo bytes apart, 8-row groups 1024 apart.
static __device__ __forceinline__ unsigned long long fg_desc_mn(u32 addr, u32 lbo) {
  return (unsigned long long)((addr >> 4) & 0x3FFF) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) | (64ull << 32) |
         (1ull << 62);
}

// fg_rescale is fa_rescale skipped by a warp whose rows' factors are all 1
// (their maxima unchanged by the tile, as most tiles leave them at long
// context): the same outputs, bit for bit, without the 128 multiplies.
static __device__ __forceinline__ void fg_rescale(FaRows<FG_D>& st, float c0, float c1) {
  u32 any;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nvote.sync.any.pred q, p, 0xffffffff;\nselp.u32 %0, 1, 0, q;\n}"
      : "=r"(any)
      : "r"((u32)(c0 != 1.f || c1 != 1.f)));
  if (any) fa_rescale<FG_D>(st, c0, c1);
}

// fg_mma_s: d (32 floats, as wg_mma_n128's) = (acc ? d : 0) + A[64 x 16] ·
// B[64 x 16]ᵀ, both from shared memory.
static __device__ __forceinline__ void fg_mma_s(float* d, unsigned long long a, unsigned long long b, int acc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %[acc], 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_R32 ", %[a], %[b], p, 1, 1, 0, 0;\n}"
      : WG_D32(0)
      : [a] "l"(a), [b] "l"(b), [acc] "r"(acc)
      : "memory");
}

// fg_mma_pv: d (128 floats) += A[64 x 16] · B[16 x 256], A from registers
// (as wg_mma_n256_ra's), B N-major (transposed) through its descriptor.
static __device__ __forceinline__ void fg_mma_pv(float* d, const u32* a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %[one], 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_R128
      ", {%[a0], %[a1], %[a2], %[a3]}, %[b], p, 1, 1, 1;\n}"
      : WG_D128
      : [a0] "r"(a[0]), [a1] "r"(a[1]), [a2] "r"(a[2]), [a3] "r"(a[3]), [b] "l"(b), [one] "r"(1)
      : "memory");
}

// fg_issue queues the cp.async copies of keys kK .. kK+FG_BN-1 of KV head g
// into the K tile tk (with doK) and of keys kV .. into the V tile tv (with
// doV; both block-uniform), zeros past kend, as one group.
static __device__ __forceinline__ void fg_issue(const u16* __restrict__ kc, const u16* __restrict__ vc, long long stride,
                                                int g, int kK, int kV, int kend, u32 tk, u32 tv, int tid, bool doK,
                                                bool doV) {
  constexpr int CH = FG_D / 8;  // 16-byte chunks a row
#pragma unroll
  for (int j = 0; j < 2 * FG_BN * CH / FG_THREADS; j++) {
    const int id = tid + j * FG_THREADS, kv = id / (FG_BN * CH), r = (id / CH) % FG_BN, c = id % CH;
    if (kv ? !doV : !doK) continue;
    const int key = (kv ? kV : kK) + r;
    const bool v = key < kend;
    const u16* src = (kv ? vc : kc) + (v ? (long long)key * stride + (long long)g * FG_D : 0) + c * 8;
    cp_async16((kv ? tv : tk) + fg_off(r, c, FG_BN), src, v);
  }
  cp_commit();
}

// fg_load_q writes the block's Q rows as bf16: row m (token tok0 + m/G,
// query head g·G + m%G; zeros past the chunk) into warpgroup m/64's tile.
static __device__ __forceinline__ void fg_load_q(u32 sq, const float* __restrict__ q, int tid, int tok0, int rows, int G,
                                                 int g, int QH) {
  constexpr int CH = FG_D / 8;
#pragma unroll 4
  for (int j = 0; j < FG_BM * CH / FG_THREADS; j++) {
    const int id = tid + j * FG_THREADS, m = id / CH, c = id % CH, t = tok0 + m / G, h = g * G + m % G;
    u32 w[4] = {0u, 0u, 0u, 0u};
    if (t < rows) fa_chunk8(q + ((long long)t * QH + h) * FG_D + c * 8, w);
    fa_st16(sq + (m >> 6) * FG_QTILE + fg_off(m & 63, c, 64), w[0], w[1], w[2], w[3]);
  }
}

static __device__ __forceinline__ void flash_wg(const float* __restrict__ q, const float* __restrict__ qg,
                                                const u16* __restrict__ kc, const u16* __restrict__ vc,
                                                const int* __restrict__ pos, float* __restrict__ out, int rows, int QH,
                                                int KVH, int maxPos) {
  constexpr int NT = FG_BN / 8;
  extern __shared__ __attribute__((aligned(1024))) unsigned char fg_sm[];
  const u32 sq = (fa_smem(fg_sm) + 1023u) & ~1023u, tiles = sq + 2 * FG_QTILE;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const FaBlock fb = fa_block<FG_BM, FG_D>(pos, rows, QH, KVH, maxPos);
  const int G = fb.G, g = fb.g, tok0 = fb.tok0, p0 = fb.p0, kend = fb.kend;
  const long long stride = fb.stride;
  auto tk = [&](int b) __attribute__((always_inline)) { return tiles + (2 * b) * FG_KVTILE; };
  auto tv = [&](int b) __attribute__((always_inline)) { return tiles + (2 * b + 1) * FG_KVTILE; };
  const u32 qw = sq + wg * FG_QTILE;  // this warpgroup's Q rows

  fg_issue(kc, vc, stride, g, 0, 0, kend, tk(0), tv(0), tid, true, true);
  fg_load_q(sq, q, tid, tok0, rows, G, g, QH);
  cp_wait<0>();
  fence_proxy_async();  // the Q stores and the copies, before wgmma reads them
  __syncthreads();

  FaRows<FG_D> st;
  fa_rows<FG_D>(st, warp, lane, G, p0 + tok0, kend);
  for (int k0 = 0, b = 0; k0 < kend; k0 += FG_BN, b ^= 1) {
    if (k0 + FG_BN < kend) fg_issue(kc, vc, stride, g, k0 + FG_BN, k0 + FG_BN, kend, tk(b ^ 1), tv(b ^ 1), tid, true, true);
    float s[NT][4];
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < FG_D / 16; ks++) {
      const u32 off = (ks >> 2) * (64 * 128) + (ks & 3) * 32;  // panel, then 16 columns along it
      fg_mma_s(&s[0][0], wg_desc(qw + off), wg_desc(tk(b) + (ks >> 2) * (FG_BN * 128) + (ks & 3) * 32), ks);
    }
    wg_commit();
    wg_wait0();
    wg_keep<32>(&s[0][0]);

    fa_softmax<FG_D, NT>(s, lane, k0, p0 + tok0, st);

    // O += P·V: P's A fragment for keys 16kk.. is S's tiles 2kk and 2kk+1.
    u32 pa[FG_BN / 16][4];
#pragma unroll
    for (int kk = 0; kk < FG_BN / 16; kk++) {
      pa[kk][0] = fa_pack(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = fa_pack(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < FG_BN / 16; kk++) {
      const u32 at = tv(b) + kk * 16 * 128;  // 16 keys a step: two 8-row groups
      fg_mma_pv(&st.o[0][0], pa[kk], fg_desc_mn(at, FG_BN * 128));
    }
    wg_commit();
    wg_wait0();
    wg_keep<128>(&st.o[0][0]);
#pragma unroll
    for (int kk = 0; kk < FG_BN / 16; kk++) wg_keep4(pa[kk]);

    // The next tile has landed and every warp is done with this one.
    cp_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }
  fa_store<FG_D>(st, warp, lane, G, g, tok0, rows, p0, maxPos, QH, qg, out);
}

// flash_wg_pipe is flash_wg with each warpgroup's softmax of a tile
// overlapping its products of the tile before: tile i's S = Q·K(i) and
// tile i-1's O += P(i-1)·V(i-1) are issued together (two wgmma groups), the
// softmax of S(i) runs once its group is done while P·V still runs, and the
// outputs are rescaled by its factors only after P·V has landed. K(i) and
// V(i-1) are read in iteration i, so the copies issued there are K(i+1)
// and V(i): two K and two V buffers, as flash_wg. The last tile's P·V
// follows the loop. A warp whose rows' maxima the tile left as they were
// skips the rescaling (fg_rescale).
static __device__ __forceinline__ void flash_wg_pipe(const float* __restrict__ q, const float* __restrict__ qg,
                                                     const u16* __restrict__ kc, const u16* __restrict__ vc,
                                                     const int* __restrict__ pos, float* __restrict__ out, int rows,
                                                     int QH, int KVH, int maxPos) {
  constexpr int NT = FG_BN / 8, KS = FG_BN / 16;
  extern __shared__ __attribute__((aligned(1024))) unsigned char fg_sm[];
  const u32 sq = (fa_smem(fg_sm) + 1023u) & ~1023u, tiles = sq + 2 * FG_QTILE;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const FaBlock fb = fa_block<FG_BM, FG_D>(pos, rows, QH, KVH, maxPos);
  const int G = fb.G, g = fb.g, tok0 = fb.tok0, p0 = fb.p0, kend = fb.kend;
  const long long stride = fb.stride;
  auto tk = [&](int i) __attribute__((always_inline)) { return tiles + (2 * (i & 1)) * FG_KVTILE; };
  auto tv = [&](int i) __attribute__((always_inline)) { return tiles + (2 * (i & 1) + 1) * FG_KVTILE; };
  const u32 qw = sq + wg * FG_QTILE;
  const int tilesN = kend > 0 ? (kend + FG_BN - 1) / FG_BN : 0;

  // K(0) alone first (its V comes with K(1)).
  fg_issue(kc, vc, stride, g, 0, 0, kend, tk(0), tv(0), tid, true, false);
  fg_load_q(sq, q, tid, tok0, rows, G, g, QH);
  cp_wait<0>();
  fence_proxy_async();
  __syncthreads();

  FaRows<FG_D> st;
  fa_rows<FG_D>(st, warp, lane, G, p0 + tok0, kend);
  u32 pa[KS][4];  // P of the tile before, the A fragments of its P·V
  for (int i = 0; i < tilesN; i++) {
    const int k0 = i * FG_BN;
    // K(i+1) and V(i), into the buffers of K(i-1) and V(i-2), which every
    // warp was done with at the barrier that ended the last iteration.
    fg_issue(kc, vc, stride, g, k0 + FG_BN, k0, kend, tk(i + 1), tv(i), tid, k0 + FG_BN < kend, true);
    float s[NT][4];
    // Q's address made opaque each iteration, so that its sixteen
    // descriptors are made here (a few integer operations) rather than
    // held in 32 registers across the loop.
    u32 qa;
    asm volatile("mov.u32 %0, %1;" : "=r"(qa) : "r"(qw));
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < FG_D / 16; ks++) {
      const u32 off = (ks >> 2) * (64 * 128) + (ks & 3) * 32;
      fg_mma_s(&s[0][0], wg_desc(qa + off), wg_desc(tk(i) + (ks >> 2) * (FG_BN * 128) + (ks & 3) * 32), ks);
    }
    wg_commit();
    if (i > 0) {
#pragma unroll
      for (int kk = 0; kk < KS; kk++) fg_mma_pv(&st.o[0][0], pa[kk], fg_desc_mn(tv(i - 1) + kk * 16 * 128, FG_BN * 128));
      wg_commit();
      wg_wait1();  // S(i) has landed; P(i-1)·V(i-1) may still run
    } else {
      wg_wait0();
    }
    wg_keep<32>(&s[0][0]);
    float c0, c1;
    fa_probs<FG_D, NT>(s, lane, k0, p0 + tok0, st, c0, c1);
    wg_wait0();  // P(i-1)·V(i-1) has landed: O may be rescaled, pa rewritten
    wg_keep<128>(&st.o[0][0]);
#pragma unroll
    for (int kk = 0; kk < KS; kk++) wg_keep4(pa[kk]);
    fg_rescale(st, c0, c1);
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
      pa[kk][0] = fa_pack(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = fa_pack(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    // K(i+1) and V(i) have landed, and every warp is done with K(i) and V(i-1).
    cp_wait<0>();
    fence_proxy_async();
    __syncthreads();
  }
  // The last tile's P·V.
  if (tilesN > 0) {
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < KS; kk++) fg_mma_pv(&st.o[0][0], pa[kk], fg_desc_mn(tv(tilesN - 1) + kk * 16 * 128, FG_BN * 128));
    wg_commit();
    wg_wait0();
    wg_keep<128>(&st.o[0][0]);
#pragma unroll
    for (int kk = 0; kk < KS; kk++) wg_keep4(pa[kk]);
  }
  fa_store<FG_D>(st, warp, lane, G, g, tok0, rows, p0, maxPos, QH, qg, out);
}

#ifndef FG_HELPERS_ONLY
// The entry point: gridDim (blocks of 128/G tokens, KV heads), 256 threads,
// FG_SHARED bytes of dynamic shared memory (attn_prefill.go).
extern "C" __global__ void __launch_bounds__(FG_THREADS, 1)
    flash_wg_bf16_d256(const float* q, const float* qg, const u16* kc, const u16* vc, const int* pos, float* out, int rows,
                       int QH, int KVH, int maxPos) {
  pdl_begin();
  flash_wg(q, qg, kc, vc, pos, out, rows, QH, KVH, maxPos);
}
// flash_wgp_bf16_d256: flash_wg_pipe, the same grid, threads and shared
// memory as flash_wg_bf16_d256.
extern "C" __global__ void __launch_bounds__(FG_THREADS, 1)
    flash_wgp_bf16_d256(const float* q, const float* qg, const u16* kc, const u16* vc, const int* pos, float* out,
                        int rows, int QH, int KVH, int maxPos) {
  pdl_begin();
  flash_wg_pipe(q, qg, kc, vc, pos, out, rows, QH, KVH, maxPos);
}
#endif  // FG_HELPERS_ONLY
