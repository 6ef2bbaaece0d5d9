// gemm.metal: the 4-bit weight GEMMs of prefill on simdgroup matrices, and
// the device-side grouping of the MoE's (token, expert) pairs: the sibling
// of engine/cuda/kernels/gemm.cu, its entries in the same order.
//
//   gemm_dense_f32/_bf16: Y[M,N] = X[M,K]·W[N,K]^T, X float32 or bf16
//                       row-major (rounded to bf16 as staged), Y float32.
//   gemm_gateup:        per expert group, H[r,:] = silu(X[tok(r)]·Wg_e^T) *
//                       (X[tok(r)]·Wu_e^T), X float32, H bf16 (it feeds the
//                       down GEMM).
//   gemm_down:          per expert group, Ys[r,:] = H[r]·Wd_e^T, float32.
//   moe_route:          histogram of the top-8 expert ids, prefix scan,
//                       scatter into per-expert row lists, tile map.
//   moe_combine:        out[t] (+)= sum over k of w[t,k]·Ys[pos(t,k)].
//   moe_shared_swiglu:  the shared expert's gated SwiGLU, bf16 for its down GEMM.
//   gemm_mma8_check:    one simdgroup-matrix product per threadgroup, the
//                       check of the simdgroup_matrix calls the GEMMs make
//                       (through the CUDA dialect, of its emulation).
//
// W is MLX affine 4-bit in groups of 64 (spec 3.2): row n's group g is 8
// little-endian u32 words (element 8i+j in bits 4j..4j+3 of word i) and one
// u32 of (bf16 scale | bf16 bias << 16), the interleaved scale/bias words
// made at upload. A k-tile is one group (64 wide). A threadgroup of
// GEMM_SIMDGROUPS simdgroups owns a GEMM_BM x GEMM_BN output tile (32 rows,
// four simdgroups: the published choice on M5); per k-tile it stages the X
// rows rounded to bf16 and the W rows dequantised once (w = fma(q, s, b)
// rounded to bf16, as gemm.cu's bf16x2 fma), both held as float in
// threadgroup memory, and each simdgroup multiplies its 32 x 16 part as
// 8x8 simdgroup matrices with float32 accumulation. The weights are never
// expanded in device memory. Where gemm.cu pipelines its copies with
// cp.async three or four stages deep, this has one stage (Metal has no
// asynchronous copy into threadgroup memory, and two stages of float tiles
// would not fit in 32 KiB): load, barrier, multiply, barrier. The sums are
// those of bf16 inputs with float32 accumulation, as on the tensor cores;
// the order of additions inside a product is the hardware's.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"

#define GEMM_BM 32
#define GEMM_BN 64
#define GEMM_SIMDGROUPS 4
#define GEMM_THREADS (GEMM_SIMDGROUPS * 32)
// GEMM_LD is the row stride of the threadgroup tiles, in floats: 64 and
// 16 bytes of padding, as MLX pads its tiles.
#define GEMM_LD 68
static_assert((GEMM_BM + GEMM_BN) * GEMM_LD * 4 <= 32768, "the GEMM tiles exceed Metal's 32 KiB of threadgroup memory");
#define GEMM_TOPK 8
#define ROUTE_THREADS 1024
#define COMBINE_THREADS 256

#define MODE_DENSE 0
#define MODE_GATEUP 1
#define MODE_DOWN 2

static inline float gsilu(float x) { return x / (1.f + exp(-x)); }
static inline float gsigmoid(float x) { return 1.f / (1.f + exp(-x)); }
static inline float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
static inline float x_as_bf16(float x) { return round_bf16(x); }
static inline float x_as_bf16(ushort x) { return bf16_to_f32(x); }

