// gemm_downbf.cu: the MoE's down GEMM with its expert outputs written in
// bf16 (moeys=bf16), and moe_combine_bf, which adds them back: the outputs
// of a prefill chunk's pairs are written once and read once (268 MB each
// way in float32 at 4096 tokens of the 35B model), so half the bytes each
// way. The sums stay float32 (the tile's accumulators, the combine's); each
// expert's output row is rounded once, to bf16, as a bf16 model's own
// expert outputs are. gemm_wg.cu's and gemm_fit.cu's register-A tiles, the
// MoE's under moe=wg. gen.sh: sm_90a
// A module of its own, loaded under moeys=bf16 only, so that gemm.ptx,
// gemm_wg.ptx, gemm_fit.ptx and their machine code stay as they are.
#define GEMM_WG_MODULE
#include "gemm.cu"

// GEMM_DOWN_BF's arguments are GEMM_ENTRIES' for the same tile (gemm_wg.cu,
// gemm_fit.cu); gemm_downbf_<tile> takes gemm_down_<tile>'s arguments with
// Ys bf16 [pairs][N].
#define GEMM_DOWN_BF(NAME, BM, BN, WM, WN, S, MINB, WG)                                                         \
  extern "C" __global__ void __launch_bounds__(WM* WN * 32, MINB)                                            \
      gemm_downbf_##NAME(const u16* Hs, const u32* W, const u32* SB, u16* Ys, int N, int K, const int* tiles,  \
                         const int* offsets, const int* ntiles) {                                            \
    pdl_begin();                                                                                             \
    gemm_tile<BM, BN, WM, WN, S, MODE_DOWN_BF, WG>(Hs, 0, W, SB, 0, 0, Ys, 0, N, K, tiles, offsets, ntiles,  \
                                                   PETAL_BID_X());                                           \
  }
GEMM_DOWN_BF(w64r, 64, 128, 4, 2, 3, 3, 3)
GEMM_DOWN_BF(w128rp, 128, 128, 4, 2, 5, 2, 4)
GEMM_DOWN_BF(w32r, 32, 128, 2, 4, 5, 3, 4)
GEMM_DOWN_BF(w80rp, 80, 128, 4, 2, 5, 2, 4)
GEMM_DOWN_BF(w160rp, 160, 128, 4, 2, 4, 2, 4)

// moe_combine_bf is moe_combine over bf16 expert outputs: gemm.cu's
// combine_rows, float32 sums.
extern "C" __global__ void __launch_bounds__(COMBINE_THREADS)
    moe_combine_bf(const u16* __restrict__ ys, const int* __restrict__ pos, const float* __restrict__ wts,
                   float* __restrict__ out, int N, int add) {
  pdl_begin();
  combine_rows(ys, pos, wts, out, N, add);
}
