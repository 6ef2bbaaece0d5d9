// gemm_tensor.metal: prefill's 4-bit weight GEMMs on Metal 4's tensor
// operations (MetalPerformancePrimitives' matmul2d), which the M5 runs on
// its neural accelerators: gemm.metal's GEMMs (the same entries, parameter
// structs, grids and tiles) with the tile product taken by matmul2d where
// gemm.metal takes 8x8 simdgroup matrices.
//
//   gemm_tensor_dense_f32/_bf16: Y[M,N] = X[M,K]·W[N,K]^T, X float32 or
//                       bf16 row-major (rounded to bf16 as staged), Y float32.
//   gemm_tensor_gateup: per expert group, H[r,:] = silu(X[tok(r)]·Wg_e^T) *
//                       (X[tok(r)]·Wu_e^T), X float32, H bf16.
//   gemm_tensor_down:   per expert group, Ys[r,:] = H[r]·Wd_e^T, float32.
// The grouping, the shared expert's SwiGLU and the combine stay in
// gemm.metal (moe_route, moe_shared_swiglu, moe_combine): nothing there
// multiplies matrices.
//
// A file of its own because tensors need MSL 4.0 (macOS 26, a device of
// MTLGPUFamilyMetal4) and its headers do not compile under the MSL 3.1
// every other library is built with; the host compiles this one with 4.0
// only where the device supports it, else prefill keeps gemm.metal.
//
// A threadgroup of GEMM_SIMDGROUPS simdgroups owns a GEMM_BM x GEMM_BN
// output tile (32 rows, four simdgroups: the published choice on M5). Per
// k-tile (one group of 64) it stages the X rows rounded to bf16 and the W
// rows dequantised once (w = fma(q, s, b) rounded to bf16, as gemm.metal and
// gemm.cu) into threadgroup memory, as bfloat: bf16 rather than half
// because these are the roundings the float64 references and the oracle's
// bfloat16 bars were set for (gemm.cu and gemm=simd take the same inputs),
// and because activations past 65504 would overflow half. Then one matmul2d
// of 32x64x64, bfloat x bfloat into a float32 cooperative tensor
// (multiply_accumulate, relaxed_precision off: the sums are float32 as on
// the tensor cores), which holds the output tile across the k-tiles; at
// the end it is stored to threadgroup memory for the epilogue gemm.metal
// has. The weights are never expanded in device memory. The order of
// additions inside a product is the hardware's.
//
// Nothing of this has run on Apple hardware. Through the CUDA dialect
// (cuda/MetalPerformancePrimitives) matmul2d is a float loop over K per
// element; Apple's cooperative-tensor layout, its scheduling on the neural
// accelerators and its speed are not shown there.
#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;
#include "params.h"
#include "qgroup.h"

#define GEMM_BM 32
#define GEMM_BN 64
#define GEMM_BK 64
#define GEMM_SIMDGROUPS 4
#define GEMM_THREADS (GEMM_SIMDGROUPS * 32)
// The operand tiles unpadded (row stride 64 bfloat, 128 bytes), the output
// tile 64 floats a row.
static_assert((GEMM_BM + GEMM_BN) * GEMM_BK * 2 + GEMM_BM * GEMM_BN * 4 <= 32768,
              "the GEMM tiles exceed Metal's 32 KiB of threadgroup memory");

#define MODE_DENSE 0
#define MODE_GATEUP 1
#define MODE_DOWN 2

static inline float gsilu(float x) { return x / (1.f + exp(-x)); }
static inline ushort x_as_bf16(float x) { return f32_to_bf16(x); }
static inline ushort x_as_bf16(ushort x) { return x; }