// gemm_tile is one threadgroup's GEMM_BM x GEMM_BN output tile. Dense: rows
// m0.. of X and Y, rows n0.. of W. Grouped (gate/up, down): the tile map's
// entry tg.y gives the expert e and its first sorted row r0; rows run to
// offsets[e+1]; W rows are e*N + n (gate/up: N is the expert's inter size,
// and the tile's rows alternate 8 gate rows and the 8 up rows of the same
// outputs, so a tile has GEMM_BN/2 outputs). xs and ws are the
// threadgroup tiles (GEMM_BM and GEMM_BN rows of GEMM_LD floats); ws holds
// the output tile at the end.
template <int MODE, typename XT>
static inline void gemm_tile(device const XT* X, device const int* rowTok, device const uint* W, device const uint* SB,
                             device const uint* W2, device const uint* SB2, device float* Yf, device ushort* Yh, int M,
                             int N, int K, device const int* tiles, device const int* offsets,
                             device const int* ntiles, uint2 tg, uint tid, threadgroup float* xs,
                             threadgroup float* ws) {
  const uint sg = tid >> 5;
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
  const int ktiles = K / 64;
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

  simdgroup_float8x8 acc[4][2];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.f);

  for (int kt = 0; kt < ktiles; kt++) {
    // Every simdgroup is done with the last k-tile's tiles.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int j = 0; j < 16; j++)
      xs[xrow * GEMM_LD + xcol + j] = xval ? x_as_bf16(X[xsrc + ulong(kt * 64 + j)]) : 0.f;
    float s = 0.f, b = 0.f;
    if (wval) {
      const uint v = sbb[ssrc + ulong(kt)];
      s = as_type<float>(v << 16);
      b = as_type<float>(v & 0xffff0000u);
    }
    for (int j = 0; j < 4; j++) {
      const uint w = wval ? wb[wsrc + ulong(kt * 8 + j)] : 0u;
      for (int e = 0; e < 8; e++)
        ws[wrow * GEMM_LD + (wword + j) * 8 + e] = wval ? round_bf16(fma(float((w >> (4 * e)) & 0xFu), s, b)) : 0.f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int ks = 0; ks < 8; ks++) {
      simdgroup_float8x8 a[4], bm[2];
      for (int i = 0; i < 4; i++) simdgroup_load(a[i], xs + (8 * i) * GEMM_LD + 8 * ks, GEMM_LD);
      // B[k][n] = W[n][k]: the W tile's 8x8 block read transposed.
      for (int j = 0; j < 2; j++) simdgroup_load(bm[j], ws + (sg * 16 + 8 * j) * GEMM_LD + 8 * ks, GEMM_LD, 0, true);
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], bm[j], acc[i][j]);
    }
  }

  // Epilogue: the output tile through threadgroup memory (ws), then out
  // with the bounds checked.
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 2; j++) simdgroup_store(acc[i][j], ws + (8 * i) * GEMM_LD + sg * 16 + 8 * j, GEMM_LD);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (MODE == MODE_GATEUP) {
    // 32 outputs a row: output o's gate is tile column 16(o/8) + o%8, its
    // up the 8 columns after.
    for (int i = int(tid); i < GEMM_BM * (GEMM_BN / 2); i += GEMM_THREADS) {
      const int row = i / (GEMM_BN / 2), o = i % (GEMM_BN / 2), r = r0 + row, n = n0 + o;
      if (r >= rend || n >= N) continue;
      const int gc = 16 * (o >> 3) + (o & 7);
      const float g = ws[row * GEMM_LD + gc], u = ws[row * GEMM_LD + gc + 8];
      Yh[ulong(r) * ulong(N) + ulong(n)] = f32_to_bf16(gsilu(g) * u);
    }
  } else {
    for (int i = int(tid); i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
      const int row = i / GEMM_BN, c = i % GEMM_BN, r = r0 + row, n = n0 + c;
      if (r >= rend || n >= N) continue;
      Yf[ulong(r) * ulong(N) + ulong(n)] = ws[row * GEMM_LD + c];
    }
  }
}

// Entry points. Launch with GEMM_THREADS threads a threadgroup; grid x =
// N/GEMM_BN (gate/up: N/(GEMM_BN/2)) rounded up, grid y = M/GEMM_BM
// rounded up (grouped: the tile map's upper bound; threadgroups past
// ntiles return). K % 64 == 0.
kernel void gemm_dense_f32(device const float* X [[buffer(0)]], device const uint* W [[buffer(1)]],
                           device const uint* SB [[buffer(2)]], device float* Y [[buffer(3)]],
                           constant GemmDenseParams& p [[buffer(4)]], uint2 tg [[threadgroup_position_in_grid]],
                           uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float xs[GEMM_BM * GEMM_LD];
  threadgroup float ws[GEMM_BN * GEMM_LD];
  gemm_tile<MODE_DENSE, float>(X, nullptr, W, SB, W, SB, Y, nullptr, p.M, p.N, p.K, nullptr,
                               nullptr, nullptr, tg, tid, xs, ws);
}
kernel void gemm_dense_bf16(device const ushort* X [[buffer(0)]], device const uint* W [[buffer(1)]],
                            device const uint* SB [[buffer(2)]], device float* Y [[buffer(3)]],
                            constant GemmDenseParams& p [[buffer(4)]], uint2 tg [[threadgroup_position_in_grid]],
                            uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float xs[GEMM_BM * GEMM_LD];
  threadgroup float ws[GEMM_BN * GEMM_LD];
  gemm_tile<MODE_DENSE, ushort>(X, nullptr, W, SB, W, SB, Y, nullptr, p.M, p.N, p.K, nullptr, nullptr, nullptr, tg,
                                tid, xs, ws);
}
kernel void gemm_gateup(device const float* X [[buffer(0)]], device const int* rowTok [[buffer(1)]],
                        device const uint* Wg [[buffer(2)]], device const uint* SBg [[buffer(3)]],
                        device const uint* Wu [[buffer(4)]], device const uint* SBu [[buffer(5)]],
                        device ushort* H [[buffer(6)]], device const int* tiles [[buffer(7)]],
                        device const int* offsets [[buffer(8)]], device const int* ntiles [[buffer(9)]],
                        constant GemmGroupParams& p [[buffer(10)]], uint2 tg [[threadgroup_position_in_grid]],
                        uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float xs[GEMM_BM * GEMM_LD];
  threadgroup float ws[GEMM_BN * GEMM_LD];
  gemm_tile<MODE_GATEUP, float>(X, rowTok, Wg, SBg, Wu, SBu, nullptr, H, 0, p.N, p.K, tiles, offsets, ntiles, tg, tid,
                                xs, ws);
}
kernel void gemm_down(device const ushort* Hs [[buffer(0)]], device const uint* W [[buffer(1)]],
                      device const uint* SB [[buffer(2)]], device float* Ys [[buffer(3)]],
                      device const int* tiles [[buffer(4)]], device const int* offsets [[buffer(5)]],
                      device const int* ntiles [[buffer(6)]], constant GemmGroupParams& p [[buffer(7)]],
                      uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float xs[GEMM_BM * GEMM_LD];
  threadgroup float ws[GEMM_BN * GEMM_LD];
  gemm_tile<MODE_DOWN, ushort>(Hs, nullptr, W, SB, W, SB, Ys, nullptr, 0, p.N, p.K, tiles, offsets, ntiles, tg, tid,
                               xs, ws);
}

