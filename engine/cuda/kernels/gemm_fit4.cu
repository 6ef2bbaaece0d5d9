// gemm_fit4.cu: w160r4, gemm_fitw.cu's MoE tiles (each tile's products as
// wide as its live rows, 64 to 160) with 256 weight rows a tile in four
// warpgroups, 512 threads, one block a multiprocessor. gen.sh: sm_90a
// The same warps and registers a multiprocessor as two blocks of w160rw,
// but each staged X tile (160 rows x 64 columns, 20 KB) serves 256 weight
// rows, not 128: half the copies of X from L2 and half their shared
// memory a product, and the shared memory of one block holds seven stages
// (the copies five k-tiles ahead) where two blocks hold four each (two
// ahead). In ncu2 (docs/bench/cuda) w160rp's gate/up warps stalled most on
// fixed latencies, the code words' shared loads and long-scoreboard waits,
// 0.75 of 3.91 warps eligible a scheduler. moefit=wide; a module of its
// own so that gemm_fitw.ptx and its machine code stay as they are.
#define FITW_TILE_ONLY
#include "gemm_fitw.cu"

// w160r4's dense and grouped dense GEMMs (for tileKernels; the dense
// GEMMs take w256rp), gate/up, down and down with bf16 outputs.
GEMM_DENSE_ENTRIES(w160r4, 160, 256, 4, 4, 7, 1, 4)
extern "C" __global__ void __launch_bounds__(512, 1)
    gemm_gateup_w160r4(const u16* X, const int* rowTok, const u32* Wg, const u32* SBg, const u32* Wu, const u32* SBu,
                       u16* H, int N, int K, const int* tiles, const int* offsets, const int* ntiles) {
  pdl_begin();
  fitw_tile<MODE_GATEUP, 256, 4, 7>(X, rowTok, Wg, SBg, Wu, SBu, H, N, K, tiles, offsets, ntiles);
}
extern "C" __global__ void __launch_bounds__(512, 1)
    gemm_down_w160r4(const u16* Hs, const u32* W, const u32* SB, float* Ys, int N, int K, const int* tiles,
                     const int* offsets, const int* ntiles) {
  pdl_begin();
  fitw_tile<MODE_DOWN, 256, 4, 7>(Hs, 0, W, SB, 0, 0, Ys, N, K, tiles, offsets, ntiles);
}
extern "C" __global__ void __launch_bounds__(512, 1)
    gemm_downbf_w160r4(const u16* Hs, const u32* W, const u32* SB, u16* Ys, int N, int K, const int* tiles,
                       const int* offsets, const int* ntiles) {
  pdl_begin();
  fitw_tile<MODE_DOWN_BF, 256, 4, 7>(Hs, 0, W, SB, 0, 0, Ys, N, K, tiles, offsets, ntiles);
}
