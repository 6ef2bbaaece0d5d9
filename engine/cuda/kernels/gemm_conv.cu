// gemm_conv.cu: convgemm=on, a prompt chunk's Gated DeltaNet conv inside
// its in_proj GEMM, in a module of its own so that gemm_wg.ptx and its
// machine code stay as they are while it is measured. gen.sh: sm_90a
//
// The qkv projection (4096 tokens x 8192 channels, float32) is written by
// the grouped GEMM and read back by conv_silu, which writes the conv's
// output as much again: 268 MB a layer at 4096 tokens, conv_silu 105 µs
// of it (flowtrace1). The GEMM's 256-row tile already holds its outputs
// in shared memory before it stores them (GEMM_RA_STAGED_OUT), so the
// conv of each row from its fourth on is made there from the three rows
// before it (gemm_tile's GemmConv epilogue); conv_fix makes the first
// three rows of each tile from the raw rows written beside (the tile
// before's last three, or the conv state), and advances the state.
//   gemm_group_conv_w256rp: gemm_group_w256rp with matrix ci of the group
//     (the qkv) through the conv: its taps convW [N][4], its output convOut
//     [M][N]; grid, block and shared memory as gemm_group_w256rp's.
//   conv_fix: grid (ceil(C/256), tiles of GC_TILE rows), 256 threads: rows
//     0-2 of each tile, conv_silu's arithmetic, from x (the raw rows the
//     GEMM wrote) and the state; the state advanced to the chunk's last
//     three rows by the first tile's threads, which alone read it.
#define GEMM_WG_MODULE
#include "gemm.cu"

#define GCONV_TILE 256  // the rows of gemm_group_conv_w256rp's tile

extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_group_conv_w256rp(const QMVGroup g, const u16* X, int M, int K, int ci, const float* convW, float* convOut) {
  pdl_begin();
  const int bx = PETAL_BID_X();
  int b0 = 0, at = -1, N = 0, lx = 0;
#pragma unroll
  for (int i = 0; i < QMV_GROUP; i++) {
    if (i < g.n) {
      const int ni = g.start[i + 1] - g.start[i], nb = (ni + 128 - 1) / 128;
      if (bx >= b0 && bx < b0 + nb) at = i, N = ni, lx = bx - b0;
      b0 += nb;
    }
  }
  const u32 *W = g.words[0], *SB = g.sb[0];
  float* Y = g.y[0];
#pragma unroll
  for (int i = 1; i < QMV_GROUP; i++)
    if (at == i) W = g.words[i], SB = g.sb[i], Y = g.y[i];
  if (at < 0) return;
  gemm_tile<GCONV_TILE, 128, 4, 2, 5, MODE_DENSE, 4, true>(X, 0, W, SB, 0, 0, Y, M, N, K, 0, 0, 0, lx,
                                                          GemmConv{convW, convOut, at == ci});
}

extern "C" __global__ void __launch_bounds__(256)
    conv_fix(const float* __restrict__ x, float* __restrict__ state, const float* __restrict__ w,
             float* __restrict__ out, int rows, int C) {
  pdl_begin();
  const int c = PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  if (c >= C) return;
  const int r0 = G_BID_Y() * GCONV_TILE, r1 = r0 + 3 < rows ? r0 + 3 : rows;
  // the input at row i (negative: the state's rows), as conv_silu's
#define GCONV_IN(i) ((i) >= 0 ? x[(long long)(i) * C + c] : state[(long long)((i) + 3) * C + c])
  const float w0 = w[c * 4LL], w1 = w[c * 4LL + 1], w2 = w[c * 4LL + 2], w3 = w[c * 4LL + 3];
  float a = GCONV_IN(r0 - 3), b = GCONV_IN(r0 - 2), d = GCONV_IN(r0 - 1);
  for (int r = r0; r < r1; r++) {
    const float xv = x[(long long)r * C + c];
    out[(long long)r * C + c] = conv4_silu(w0, w1, w2, w3, a, b, d, xv);
    a = b, b = d, d = xv;
  }
  // row rows-3+j of the input; where that is still in the state (rows <
  // 3) it is a later row of it than j, not yet overwritten
  if (r0 == 0)
    for (int j = 0; j < 3; j++) state[(long long)j * C + c] = GCONV_IN(rows - 3 + j);
#undef GCONV_IN
}