// moe_route groups the T*GEMM_TOPK (token, slot) pairs by expert, in one
// threadgroup of ROUTE_THREADS threads (E <= ROUTE_THREADS). ids[t*TOPK+k]
// is token t's k-th expert. Writes counts[E], offsets[E+1] (exclusive
// scan), pos[t*TOPK+k] (the pair's sorted row; -1 for an id outside [0,
// E)), rowTok[row] (the token of each sorted row), the tile map (expert,
// first row) of each BM-row tile of each expert's rows, ntiles[0], and
// status[0] = the number of ids outside [0, E). The order of rows inside
// an expert's group is not fixed, but every row's result is computed the
// same way wherever it sits, so the outputs are.
kernel void moe_route(device const int* ids [[buffer(0)]], device int* counts [[buffer(1)]],
                      device int* offsets [[buffer(2)]], device int* pos [[buffer(3)]],
                      device int* rowTok [[buffer(4)]], device int* tiles [[buffer(5)]],
                      device int* ntiles [[buffer(6)]], device int* status [[buffer(7)]],
                      constant MoeRouteParams& p [[buffer(8)]], uint tid [[thread_position_in_threadgroup]]) {
  threadgroup atomic_int hist[ROUTE_THREADS];
  threadgroup int base[ROUTE_THREADS];
  threadgroup int warpSum[2 * 32];
  threadgroup atomic_int bad;
  const int t = int(tid), lane = t & 31, warp = t >> 5;
  atomic_store_explicit(&hist[t], 0, memory_order_relaxed);
  if (t == 0) atomic_store_explicit(&bad, 0, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int n = p.T * GEMM_TOPK, E = p.E, BM = p.BM;
  for (int i = t; i < n; i += ROUTE_THREADS) {
    const int e = ids[i];
    int rank = -1;
    if (e >= 0 && e < E)
      rank = atomic_fetch_add_explicit(&hist[e], 1, memory_order_relaxed);
    else
      atomic_fetch_add_explicit(&bad, 1, memory_order_relaxed);
    pos[i] = rank;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  // Exclusive scans of the counts and of the tiles per expert.
  const int cnt = t < E ? atomic_load_explicit(&hist[t], memory_order_relaxed) : 0;
  const int nt = (cnt + BM - 1) / BM;
  int a = cnt, b = nt;
  for (ushort d = 1; d < 32; d <<= 1) {
    const int ua = simd_shuffle_up(a, d), ub = simd_shuffle_up(b, d);
    if (lane >= int(d)) a += ua, b += ub;
  }
  if (lane == 31) warpSum[warp] = a, warpSum[32 + warp] = b;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (warp == 0) {
    int wa = warpSum[lane], wb = warpSum[32 + lane];
    for (ushort d = 1; d < 32; d <<= 1) {
      const int ua = simd_shuffle_up(wa, d), ub = simd_shuffle_up(wb, d);
      if (lane >= int(d)) wa += ua, wb += ub;
    }
    warpSum[lane] = wa, warpSum[32 + lane] = wb;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const int off = a - cnt + (warp > 0 ? warpSum[warp - 1] : 0);
  const int toff = b - nt + (warp > 0 ? warpSum[32 + warp - 1] : 0);
  if (t < E) {
    counts[t] = cnt;
    offsets[t] = off;
    base[t] = off;
    for (int j = 0; j < nt; j++) tiles[2 * (toff + j)] = t, tiles[2 * (toff + j) + 1] = off + j * BM;
  }
  if (t == E - 1) offsets[E] = off + cnt, ntiles[0] = toff + nt;
  if (t == 0) status[0] = atomic_load_explicit(&bad, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = t; i < n; i += ROUTE_THREADS) {
    const int e = ids[i];
    if (e < 0 || e >= E) continue;
    const int q = base[e] + pos[i];
    pos[i] = q;
    rowTok[q] = i / GEMM_TOPK;
  }
}

// moe_combine: out[t][n] = (add ? out[t][n] : 0) + sum_k w[t,k]·Ys[pos(t,k)][n]
// in slot order, one threadgroup of COMBINE_THREADS per token. A slot
// whose expert id was outside the stack (pos -1) makes its token's row
// NaN, as the plain kernels do: a bad id is never silently left out.
kernel void moe_combine(device const float* ys [[buffer(0)]], device const int* pos [[buffer(1)]],
                        device const float* wts [[buffer(2)]], device float* out [[buffer(3)]],
                        constant MoeCombineParams& p [[buffer(4)]], uint tid [[thread_position_in_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
  const int t = int(tg);
  int q[GEMM_TOPK];
  float w[GEMM_TOPK];
  bool ok = true;
  for (int k = 0; k < GEMM_TOPK; k++) {
    q[k] = pos[t * GEMM_TOPK + k], w[k] = wts[t * GEMM_TOPK + k];
    ok = ok && q[k] >= 0;
  }
  device float* o = out + ulong(t) * ulong(p.N);
  for (int n = int(tid); n < p.N; n += COMBINE_THREADS) {
    float s = p.add != 0 ? o[n] : 0.f;
    for (int k = 0; k < GEMM_TOPK; k++) s += w[k] * ys[ulong(ok ? q[k] : 0) * ulong(p.N) + ulong(n)];
    o[n] = ok ? s : as_type<float>(0x7fc00000u);
  }
}

// moe_shared_swiglu: h[t][i] = bf16(sigmoid(logit[t]) · silu(g[t][i]) · u[t][i])
// for i < inter, n = rows·inter values, threadgroups of 256: the shared
// expert of a chunk on the GEMMs, its sigmoid gate taken in before the down
// GEMM (linear in h), which then writes the block's output for moe_combine
// to add the routed experts to. g, u float32 [rows, inter] from the dense
// GEMMs.
kernel void moe_shared_swiglu(device const float* g [[buffer(0)]], device const float* u [[buffer(1)]],
                              device const float* logit [[buffer(2)]], device ushort* h [[buffer(3)]],
                              constant SharedSwigluParams& p [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  if (int(i) >= p.n) return;
  const float gi = g[i], gate = gsigmoid(logit[int(i) / p.inter]);
  h[i] = f32_to_bf16(gate * gsilu(gi) * u[i]);
}

// gemm_mma8_check: threadgroup t (32 threads) computes D = A·B + C for the
// 8x8 row-major tiles A = a[64t..], C = c[64t..] and B the 8x8 block at
// column p.col0 of the 8x16 row-major tile b[128t..] (its transpose where
// p.transpose), staged in threadgroup memory. d[128t..] gets D row-major
// (stored to threadgroup memory, then copied), then D transposed (stored
// to device memory directly).
kernel void gemm_mma8_check(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                            device const float* c [[buffer(2)]], device float* d [[buffer(3)]],
                            constant MmaCheckParams& p [[buffer(4)]], uint lane [[thread_index_in_simdgroup]],
                            uint tile [[threadgroup_position_in_grid]]) {
  threadgroup float tb[128];
  threadgroup float td[64];
  for (uint i = lane; i < 128; i += 32) tb[i] = b[tile * 128 + i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 ma, mb, mc;
  simdgroup_float8x8 md = make_filled_simdgroup_matrix<float, 8, 8>(0.f);
  simdgroup_load(ma, a + tile * 64);
  ulong2 origin;
  origin.x = ulong(p.col0);
  origin.y = 0;
  simdgroup_load(mb, tb, 16, origin, p.transpose != 0);
  simdgroup_load(mc, c + tile * 64, 8);
  simdgroup_multiply_accumulate(md, ma, mb, mc);
  simdgroup_store(md, td, 8);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = lane; i < 64; i += 32) d[tile * 128 + i] = td[i];
  simdgroup_store(md, d + tile * 128 + 64, 8, 0, true);
}
