// attn_prefill_wgo.cu: flash_wgo_bf16_d256 (attn=wgo), attn_prefill_wg.cu's
// flash_wgp_bf16_d256 written so that ptxas keeps its products pipelined,
// in a module of its own so that attn_prefill_wg.ptx and its machine code
// stay as they are while it is measured. gen.sh: sm_90a
//
// flash_wgp's machine code waits for every wgmma on its own (ptxas's note
// C7513: "wgmma.mma_async instructions are serialized due to non wgmma
// instructions defining input registers of a wgmma"), its 24 products a
// tile each followed by a wait, so the softmax never overlaps P·V and the
// sixteen Q·Kᵀ products never overlap each other. Three things in its loop
// do that, each found with ptxas 12.4 (kernels/regs.sh):
//   - P's fragments (pa), the A operand of the loop's P·V, were undefined
//     on entry to the loop (the first tile has no P·V): an undefined
//     register read by a wgmma serialises every wgmma of the function.
//     Here the first tile is peeled off and pa is zeroed before it.
//   - P·V was issued under `if (i > 0)`: where the two paths meet ptxas
//     waits for every product, P·V's too, before the softmax. Peeled, the
//     loop issues P·V on every tile without a branch.
//   - At 255 registers (16 bytes spilled) ptxas took P's registers for
//     the softmax's temporaries, and so waited for P·V before the
//     softmax. The sixteen cp.async addresses of a tile's copies, which
//     the compiler kept in registers across the loop, are made again each
//     tile from opaque copies of the cache pointers (as Q's address
//     already was): 210 registers, no spills.
// The arithmetic is flash_wgp's, in the same order: the same outputs.
// flash_wg_over is flash_wg_pipe with those three changes, a copy: made a
// form of flash_wg_pipe (a template switch), the same flash_wgp renumbers
// its registers in attn_prefill_wg.ptx, whose built-in cubin only a GPU
// run can make again. Once measured, the winner stays and the other goes.
#define FG_HELPERS_ONLY
#include "attn_prefill_wg.cu"

// FgFirst and FgLater name flash_wg_over's two forms of a tile: the first
// (S only) and every later one (S, and the tile before's P·V beside it).
struct FgFirst {
  static constexpr bool first = true;
};
struct FgLater {
  static constexpr bool first = false;
};

// fg_opaque hides a pointer's value from the optimiser, so that the
// addresses made from it are made where they are used, not held.
template <typename T>
static __device__ __forceinline__ const T* fg_opaque(const T* p) {
  asm volatile("mov.b64 %0, %0;" : "+l"(p));
  return p;
}

static __device__ __forceinline__ void flash_wg_over(const float* __restrict__ q, const float* __restrict__ qg,
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
  u32 pa[KS][4];  // P of the tile before, the A fragments of its P·V: defined before any wgmma reads them
#pragma unroll
  for (int kk = 0; kk < KS; kk++) pa[kk][0] = pa[kk][1] = pa[kk][2] = pa[kk][3] = 0u;

  // tile i: S(i) = Q·K(i), and for a later tile P(i-1)·V(i-1) issued
  // behind it; the softmax of S(i) once S has landed, O rescaled and P(i)
  // made once P·V has.
  auto tile = [&](int i, auto form) __attribute__((always_inline)) {
    constexpr bool FIRST = decltype(form)::first;
    const int k0 = i * FG_BN;
    // K(i+1) and V(i), into the buffers of K(i-1) and V(i-2), which every
    // warp was done with at the barrier that ended the tile before.
    int otid = tid;
    asm volatile("mov.u32 %0, %0;" : "+r"(otid));
    fg_issue(fg_opaque(kc), fg_opaque(vc), stride, g, k0 + FG_BN, k0, kend, tk(i + 1), tv(i), otid, k0 + FG_BN < kend, true);
    float s[NT][4];
    u32 qa;
    asm volatile("mov.u32 %0, %1;" : "=r"(qa) : "r"(qw));
    wg_fence();
#pragma unroll
    for (int ks = 0; ks < FG_D / 16; ks++) {
      const u32 off = (ks >> 2) * (64 * 128) + (ks & 3) * 32;
      fg_mma_s(&s[0][0], wg_desc(qa + off), wg_desc(tk(i) + (ks >> 2) * (FG_BN * 128) + (ks & 3) * 32), ks);
    }
    wg_commit();
    if constexpr (FIRST) {
      wg_wait0();
    } else {
#pragma unroll
      for (int kk = 0; kk < KS; kk++) fg_mma_pv(&st.o[0][0], pa[kk], fg_desc_mn(tv(i - 1) + kk * 16 * 128, FG_BN * 128));
      wg_commit();
      wg_wait1();  // S(i) has landed; P(i-1)·V(i-1) may still run
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
  };
  if (tilesN > 0) tile(0, FgFirst{});
  for (int i = 1; i < tilesN; i++) tile(i, FgLater{});
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

// flash_wgo_bf16_d256: flash_wg_over, the same grid, threads, shared
// memory and parameters as flash_wgp_bf16_d256.
extern "C" __global__ void __launch_bounds__(FG_THREADS, 1)
    flash_wgo_bf16_d256(const float* q, const float* qg, const u16* kc, const u16* vc, const int* pos, float* out,
                        int rows, int QH, int KVH, int maxPos) {
  pdl_begin();
  flash_wg_over(q, qg, kc, vc, pos, out, rows, QH, KVH, maxPos);
}