// gemm_tile is one threadgroup's GEMM_BM x GEMM_BN output tile, as
// gemm.metal's gemm_tile: dense, rows m0.. of X and Y, rows n0.. of W;
// grouped, the tile map's entry tg.y gives the expert e and its first
// sorted row r0, rows running to offsets[e+1], W rows e*N + n (gate/up: the
// tile's W rows alternate 8 gate rows and the 8 up rows of the same
// outputs, so a tile has GEMM_BN/2 outputs). xs and ws are the operand
// tiles (GEMM_BM and GEMM_BN rows of GEMM_BK bfloat), cs the output tile.
template <int MODE, typename XT>
static inline void gemm_tile(device const XT* X, device const int* rowTok, device const uint* W, device const uint* SB,
                             device const uint* W2, device const uint* SB2, device float* Yf, device ushort* Yh, int M,
                             int N, int K, device const int* tiles, device const int* offsets,
                             device const int* ntiles, uint2 tg, uint tid, threadgroup bfloat* xs,
                             threadgroup bfloat* ws, threadgroup float* cs) {
  int r0, rend;
  ulong wbase = 0;  // first W row of the expert
  if (MODE == MODE_DENSE) {
    r0 = int(tg.y) * GEMM_BM;
    rend = M;
  } else {
    const int t = int(tg.y);
    if (t >= ntiles[0]) return;
    const int e = tiles[2 * t];
    r0 = tiles[2 * t + 1];
    rend = offsets[e + 1];
    wbase = ulong(e) * ulong(N);
  }
  const int n0 = MODE == MODE_GATEUP ? int(tg.x) * (GEMM_BN / 2) : int(tg.x) * GEMM_BN;
  const int ktiles = K / GEMM_BK;
  const ulong wpr = ulong(K / 8), gpr = ulong(K / 64);

  // Each thread stages 16 consecutive values of one X row and 4 code words
  // (32 weights) of one W row a k-tile; the sources are fixed over k.
  const int xrow = int(tid >> 2), xcol = int(tid & 3) * 16;
  const int xr = r0 + xrow;
  const bool xval = xr < rend;
  ulong xsrc = 0;
  if (xval) xsrc = ulong(MODE == MODE_GATEUP ? rowTok[xr] : xr) * ulong(K) + ulong(xcol);
  const int wrow = int(tid >> 1), wword = int(tid & 1) * 4;
  int wn;
  device const uint* wb = W;
  device const uint* sbb = SB;
  if (MODE == MODE_GATEUP) {
    const int t = wrow >> 3;
    wn = n0 + (t >> 1) * 8 + (wrow & 7);
    if (t & 1) wb = W2, sbb = SB2;
  } else {
    wn = n0 + wrow;
  }
  const bool wval = wn < N;
  const ulong wsrc = wval ? (wbase + ulong(wn)) * wpr + ulong(wword) : 0;
  const ulong ssrc = wval ? (wbase + ulong(wn)) * gpr : 0;

  // The operands as tensors over the tiles, extents innermost first: A is
  // the X tile (GEMM_BM rows of GEMM_BK), B^T the W tile (GEMM_BN rows of
  // GEMM_BK), hence transpose_right.
  auto ta = tensor(xs, dextents<int32_t, 2>(GEMM_BK, GEMM_BM), array<int32_t, 2>{1, GEMM_BK});
  auto tb = tensor(ws, dextents<int32_t, 2>(GEMM_BK, GEMM_BN), array<int32_t, 2>{1, GEMM_BK});
  auto tc = tensor(cs, dextents<int32_t, 2>(GEMM_BN, GEMM_BM), array<int32_t, 2>{1, GEMM_BN});
  constexpr auto desc = matmul2d_descriptor(GEMM_BM, GEMM_BN, GEMM_BK, false, true, false,
                                            matmul2d_descriptor::mode::multiply_accumulate);
  matmul2d<desc, execution_simdgroups<GEMM_SIMDGROUPS>> op;
  auto acc = op.get_destination_cooperative_tensor<decltype(ta), decltype(tb), float>();
  for (ushort i = 0; i < acc.get_capacity(); i++)
    if (acc.is_valid_element(i)) acc[i] = 0.f;

  for (int kt = 0; kt < ktiles; kt++) {
    // Every simdgroup is done with the last k-tile's operands.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = 0; j < 16; j++)
      xs[xrow * GEMM_BK + xcol + j] = as_type<bfloat>(xval ? x_as_bf16(X[xsrc + ulong(kt * 64 + j)]) : ushort(0));
    float s = 0.f, b = 0.f;
    if (wval) {
      const uint v = sbb[ssrc + ulong(kt)];
      s = as_type<float>(v << 16);
      b = as_type<float>(v & 0xffff0000u);
    }
    for (int j = 0; j < 4; j++) {
      const uint w = wval ? wb[wsrc + ulong(kt * 8 + j)] : 0u;
      for (int e = 0; e < 8; e++)
        ws[wrow * GEMM_BK + (wword + j) * 8 + e] =
            as_type<bfloat>(wval ? f32_to_bf16(fma(float((w >> (4 * e)) & 0xFu), s, b)) : ushort(0));
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    op.run(ta, tb, acc);
  }

  // Epilogue: the output tile through threadgroup memory (cs), then out
  // with the bounds checked.
  acc.store(tc);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (MODE == MODE_GATEUP) {
    // 32 outputs a row: output o's gate is tile column 16(o/8) + o%8, its
    // up the 8 columns after.
    for (int i = int(tid); i < GEMM_BM * (GEMM_BN / 2); i += GEMM_THREADS) {
      const int row = i / (GEMM_BN / 2), o = i % (GEMM_BN / 2), r = r0 + row, n = n0 + o;
      if (r >= rend || n >= N) continue;
      const int gc = 16 * (o >> 3) + (o & 7);
      const float g = cs[row * GEMM_BN + gc], u = cs[row * GEMM_BN + gc + 8];
      Yh[ulong(r) * ulong(N) + ulong(n)] = f32_to_bf16(gsilu(g) * u);
    }
  } else {
    for (int i = int(tid); i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
      const int row = i / GEMM_BN, c = i % GEMM_BN, r = r0 + row, n = n0 + c;
      if (r >= rend || n >= N) continue;
      Yf[ulong(r) * ulong(N) + ulong(n)] = cs[row * GEMM_BN + c];
    }
  }
}

// Entry points, launched as gemm.metal's: GEMM_THREADS threads a
// threadgroup; grid x = N/GEMM_BN (gate/up: N/(GEMM_BN/2)) rounded up, grid
// y = M/GEMM_BM rounded up (grouped: the tile map's upper bound;
// threadgroups past ntiles return). K % 64 == 0.
kernel void gemm_tensor_dense_f32(device const float* X [[buffer(0)]], device const uint* W [[buffer(1)]],
                                  device const uint* SB [[buffer(2)]], device float* Y [[buffer(3)]],
                                  constant GemmDenseParams& p [[buffer(4)]],
                                  uint2 tg [[threadgroup_position_in_grid]],
                                  uint tid [[thread_position_in_threadgroup]]) {
  threadgroup bfloat xs[GEMM_BM * GEMM_BK];
  threadgroup bfloat ws[GEMM_BN * GEMM_BK];
  threadgroup float cs[GEMM_BM * GEMM_BN];
  gemm_tile<MODE_DENSE, float>(X, nullptr, W, SB, W, SB, Y, nullptr, p.M, p.N, p.K, nullptr, nullptr, nullptr, tg, tid,
                               xs, ws, cs);
}
kernel void gemm_tensor_dense_bf16(device const ushort* X [[buffer(0)]], device const uint* W [[buffer(1)]],
                                   device const uint* SB [[buffer(2)]], device float* Y [[buffer(3)]],
                                   constant GemmDenseParams& p [[buffer(4)]],
                                   uint2 tg [[threadgroup_position_in_grid]],
                                   uint tid [[thread_position_in_threadgroup]]) {
  threadgroup bfloat xs[GEMM_BM * GEMM_BK];
  threadgroup bfloat ws[GEMM_BN * GEMM_BK];
  threadgroup float cs[GEMM_BM * GEMM_BN];
  gemm_tile<MODE_DENSE, ushort>(X, nullptr, W, SB, W, SB, Y, nullptr, p.M, p.N, p.K, nullptr, nullptr, nullptr, tg,
                                tid, xs, ws, cs);
}
kernel void gemm_tensor_gateup(device const float* X [[buffer(0)]], device const int* rowTok [[buffer(1)]],
                               device const uint* Wg [[buffer(2)]], device const uint* SBg [[buffer(3)]],
                               device const uint* Wu [[buffer(4)]], device const uint* SBu [[buffer(5)]],
                               device ushort* H [[buffer(6)]], device const int* tiles [[buffer(7)]],
                               device const int* offsets [[buffer(8)]], device const int* ntiles [[buffer(9)]],
                               constant GemmGroupParams& p [[buffer(10)]],
                               uint2 tg [[threadgroup_position_in_grid]],
                               uint tid [[thread_position_in_threadgroup]]) {
  threadgroup bfloat xs[GEMM_BM * GEMM_BK];
  threadgroup bfloat ws[GEMM_BN * GEMM_BK];
  threadgroup float cs[GEMM_BM * GEMM_BN];
  gemm_tile<MODE_GATEUP, float>(X, rowTok, Wg, SBg, Wu, SBu, nullptr, H, 0, p.N, p.K, tiles, offsets, ntiles, tg, tid,
                                xs, ws, cs);
}
kernel void gemm_tensor_down(device const ushort* Hs [[buffer(0)]], device const uint* W [[buffer(1)]],
                             device const uint* SB [[buffer(2)]], device float* Ys [[buffer(3)]],
                             device const int* tiles [[buffer(4)]], device const int* offsets [[buffer(5)]],
                             device const int* ntiles [[buffer(6)]], constant GemmGroupParams& p [[buffer(7)]],
                             uint2 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_position_in_threadgroup]]) {
  threadgroup bfloat xs[GEMM_BM * GEMM_BK];
  threadgroup bfloat ws[GEMM_BN * GEMM_BK];
  threadgroup float cs[GEMM_BM * GEMM_BN];
  gemm_tile<MODE_DOWN, ushort>(Hs, nullptr, W, SB, W, SB, Ys, nullptr, 0, p.N, p.K, tiles, offsets, ntiles, tg, tid,
                               xs, ws, cs);
}
