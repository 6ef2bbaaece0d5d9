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

// moe_combine_bf is moe_combine over bf16 expert outputs: out[t][n] = (add
// ? out[t][n] : 0) + sum_k w[t,k]·Ys[pos(t,k)][n] in slot order, float32
// sums, one block per token, N % 4 == 0; a slot whose expert id was outside
// the stack (pos -1) makes its token's row NaN.
extern "C" __global__ void __launch_bounds__(COMBINE_THREADS)
    moe_combine_bf(const u16* __restrict__ ys, const int* __restrict__ pos, const float* __restrict__ wts,
                   float* __restrict__ out, int N, int add) {
  pdl_begin();
  const int t = PETAL_BID_X();
  int p[GEMM_TOPK];
  float w[GEMM_TOPK];
#pragma unroll
  for (int k = 0; k < GEMM_TOPK; k++) p[k] = pos[t * GEMM_TOPK + k], w[k] = wts[t * GEMM_TOPK + k];
  float* o = out + (long long)t * N;
  for (int n = PETAL_TID_X() * 4; n < N; n += COMBINE_THREADS * 4) {
    float4v s = {0.f, 0.f, 0.f, 0.f};
    if (add) s = *(const float4v*)(o + n);
#pragma unroll
    for (int k = 0; k < GEMM_TOPK; k++) {
      if (p[k] < 0) {
        const float nan = __uint_as_float(0x7fc00000u);
        s = float4v{nan, nan, nan, nan};
        break;
      }
      // four bf16 values: each the top half of its float32
      const unsigned long long v = *(const unsigned long long*)(ys + (long long)p[k] * N + n);
      const u32 lo = (u32)v, hi = (u32)(v >> 32);
      s.x += w[k] * __uint_as_float(lo << 16), s.y += w[k] * __uint_as_float(lo & 0xFFFF0000u);
      s.z += w[k] * __uint_as_float(hi << 16), s.w += w[k] * __uint_as_float(hi & 0xFFFF0000u);
    }
    *(float4v*)(o + n) = s;
  }
}
