// gemm_fitw.cu: w160rw, w160rp's MoE tiles (gemm_fit.cu) with each tile's
// products only as wide as its live rows. gen.sh: sm_90a
// The width is chosen once a block: a tile of
// an expert's rows (at most 160) runs gemm_tile's register-A form
// instantiated for the narrowest of 64, 96, 112, 128, 144 and 160 X rows
// that holds them, so that an expert of 130 rows costs a 144-row tile's
// products, not a 160-row one's (at 4096 tokens an expert's 128 rows on
// average fill 80 % of a 160-row tile). The branch is taken before the
// tile's loop, not inside it (gemm=wgrn's products narrowed inside the
// loop were slower even on full tiles: docs/bench/cuda, narrow1). Dense
// and grouped dense GEMMs are w160rp's. moefit=width; a module of its own
// so that gemm_fit.ptx and its machine code stay as they are.
#define GEMM_WG_MODULE
#include "gemm.cu"

// fitw_tile runs MODE's tile of block (bx, tile t) at the width its live
// rows need: w160rp's shape (two warpgroups of 64 weight rows, four stages,
// k-tiles not drained) against 64 to 160 X rows; or BN weight rows in WN
// warpgroups of 64 and S stages (gemm_fit4.cu's w160r4, 256 in four with
// seven stages, one block a multiprocessor, was slower: gate/up 386.5
// against 338.8 µs at 4096 tokens on an H100, docs/bench/cuda/2026-12-07-next26).
template <int MODE, int BN = 128, int WN = 2, int S = 4>
static __device__ __forceinline__ void fitw_tile(const u16* X, const int* rowTok, const u32* W, const u32* SB,
                                                 const u32* W2, const u32* SB2, void* Y, int N, int K,
                                                 const int* tiles, const int* offsets, const int* ntiles) {
  const int t = G_BID_Y();
  if (t >= ntiles[0]) return;
  const int live = offsets[tiles[2 * t] + 1] - tiles[2 * t + 1], bx = PETAL_BID_X();
#define FITW(BM) gemm_tile<BM, BN, 4, WN, S, MODE, 4>(X, rowTok, W, SB, W2, SB2, Y, 0, N, K, tiles, offsets, ntiles, bx)
  if (live <= 64)
    FITW(64);
  else if (live <= 96)
    FITW(96);
  else if (live <= 112)
    FITW(112);
  else if (live <= 128)
    FITW(128);
  else if (live <= 144)
    FITW(144);
  else
    FITW(160);
#undef FITW
}

#ifndef FITW_TILE_ONLY
// gemm_dense_w160rw and gemm_group_w160rw are w160rp's (dense tiles are
// full but the last); gemm_gateup_, gemm_down_ and gemm_downbf_w160rw fit
// each tile's width.
GEMM_DENSE_ENTRIES(w160rw, 160, 128, 4, 2, 4, 2, 4)
extern "C" __global__ void __launch_bounds__(256, 2)
    gemm_gateup_w160rw(const u16* X, const int* rowTok, const u32* Wg, const u32* SBg, const u32* Wu, const u32* SBu,
                       u16* H, int N, int K, const int* tiles, const int* offsets, const int* ntiles) {
  pdl_begin();
  fitw_tile<MODE_GATEUP>(X, rowTok, Wg, SBg, Wu, SBu, H, N, K, tiles, offsets, ntiles);
}
extern "C" __global__ void __launch_bounds__(256, 2)
    gemm_down_w160rw(const u16* Hs, const u32* W, const u32* SB, float* Ys, int N, int K, const int* tiles,
                     const int* offsets, const int* ntiles) {
  pdl_begin();
  fitw_tile<MODE_DOWN>(Hs, 0, W, SB, 0, 0, Ys, N, K, tiles, offsets, ntiles);
}
extern "C" __global__ void __launch_bounds__(256, 2)
    gemm_downbf_w160rw(const u16* Hs, const u32* W, const u32* SB, u16* Ys, int N, int K, const int* tiles,
                       const int* offsets, const int* ntiles) {
  pdl_begin();
  fitw_tile<MODE_DOWN_BF>(Hs, 0, W, SB, 0, 0, Ys, N, K, tiles, offsets, ntiles);
}
#endif
