// gemm.cu: 4-bit weight GEMMs on the tensor cores for prefill, and the
// device-side grouping of the MoE's (token, expert) pairs.
//
//   gemm_dense_<tile>:  Y[M,N] = X[M,K]·W[N,K]^T, X bf16 row-major, Y float32.
//   gemm_gateup_<tile>: per expert group, H[r,:] = silu(X[tok(r)]·Wg_e^T) *
//                       (X[tok(r)]·Wu_e^T), H bf16 (it feeds the down GEMM).
//   gemm_down_<tile>:   per expert group, Ys[r,:] = H[r]·Wd_e^T, float32.
//   moe_route:          histogram of the top-k expert ids, prefix scan,
//                       scatter into per-expert row lists, tile map.
//   moe_combine:        out[t] (+)= sum over k of w[t,k]·Ys[pos(t,k)].
//   gemm_to_bf16:       float32 -> bf16 (round to nearest even).
//   moe_shared_swiglu:  the shared expert's gated SwiGLU, bf16 for its down GEMM.
//
// W is MLX affine 4-bit in groups of 64 (spec 3.2; engine/quant): row n's
// group g is 8 little-endian u32 words (element 8i+j in bits 4j..4j+3 of
// word i) and one u32 of (bf16 scale | bf16 bias << 16), the interleaved
// scale/bias array made at upload. A k-tile is one group (BK = 64): its
// codes (32 bytes a row) and scale/bias words are copied to shared memory
// by cp.async, STAGES deep; each k-tile's codes are dequantised once per
// block into a bf16 tile in shared memory (w = fma(q, s, b) rounded once to
// bf16; q is exact), which the warps read with ldmatrix like the X tile.
// The weights are never expanded in device memory. mma.sync m16n8k16 bf16
// with float32 accumulation.
//
// Shared tiles are 128-byte rows of eight 16-byte chunks, chunk c of row r
// stored at c ^ (r & 7), so that ldmatrix and the cp.async writes hit
// distinct banks.
#include "rowmath.h"  // device.h, and conv4_silu for gemm_conv.cu's epilogue

#if defined(__NVCC__)
#define G_BID_Y() blockIdx.y
#define G_BID_Z() blockIdx.z
#define G_NBID_Z() gridDim.z
static __device__ __forceinline__ int g_shfl_up(int v, int d) { return __shfl_up_sync(0xffffffffu, v, d); }
#else
#define G_BID_Y() __nvvm_read_ptx_sreg_ctaid_y()
#define G_BID_Z() __nvvm_read_ptx_sreg_ctaid_z()
#define G_NBID_Z() __nvvm_read_ptx_sreg_nctaid_z()
static __device__ __forceinline__ int g_shfl_up(int v, int d) { return __nvvm_shfl_sync_up_i32(0xffffffffu, v, d, 0); }
#endif

struct __attribute__((aligned(8))) float2v {
  float x, y;
};

#define GEMM_TOPK 8
#define ROUTE_THREADS 1024
#define COMBINE_THREADS 256

static __device__ __forceinline__ void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
static __device__ __forceinline__ void mma_bf16(float* c, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ u32 bf16x2_fma(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
static __device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
  u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
// pack_bf16x2 rounds (lo, hi) to bf16, nearest even.
static __device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
// bf16_bits is x rounded to bf16, nearest even.
static __device__ __forceinline__ u16 bf16_bits(float x) { return (u16)(pack_bf16x2(x, 0.f) & 0xFFFFu); }
static __device__ __forceinline__ void st_shared_v4(u32 addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
static __device__ __forceinline__ float gexp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}

// store_swiglu writes silu(g)·u of two adjacent outputs, rounded to bf16,
// at h[n], h[n+1]: the gate/up GEMMs' epilogue.
static __device__ __forceinline__ void store_swiglu(u16* h, int n, float g0, float g1, float u0, float u1) {
  const float h0 = g0 / (1.f + gexp(-g0)) * u0, h1 = g1 / (1.f + gexp(-g1)) * u1;
  *(u32*)(h + n) = pack_bf16x2(h0, h1);
}

// dequant_pairs turns one code word and its group's scale and bias (s2, b2:
// each in both halves) into the bf16x2 pairs (e_j, e_j+4), j = 0..3, each
// s*q + b rounded once.
static __device__ __forceinline__ void dequant_pairs(u32 w, u32 s2, u32 b2, u32* p) {
  const u32 magic = 0x43004300u;  // bf16 128.0: 128+q for a 4-bit q is exact
  const u32 one = 0x3F803F80u, m128 = 0xC300C300u;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    u32 x = ((w >> (4 * j)) & 0x000F000Fu) | magic;  // (128+q_j, 128+q_{j+4})
    u32 q = bf16x2_fma(x, one, m128);                 // (q_j, q_{j+4}), exact
    p[j] = bf16x2_fma(q, s2, b2);                     // s*q + b, one rounding
  }
}

// dequant8 turns one code word (8 elements) and its group's scale/bias word
// into 8 bf16 weights in element order, as four bf16x2 words.
static __device__ __forceinline__ void dequant8(u32 w, u32 sb, u32* out) {
  u32 p[4];
  dequant_pairs(w, prmt(sb, sb, 0x1010u), prmt(sb, sb, 0x3232u), p);
  out[0] = prmt(p[0], p[1], 0x5410u);  // (w0, w1)
  out[1] = prmt(p[2], p[3], 0x5410u);  // (w2, w3)
  out[2] = prmt(p[0], p[1], 0x7632u);  // (w4, w5)
  out[3] = prmt(p[2], p[3], 0x7632u);  // (w6, w7)
}

#include "wgmma.h"

// dequant_pair2 is the bf16 pair (s·q_j + b, s·q_{j+1} + b) of code word w's
// elements j = 2c and 2c+1 (nibbles 2c, 2c+1: bits 8c .. 8c+7), each
// rounded once, as dequant_pairs computes them. sel = (c, c, 4+c, 4+c), a
// prmt selector, puts w's byte c in the low half and (w >> 4)'s in the high
// one, so that one mask leaves q_2c and q_2c+1 at bits 0 and 16: three
// integer operations a pair (a shift and mask each way took four).
static __device__ __forceinline__ u32 dequant_pair2(u32 w, u32 sel, u32 s2, u32 b2) {
  const u32 x = (prmt(w, w >> 4, sel) & 0x000F000Fu) | 0x43004300u;  // (128+q_2c, 128+q_2c+1)
  return bf16x2_fma(bf16x2_fma(x, 0x3F803F80u, 0xC300C300u), s2, b2);
}

// U32x2 is two code words read as one 8-byte access.
struct __attribute__((aligned(8))) U32x2 {
  u32 x, y;
};

// GEMM_RA_LATE_LOAD: the register-A tiles of the heights it names queue a
// k-tile's copies after its first products instead of right after the
// barrier; a bit set, 1 the 64-row tiles, 2 the 128-row, 4 the 256-row, 8
// the 144- and 160-row. 4 in the built families: on an H100 the 256-row
// tile took 9-13 % less time with it at 4096 rows, prefill at 4K and 16K
// 1.5-1.9 % faster; the 160-row tile was slower (an 8-byte spill), the
// 64-row slower at 4096 rows, the 128-row 3-4 % faster but not yet
// measured alone end to end (docs/bench/cuda, fw2 and fw3).
#ifndef GEMM_RA_LATE_LOAD
#define GEMM_RA_LATE_LOAD 4
#endif

// GEMM_RA_STAGED_OUT: the register-A tiles' bf16 outputs (gate/up's
// SwiGLU, the down GEMM's bf16 expert outputs) written through shared
// memory: each warp's accumulators stored transposed with stmatrix into a
// padded [X row][output] tile in the stages' memory, then copied out in
// 16-byte stores, a block's row of outputs contiguous. Otherwise each
// output is its own 2-byte store with its own 64-bit address: in
// gemm_downbf_w160rw's machine code 80 stores and about 710 instructions a
// thread, against about 1,760 for the down GEMM's eight k-tiles. The same
// values, the same roundings: the same bits. On an H100 the down GEMM with
// bf16 outputs at 4096 tokens took 189.7 µs against 227.1, gate/up 353.7
// against 366.0; prefill at 4K 0.3-2.1 % faster in five alternating
// rounds, at 16K -0.04 to +1.8 % (docs/bench/cuda, stout1 and stout2).
// GEMM_RA_STAGED_OUT = 2 (the built families') stages the float32 outputs
// too (the dense GEMMs', the float32 down GEMM's): each value one 4-byte
// shared store, then 16-byte global stores. On an H100 at 4096 rows the
// dense 256-row tile took 1.8-2.5 % less time than with 1 (q_proj 281.2
// against 288.3 µs, in_proj_z 137.0 against 139.5, o_proj 123.5 against
// 126.4), the same at 512 rows; prefill at 4K and 16K within the rounds'
// noise (docs/bench/cuda/2026-12-07-next26, run-epi1.sh). The same bits.
// (Stores through two pointers stepped 8 rows a j, GEMM_RA_LEAN_OUT,
// measured between the two, 1.1-1.8 %, and went.)
#ifndef GEMM_RA_STAGED_OUT
#define GEMM_RA_STAGED_OUT 2
#endif

// GEMM_RA_CODES_L2: the register-A tiles of the MoE (gate/up, down) ask
// L2 for all of their weight rows' code words and scale/bias words at the
// block's start (a 128-row tile of K = 2048: 1,152 lines of 128 bytes,
// four or five a thread), so that each k-tile's copies of them find L2
// rather than device memory. An expert's weights are read by one tile of
// X rows at 4096 tokens (dense weights by 16), so every k-tile's codes
// come from device memory two k-tiles ahead (WG = 4's copies). 0 in the
// built families; a measurement build sets 1 (variant-pack.sh).
#define GEMM_RA_CODES_L2 0

// stsm_x4_trans and stsm_x2_trans store four or two 8x8 bf16 matrices of
// mma accumulator fragments (lane g·4 + c: row g, columns 2c, 2c+1, the low
// half the lower column) transposed: row i of matrix m at the address lane
// 8m + i gives, so that it holds column i of the fragment's matrix.
static __device__ __forceinline__ void stsm_x4_trans(u32 addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b),
               "r"(c), "r"(d)
               : "memory");
}
static __device__ __forceinline__ void stsm_x2_trans(u32 addr, u32 a, u32 b) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(a), "r"(b) : "memory");
}
static __device__ __forceinline__ void ld_shared_v4(u32 addr, u32* v) {
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(addr));
}
// g_cmin is the smaller of a and b, at compile time where they are.
static constexpr int g_cmin(int a, int b) { return a < b ? a : b; }
static __device__ __forceinline__ void st_shared_f32(u32 addr, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
static __device__ __forceinline__ void st_global_v4(void* p, const u32* v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
               : "memory");
}

// Branched and Predicated name gemm_tile's two forms of a k-tile's copies
// past the last k-tile: branched around, or each predicated (load, below).
struct Branched {
  static constexpr bool predicated = false;
};
struct Predicated {
  static constexpr bool predicated = true;
};

#define MODE_DENSE 0
#define MODE_GATEUP 1
#define MODE_DOWN 2
// MODE_DOWN_BF: the down GEMM with its expert outputs rounded to bf16
// (gemm_downbf.cu, moeys=bf16): half the bytes written and read back by
// moe_combine_bf; the register-A tiles only
#define MODE_DOWN_BF 3

// store_item writes the outputs of an item of gemm_rq or gemm_stream from
// a warp's mma fragments and clears them: acc[mt][j] element i is row r0 +
// 16mt + g (+8 for i >= 2, rows from rend on dropped), column n0 + 8j + 2c
// + (i & 1) of Y [rows][N]; gate/up, tiles j and j + NT/2 are the gate and
// the up rows of the same outputs, stored as bf16 SwiGLU.
template <int MODE, int MT, int NT>
static __device__ __forceinline__ void store_item(void* __restrict__ Y, int N, float (&acc)[MT][NT][4], int r0,
                                                  int rend, int n0, int g, int c) {
  constexpr int HALF = NT / 2;
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int r = r0 + 16 * mt + g + 8 * half;
      if (r < rend) {
        if (MODE == MODE_GATEUP) {
          u16* h = (u16*)Y + (long long)r * N;
#pragma unroll
          for (int j = 0; j < HALF; j++) {
            const int n = n0 + j * 8 + 2 * c;
            if (n >= N) continue;
            store_swiglu(h, n, acc[mt][j][2 * half], acc[mt][j][2 * half + 1], acc[mt][j + HALF][2 * half],
                         acc[mt][j + HALF][2 * half + 1]);
          }
        } else {
          float* y = (float*)Y + (long long)r * N;
#pragma unroll
          for (int j = 0; j < NT; j++) {
            const int n = n0 + j * 8 + 2 * c;
            if (n >= N) continue;
            float2v v = {acc[mt][j][2 * half], acc[mt][j][2 * half + 1]};
            *(float2v*)(y + n) = v;
          }
        }
      }
#pragma unroll
      for (int j = 0; j < NT; j++) acc[mt][j][2 * half] = acc[mt][j][2 * half + 1] = 0.f;
    }
}

// Shared bytes: STAGES x (X tile, codes, scale/bias) and the bf16 W tile.
#define GEMM_SHARED(BM, BN, S) ((S) * ((BM) * 128 + (BN) * 36) + (BN) * 128)

// gemm_tile is one block's BM x BN output tile. Dense: rows m0.. of X and Y,
// rows n0.. of W. Grouped (gate/up, down): the tile map entry blockIdx.y
// gives the expert e and its first sorted row r0; rows run to offsets[e+1];
// W rows are e*N + n (gate/up: N is the expert's inter size, and the block's
// BN tile rows alternate 8 gate rows and the 8 up rows of the same outputs).
// Dense with a grid of Z > 1 (split-K): block z sums k-tiles [z·KT/Z,
// (z+1)·KT/Z) only and writes them to Y + z·M·N, partials that
// gemm_sum_splits adds in z order.
// GemmConv is gemm_conv.cu's epilogue (convgemm=on): where on (the
// block's matrix is a Gated DeltaNet's qkv), the dense tile's outputs go
// through the causal conv of width 4 and SiLU (taps w [N][4]) into out
// [M][N], as conv_silu computes them, for every row of the tile but its
// first three (conv_fix's, in gemm_conv.cu), and Y gets only the rows that
// conv_fix and the conv state read (each tile's first three and last
// three).
struct GemmConv {
  const float* w;
  float* out;
  bool on;
};

template <int BM, int BN, int WM, int WN, int S, int MODE, int WG = 0, bool CONV = false>
static __device__ __forceinline__ void gemm_tile(const u16* __restrict__ X, const int* __restrict__ rowTok,
                                                 const u32* __restrict__ W, const u32* __restrict__ SB,
                                                 const u32* __restrict__ W2, const u32* __restrict__ SB2,
                                                 void* __restrict__ Y, int M, int N, int K,
                                                 const int* __restrict__ tiles, const int* __restrict__ offsets,
                                                 const int* __restrict__ ntiles, int bx, GemmConv conv = GemmConv{}) {
  constexpr int NTHREADS = WM * WN * 32;
  constexpr int TM = BM / WM, TN = BN / WN, MT = TM / 16, NT = TN / 8;
  static_assert(MT >= 1 && NT >= 2 && NT % 2 == 0, "warp tile");
  // WG (wgmma: 2, k-tile kt+1 dequantised into a second W tile while kt's
  // run; 3, the weights as A from registers): stages 1024-byte aligned, the
  // swizzle's period
  constexpr int A_BYTES = BM * 128, C_BYTES = BN * 32, STAGE = WG ? (A_BYTES + BN * 36 + 1023) / 1024 * 1024 : A_BYTES + BN * 36;
  // WG: NWG warpgroups, each WS of the tile's 64-row slabs
  // WG = 3: the weights as wgmma's A operand from registers (Yᵀ = W·Xᵀ),
  // each warpgroup 64 weight rows of the tile against all BM = 128 of its
  // X rows, which are B; no W tile in shared memory
  // WG = 4: WG = 3 with the k-tiles not drained: the copies run S - 2
  // k-tiles ahead (not S - 1), so that the stage they overwrite is one
  // whose products every warpgroup has waited for in the k-tile before,
  // and a k-tile's last products still run while the next k-tile starts.
  constexpr bool RA = WG == 3 || WG == 4;
  static_assert(MODE != MODE_DOWN_BF || RA, "bf16 expert outputs: the register-A tiles only");
  constexpr int PD = WG == 4 ? S - 2 : S - 1;  // k-tiles the copies run ahead
  static_assert(PD >= 1, "WG = 4 wants at least three stages");
  constexpr int NWG = NTHREADS / 128, WS = RA ? 1 : WG ? BM / 64 / NWG : 1;
  static_assert(WG != 1, "WG = 1 (each k-tile's products waited for, w128) was measured slower than 2 and removed");
  static_assert(!WG || RA || (NTHREADS % 128 == 0 && BM % (64 * NWG) == 0 && BN == 128), "wgmma: whole warpgroups, 64-row slabs, 128 weight rows");
  static_assert(!RA || (NTHREADS == 2 * BN && (BN == 128 || BN == 256) &&
                         (BM == 16 || BM == 32 || BM == 64 || BM == 80 || BM == 96 || BM == 112 || BM == 128 || BM == 144 ||
                          BM == 160 || BM == 256)),
                "register-A wgmma: a warpgroup each 64 weight rows, 128 or 256 a tile, 16 to 256 X rows");
  extern __shared__ __attribute__((aligned(128))) unsigned char gsm[];
  const u32 sbase = smem_u32(gsm);
  // the descriptors assume the swizzle's alignment (the dynamic shared
  // memory's base: this kernel has no static shared memory)
  if (WG && (sbase & 1023)) __builtin_trap();
  const u32 bsm = sbase + S * STAGE;  // dequantised W tile

  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;

  // Rows of this tile.
  int r0, rend;
  long long wbase = 0;  // first W row of the expert
  if (MODE == MODE_DENSE) {
    r0 = G_BID_Y() * BM;
    rend = M;
  } else {
    const int t = G_BID_Y();
    if (t >= ntiles[0]) return;
    const int e = tiles[2 * t];
    r0 = tiles[2 * t + 1];
    rend = offsets[e + 1];
    wbase = (long long)e * N;
  }
  const int n0 = MODE == MODE_GATEUP ? bx * (BN / 2) : bx * BN;
  int kt0 = 0, kt1 = K / 64;
  if (MODE == MODE_DENSE) {
    const int z = G_BID_Z(), splits = G_NBID_Z();
    kt0 = z * (K / 64) / splits, kt1 = (z + 1) * (K / 64) / splits;
    Y = (float*)Y + (long long)z * M * N;
  }
  const long long wpr = K / 8, gpr = K / 64;

  // The source of each thread's cp.async copies, fixed over k.
  constexpr int A_PER = (BM * 8 + NTHREADS - 1) / NTHREADS;
  constexpr int C_PER = (BN * 2 + NTHREADS - 1) / NTHREADS;
  constexpr int S_PER = (BN + NTHREADS - 1) / NTHREADS;
  const u16* asrc[A_PER];
  bool aval[A_PER];
  u32 adst[A_PER];
#pragma unroll
  for (int j = 0; j < A_PER; j++) {
    const int i = tid + j * NTHREADS, row = i >> 3, ch = i & 7;
    const int r = r0 + row;
    aval[j] = i < BM * 8 && r < rend;
    long long src = 0;
    if (aval[j]) src = MODE == MODE_GATEUP ? rowTok[r] : r;
    asrc[j] = X + src * K + ch * 8;
    adst[j] = (u32)(row * 128 + ((ch ^ (row & 7)) << 4));
  }
  const u32* csrc[C_PER];
  bool cval[C_PER];
#pragma unroll
  for (int j = 0; j < C_PER; j++) {
    const int i = tid + j * NTHREADS, row = i >> 1, h = i & 1;
    int n;
    const u32* base = W;
    if (MODE == MODE_GATEUP) {
      const int t = row >> 3;
      n = n0 + (t >> 1) * 8 + (row & 7);
      base = (t & 1) ? W2 : W;
    } else {
      n = n0 + row;
    }
    cval[j] = i < BN * 2 && n < N;
    csrc[j] = base + (cval[j] ? (wbase + n) * wpr : 0) + h * 4;
  }
  const u32* ssrc[S_PER];
  bool sval[S_PER];
#pragma unroll
  for (int j = 0; j < S_PER; j++) {
    const int row = tid + j * NTHREADS;
    int n;
    const u32* base = SB;
    if (MODE == MODE_GATEUP) {
      const int t = row >> 3;
      n = n0 + (t >> 1) * 8 + (row & 7);
      base = (t & 1) ? SB2 : SB;
    } else {
      n = n0 + row;
    }
    sval[j] = row < BN && n < N;
    ssrc[j] = base + (sval[j] ? (wbase + n) * gpr : 0);
  }

  // load queues the copies of k-tile kt0 + kt into stage kt % S, none past
  // the last k-tile: branched around, or under Predicated (the register-A
  // tiles' late copies, GEMM_RA_LATE_LOAD, queued between their first
  // products and the wait for them) each copy predicated in its
  // instruction, because a branch between a wgmma and its wait makes ptxas
  // serialise the wgmma (C7513).
  auto load = [&](int kt, auto form) __attribute__((always_inline)) {
    constexpr bool PRED = decltype(form)::predicated;
    const bool live = kt0 + kt < kt1;
    if (PRED || live) {
      const u32 st = sbase + (kt % S) * STAGE;
      auto copy16 = [&](u32 dst, const void* src, bool mine, bool valid) __attribute__((always_inline)) {
        if constexpr (PRED)
          cp_async16_if(dst, src, live && mine, valid);
        else if (mine)
          cp_async16(dst, src, valid);
      };
#pragma unroll
      for (int j = 0; j < A_PER; j++) copy16(st + adst[j], asrc[j] + (kt0 + kt) * 64, tid + j * NTHREADS < BM * 8, aval[j]);
#pragma unroll
      for (int j = 0; j < C_PER; j++) {
        const int i = tid + j * NTHREADS;
        copy16(st + A_BYTES + i * 16, csrc[j] + (kt0 + kt) * 8, i < BN * 2, cval[j]);
      }
#pragma unroll
      for (int j = 0; j < S_PER; j++) {
        const int row = tid + j * NTHREADS;
        const u32 dst = st + A_BYTES + C_BYTES + row * 4;
        if constexpr (PRED)
          cp_async4_if(dst, ssrc[j] + kt0 + kt, live && row < BN, sval[j]);
        else if (row < BN)
          cp_async4(dst, ssrc[j] + kt0 + kt, sval[j]);
      }
    }
    cp_commit();
  };

  constexpr int AM = WG ? 1 : MT, AN = WG ? 1 : NT;  // mma.sync's accumulators (one unused tile under WG)
  float acc[AM][AN][4];
#pragma unroll
  for (int i = 0; i < AM; i++)
#pragma unroll
    for (int j = 0; j < AN; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) acc[i][j][k] = 0.f;
  // WG: the accumulators of this warpgroup's slab m (the tile's wgs + m);
  // WG = 3, of its 64 weight rows against the BM X rows
  constexpr int WACC = RA ? BM / 2 : 64;
  float wacc[WS][WACC];
  const int wgs = (warp >> 2) * WS;
#pragma unroll
  for (int m = 0; m < WS; m++)
#pragma unroll
    for (int i = 0; i < WACC; i++) wacc[m][i] = 0.f;

  // dequant_tile writes this thread's share of k-tile kt's weights (its
  // stage's codes and scale/bias words) into the bf16 W tile at wt.
  auto dequant_tile = [&](int kt, u32 wt) __attribute__((always_inline)) {
    const unsigned char* codes = gsm + (kt % S) * STAGE + A_BYTES;
    const u32* cw = (const u32*)codes;
    const u32* sbw = (const u32*)(codes + C_BYTES);
#pragma unroll
    for (int j = 0; j < BN * 8 / NTHREADS; j++) {
      const int i = tid + j * NTHREADS, row = i >> 3, wi = i & 7;
      u32 o[4];
      dequant8(cw[i], sbw[row], o);
      st_shared_v4(wt + row * 128 + ((wi ^ (row & 7)) << 4), o[0], o[1], o[2], o[3]);
    }
  };

  if constexpr (GEMM_RA_CODES_L2 && RA && MODE != MODE_DENSE) {
    // every code line of the tile's rows for k-tiles kt0 .. kt1 (a k-tile:
    // 32 bytes a row), then each row's scale/bias words
    const int lpr = ((kt1 - kt0) * 32 + 127) / 128;  // lines a row
    for (int i = tid; i < BN * (lpr + 1); i += NTHREADS) {
      const int row = i % BN, line = i / BN;
      int n;
      const u32 *base = W, *sbase_ = SB;
      if (MODE == MODE_GATEUP) {
        const int t = row >> 3;
        n = n0 + (t >> 1) * 8 + (row & 7);
        base = (t & 1) ? W2 : W;
        sbase_ = (t & 1) ? SB2 : SB;
      } else {
        n = n0 + row;
      }
      if (n >= N) continue;
      if (line < lpr)
        prefetch_l2(base + (wbase + n) * wpr + kt0 * 8 + line * 32);
      else
        prefetch_l2(sbase_ + (wbase + n) * gpr + kt0);
    }
  }
#pragma unroll
  for (int kt = 0; kt < PD; kt++) load(kt, Branched{});

  if constexpr (RA) {
    // Per k-tile: its copies landed and every warpgroup done with the
    // stage the next copies overwrite (the products waited for at the end
    // of the k-tile before), then per k-step this thread's fragment of
    // its warpgroup's 64 weight rows dequantised from the staged codes
    // into registers while the k-step before multiplies.
    const int g = lane >> 2, c = lane & 3;
    const int wrow = 64 * (warp >> 2) + 16 * (warp & 3) + g;  // this thread's weight rows: wrow, wrow + 8
    const u32 sel = (u32)c * 0x1111u + 0x4400u;               // dequant_pair2's selector of byte c
    // AHEAD: the code words of k-step ks+1 read before k-step ks's wait,
    // so their latency is not on the path to the next product; not w160rp,
    // whose 80 accumulators leave no room at the 128 registers of two
    // blocks a multiprocessor (ptxas 13.0 spilled 20 bytes).
    // (Four fragment sets in the 256-row tiles with a wait for the products
    // two k-steps back were within 1 % of this: docs/bench/cuda, deq2.)
    constexpr bool AHEAD = BM != 160;
    // LATE: GEMM_RA_LATE_LOAD's heights, of those where ptxas 12.4 keeps
    // the wgmma pipelined with it (not w32r and w80rp: C7513)
    constexpr int LATE_BIT = BM == 64 ? 1 : BM == 128 ? 2 : BM == 256 ? 4 : BM == 144 || BM == 160 ? 8 : 0;
    constexpr bool LATE = WG == 4 && (GEMM_RA_LATE_LOAD & LATE_BIT) != 0;
    u32 a[2][4];  // the k-steps' fragments, alternately (WG = 4: across k-tiles too)
    for (int kt = 0; kt < kt1 - kt0; kt++) {
      cp_wait<PD - 1>();
      fence_proxy_async();  // this thread's copies of the X tile to the async proxy, before the barrier
      __syncthreads();
      if constexpr (!LATE) load(kt + PD, Branched{});
      const u32 st = sbase + (kt % S) * STAGE;
      const u32* cw = (const u32*)(gsm + (kt % S) * STAGE + A_BYTES);
      const u32* sbw = (const u32*)(gsm + (kt % S) * STAGE + A_BYTES + C_BYTES);
      const u32 sb0 = sbw[wrow], sb1 = sbw[wrow + 8];
      const u32 s0 = prmt(sb0, sb0, 0x1010u), b0 = prmt(sb0, sb0, 0x3232u);
      const u32 s1 = prmt(sb1, sb1, 0x1010u), b1 = prmt(sb1, sb1, 0x3232u);
      // the two rows' code words of a k-step (8 bytes each)
      U32x2 q0, q1;
      if constexpr (AHEAD) q0 = *(const U32x2*)(cw + wrow * 8), q1 = *(const U32x2*)(cw + (wrow + 8) * 8);
#pragma unroll
      for (int ks = 0; ks < 4; ks++) {
        u32* f = a[ks & 1];
        if constexpr (!AHEAD) q0 = *(const U32x2*)(cw + wrow * 8 + 2 * ks), q1 = *(const U32x2*)(cw + (wrow + 8) * 8 + 2 * ks);
        f[0] = dequant_pair2(q0.x, sel, s0, b0);
        f[1] = dequant_pair2(q1.x, sel, s1, b1);
        f[2] = dequant_pair2(q0.y, sel, s0, b0);
        f[3] = dequant_pair2(q1.y, sel, s1, b1);
        if (AHEAD && ks < 3) {
          q0 = *(const U32x2*)(cw + wrow * 8 + 2 * (ks + 1));
          q1 = *(const U32x2*)(cw + (wrow + 8) * 8 + 2 * (ks + 1));
        }
        wg_fence();
        if constexpr (BM == 256)
          wg_mma_n256_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 160)
          wg_mma_n160_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 144)
          wg_mma_n144_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 128)
          wg_mma_n128_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 112)
          wg_mma_n112_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 96)
          wg_mma_n96_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 80)
          wg_mma_n80_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 64)
          wg_mma_n64_ra(wacc[0], f, wg_desc(st + ks * 32));
        else if constexpr (BM == 32)
          wg_mma_n32_ra(wacc[0], f, wg_desc(st + ks * 32));
        else
          wg_mma_n16_ra(wacc[0], f, wg_desc(st + ks * 32));
        wg_commit();
        // GEMM_RA_LATE_LOAD: the next copies queued once this k-tile's
        // first products are, so that the tensor cores get work sooner
        // after the barrier (branch-free: deq2's form, with branches, was
        // serialised by ptxas and measured so)
        if (LATE && ks == 0) load(kt + PD, Predicated{});
        wg_wait1();  // k-step ks-1's products: its fragment registers are rewritten next
        wg_keep4(a[(ks + 1) & 1]);
      }
      if constexpr (WG == 3) {
        wg_wait0();  // the stage is the next k-tile's copies' after the barrier
        wg_keep4(a[0]);
        wg_keep4(a[1]);
        wg_keep<WACC>(wacc[0]);
      }
    }
    if constexpr (WG == 4) {
      wg_wait0();
      wg_keep4(a[0]);
      wg_keep4(a[1]);
      wg_keep<WACC>(wacc[0]);
    }
  } else if constexpr (WG == 2) {
    // Two W tiles: k-tile kt is dequantised into one while k-tile kt-1's
    // wgmma, issued and not waited for, read the other; then the wait for
    // them, a barrier, and kt's copies' stage reused, kt's wgmma issued.
    for (int kt = 0; kt < kt1 - kt0; kt++) {
      cp_wait<S - 2>();
      __syncthreads();  // k-tile kt's copies visible to every thread
      const u32 st = sbase + (kt % S) * STAGE, wt = bsm + (kt & 1) * BN * 128;
      dequant_tile(kt, wt);
      fence_proxy_async();
      wg_wait0();  // k-tile kt-1's products: its stage is the next load's
#pragma unroll
      for (int m = 0; m < WS; m++) wg_keep(wacc[m]);
      __syncthreads();
      load(kt + S - 1, Branched{});
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ks++)
#pragma unroll
        for (int m = 0; m < WS; m++) wg_mma_n128(wacc[m], wg_desc(st + (wgs + m) * 64 * 128 + ks * 32), wg_desc(wt + ks * 32));
      wg_commit();
    }
    wg_wait0();
#pragma unroll
    for (int m = 0; m < WS; m++) wg_keep(wacc[m]);
  } else
  for (int kt = 0; kt < kt1 - kt0; kt++) {
    cp_wait<S - 2>();
    // Every thread's copies of tile kt have landed, and every warp is done
    // with tile kt-1 (its stage and the W tile are free).
    __syncthreads();
    load(kt + S - 1, Branched{});
    const u32 st = sbase + (kt % S) * STAGE;
    dequant_tile(kt, bsm);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
      u32 a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++) {
        const int row = wm * TM + mt * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
        ldsm_x4(st + row * 128 + ((ch ^ (row & 7)) << 4), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
      }
#pragma unroll
      for (int np = 0; np < NT / 2; np++) {
        const int row = wn * TN + np * 16 + (lane & 7) + ((lane >> 4) << 3), ch = ks * 2 + ((lane >> 3) & 1);
        u32 b0, b1, b2, b3;
        ldsm_x4(bsm + row * 128 + ((ch ^ (row & 7)) << 4), b0, b1, b2, b3);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
          mma_bf16(acc[mt][2 * np], a[mt], b0, b1);
          mma_bf16(acc[mt][2 * np + 1], a[mt], b2, b3);
        }
      }
    }
  }
  cp_wait<0>();
  const int g = lane >> 2, c = lane & 3;
  constexpr bool STAGED_OUT = GEMM_RA_STAGED_OUT && RA && (MODE == MODE_GATEUP || MODE == MODE_DOWN_BF);
  constexpr bool STAGED_F32 = GEMM_RA_STAGED_OUT >= 2 && RA && (MODE == MODE_DENSE || MODE == MODE_DOWN);
  if constexpr (STAGED_F32) {
    // GEMM_RA_STAGED_OUT = 2: the float32 outputs as [RB X rows][BN] at
    // the stages' start, rows PITCH bytes apart (4 words more than a row:
    // a store's lanes, rows 2c + e and columns g, in 32 distinct banks),
    // then copied out in 16-byte stores along the rows; RB rows a pass, as
    // many as the stages hold (all BM but in w256r's three stages)
    constexpr int PITCH = BN * 4 + 16, RB = g_cmin(BM, S * STAGE / PITCH / 8 * 8), CH = BN / 4;
    static_assert(RB >= 8, "the staged outputs fit the stages");
    const u32 wcol = (u32)(64 * (warp >> 2) + 16 * (warp & 3) + g) * 4;
#pragma unroll
    for (int p0 = 0; p0 < BM; p0 += RB) {
      __syncthreads();  // the products (first pass) or the last pass's copies done with the stages
#pragma unroll
      for (int j = p0 / 8; j < g_cmin(BM, p0 + RB) / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const u32 at = sbase + (u32)(8 * j - p0 + 2 * c + e) * PITCH + wcol;
          st_shared_f32(at, wacc[0][4 * j + e]);
          st_shared_f32(at + 32, wacc[0][4 * j + 2 + e]);
        }
      __syncthreads();
      static_assert(!CONV || (RB == BM && MODE == MODE_DENSE), "the conv epilogue: a dense tile's rows staged at once");
#pragma unroll
      for (int k = 0; k < (RB * CH + NTHREADS - 1) / NTHREADS; k++) {
        const int i = tid + k * NTHREADS, row = i / CH, ch = i % CH, r = r0 + p0 + row, n = n0 + 4 * ch;
        if (i < g_cmin(RB, BM - p0) * CH && r < rend && n < N) {
          u32 v[4];
          ld_shared_v4(sbase + (u32)row * PITCH + ch * 16, v);
          if constexpr (CONV) {
            if (conv.on) {
              // the conv of the tile's rows from its fourth on, from the
              // three rows before each here; the raw rows conv_fix and the
              // conv state read
              if (row < 3 || row >= BM - 3 || r >= rend - 3) st_global_v4((float*)Y + (long long)r * N + n, v);
              if (row >= 3) {
                u32 p[3][4];
#pragma unroll
                for (int j = 0; j < 3; j++) ld_shared_v4(sbase + (u32)(row - 3 + j) * PITCH + ch * 16, p[j]);
                u32 o[4];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                  const float4v wq = *(const float4v*)(conv.w + 4LL * (n + q));
                  o[q] = __float_as_uint(conv4_silu(wq.x, wq.y, wq.z, wq.w, __uint_as_float(p[0][q]),
                                                    __uint_as_float(p[1][q]), __uint_as_float(p[2][q]),
                                                    __uint_as_float(v[q])));
                }
                st_global_v4(conv.out + (long long)r * N + n, o);
              }
              continue;
            }
          }
          st_global_v4((float*)Y + (long long)r * N + n, v);
        }
      }
    }
  } else if constexpr (STAGED_OUT) {
    // The tile's outputs as bf16 [BM X rows][OUT outputs] at the stages'
    // start, rows PITCH bytes apart (16 more than a row: a matrix's eight
    // rows in distinct banks); gate/up has BN / 2 outputs a tile (weight
    // rows g and g+8 of a warp are one output's gate and up), down BN.
    constexpr int OUT = MODE == MODE_GATEUP ? BN / 2 : BN, PITCH = OUT * 2 + 16;
    static_assert(BM * PITCH <= S * STAGE, "the staged outputs fit the stages");
    static_assert(BM % 16 == 0, "stmatrix: X rows in pairs of 8-row matrices");
    __syncthreads();  // every warpgroup's products done reading the stages
    const int mat = lane >> 3, q = lane & 7;
    if constexpr (MODE == MODE_GATEUP) {
      // j's 8 x 8 matrix: the warp's eight outputs 32·(warp / 4) +
      // 8·(warp % 4) + g of the tile's BN / 2 by X rows 8j ..
      const u32 col = (u32)(32 * (warp >> 2) + 8 * (warp & 3)) * 2;
      auto swiglu = [&](int j) __attribute__((always_inline)) {
        float h[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const float gt = wacc[0][4 * j + e], up = wacc[0][4 * j + 2 + e];
          h[e] = gt / (1.f + gexp(-gt)) * up;
        }
        return pack_bf16x2(h[0], h[1]);
      };
      // two matrices a store: four at once (x4) spilled at 128 registers
#pragma unroll
      for (int j = 0; j < BM / 8; j += 2)
        stsm_x2_trans(sbase + (u32)(8 * (j + (mat & 1)) + q) * PITCH + col, swiglu(j), swiglu(j + 1));
    } else {
      // matrices (j, rows 0-7), (j, rows 8-15), (j+1, ..), (j+1, ..) of the
      // warp's 16 weight rows 64·(warp / 4) + 16·(warp % 4) .. by X rows
      const u32 col = (u32)(64 * (warp >> 2) + 16 * (warp & 3) + 8 * (mat & 1)) * 2;
#pragma unroll
      for (int j = 0; j < BM / 8; j += 2)
        stsm_x4_trans(sbase + (u32)(8 * (j + (mat >> 1)) + q) * PITCH + col,
                      pack_bf16x2(wacc[0][4 * j], wacc[0][4 * j + 1]), pack_bf16x2(wacc[0][4 * j + 2], wacc[0][4 * j + 3]),
                      pack_bf16x2(wacc[0][4 * j + 4], wacc[0][4 * j + 5]),
                      pack_bf16x2(wacc[0][4 * j + 6], wacc[0][4 * j + 7]));
    }
    __syncthreads();
    // 16 bytes a thread: eight outputs of a row, a row's OUT / 8 chunks
    // taken by consecutive threads
    constexpr int CH = OUT / 8;
#pragma unroll
    for (int k = 0; k < (BM * CH + NTHREADS - 1) / NTHREADS; k++) {
      const int i = tid + k * NTHREADS, row = i / CH, ch = i % CH, r = r0 + row, n = n0 + 8 * ch;
      if (i < BM * CH && r < rend && n < N) {
        u32 v[4];
        ld_shared_v4(sbase + (u32)row * PITCH + ch * 16, v);
        st_global_v4((u16*)Y + (long long)r * N + n, v);
      }
    }
  } else if constexpr (RA) {
    // wacc[0][4j + i]: weight row 64·(warp / 4) + 16·(warp % 4) + g (+8
    // for i >= 2) of the tile, X row 8j + 2c + (i & 1); gate/up, rows g and
    // g+8 are the gate and the up row of output n0 + 32·(warp / 4) +
    // 8·(warp % 4) + g
    const int wrow = 64 * (warp >> 2) + 16 * (warp & 3) + g;
#pragma unroll
    for (int j = 0; j < BM / 8; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int r = r0 + 8 * j + 2 * c + e;
        if (r >= rend) continue;
        if (MODE == MODE_GATEUP) {
          const int n = n0 + 32 * (warp >> 2) + 8 * (warp & 3) + g;
          if (n < N) {
            const float gt = wacc[0][4 * j + e], up = wacc[0][4 * j + 2 + e];
            ((u16*)Y)[(long long)r * N + n] = (u16)(pack_bf16x2(gt / (1.f + gexp(-gt)) * up, 0.f) & 0xFFFFu);
          }
        } else if (MODE == MODE_DOWN_BF) {
          u16* y = (u16*)Y + (long long)r * N + n0;
          if (n0 + wrow < N) y[wrow] = bf16_bits(wacc[0][4 * j + e]);
          if (n0 + wrow + 8 < N) y[wrow + 8] = bf16_bits(wacc[0][4 * j + 2 + e]);
        } else {
          float* y = (float*)Y + (long long)r * N + n0;
          if (n0 + wrow < N) y[wrow] = wacc[0][4 * j + e];
          if (n0 + wrow + 8 < N) y[wrow + 8] = wacc[0][4 * j + 2 + e];
        }
      }
  } else if constexpr (WG) {
    // wacc[m][4j + i]: row 64(wgs + m) + 16·(warp % 4) + g (+8 for i >= 2), column 8j +
    // 2c + (i & 1); gate/up, n8 tiles 2q and 2q+1 are the gate and the up
    // rows of outputs 8q ..
#pragma unroll
    for (int m = 0; m < WS; m++)
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int r = r0 + 64 * (wgs + m) + 16 * (warp & 3) + g + 8 * half;
        if (r >= rend) continue;
        if (MODE == MODE_GATEUP) {
          u16* h = (u16*)Y + (long long)r * N;
#pragma unroll
          for (int q = 0; q < 8; q++) {
            const int n = n0 + q * 8 + 2 * c;
            if (n >= N) continue;
            store_swiglu(h, n, wacc[m][8 * q + 2 * half], wacc[m][8 * q + 2 * half + 1], wacc[m][8 * q + 4 + 2 * half],
                         wacc[m][8 * q + 4 + 2 * half + 1]);
          }
        } else {
          float* y = (float*)Y + (long long)r * N;
#pragma unroll
          for (int j = 0; j < 16; j++) {
            const int n = n0 + j * 8 + 2 * c;
            if (n >= N) continue;
            float2v v = {wacc[m][4 * j + 2 * half], wacc[m][4 * j + 2 * half + 1]};
            *(float2v*)(y + n) = v;
          }
        }
      }
  } else {
  // Epilogue: fragment element (i, j) of acc[mt][nt] is row g (+8 for
  // j >= 2), column 2c + (j & 1) of the 16x8 tile.
#pragma unroll
  for (int mt = 0; mt < MT; mt++) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int r = r0 + wm * TM + mt * 16 + g + 8 * half;
      if (r >= rend) continue;
      if (MODE == MODE_GATEUP) {
        u16* h = (u16*)Y + (long long)r * N;
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
          const int n = n0 + ((wn * TN / 8 + nt) >> 1) * 8 + 2 * c;
          if (n >= N) continue;
          store_swiglu(h, n, acc[mt][nt][2 * half], acc[mt][nt][2 * half + 1], acc[mt][nt + 1][2 * half],
                       acc[mt][nt + 1][2 * half + 1]);
        }
      } else {
        float* y = (float*)Y + (long long)r * N;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
          const int n = n0 + wn * TN + nt * 8 + 2 * c;
          if (n >= N) continue;
          float2v v = {acc[mt][nt][2 * half], acc[mt][nt][2 * half + 1]};
          *(float2v*)(y + n) = v;
        }
      }
    }
  }
  }
}


// Entry points, one per tile shape and mode. Launch with WM*WN*32 threads,
// GEMM_SHARED(BM, BN, S) bytes of dynamic shared memory; grid x = N/BN
// (gate/up: N/(BN/2)) rounded up, grid y = M/BM rounded up (grouped: the
// tile map's upper bound, blocks past ntiles return). K % 64 == 0, N % 8 ==
// 0, X and the weights 16-byte aligned. gemm_group_<tile>: the dense GEMMs
// of a QMVGroup (device.h) in one launch, grid x the sum over its matrices of their
// rows / BN rounded up (each block finds its matrix), grid y as dense.
// GEMM_DENSE_ENTRIES makes the first two, GEMM_ENTRIES all four.
#define GEMM_ENTRIES(NAME, BM, BN, WM, WN, S, MINB, WG)   \
  GEMM_DENSE_ENTRIES(NAME, BM, BN, WM, WN, S, MINB, WG) \
  GEMM_MOE_ENTRIES(NAME, BM, BN, WM, WN, S, MINB, WG)
#define GEMM_DENSE_ENTRIES(NAME, BM, BN, WM, WN, S, MINB, WG)                                                       \
  extern "C" __global__ void __launch_bounds__(WM* WN * 32, MINB)                                                \
      gemm_dense_##NAME(const u16* X, const u32* W, const u32* SB, float* Y, int M, int N, int K) { pdl_begin();            \
    gemm_tile<BM, BN, WM, WN, S, MODE_DENSE, WG>(X, 0, W, SB, 0, 0, Y, M, N, K, 0, 0, 0, PETAL_BID_X());          \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(WM* WN * 32, MINB)                                                \
      gemm_group_##NAME(const QMVGroup g, const u16* X, int M, int K) {                                         \
    pdl_begin();                                                                                                 \
    const int bx = PETAL_BID_X();                                                                                \
    int b0 = 0, at = -1, N = 0, lx = 0;                                                                          \
    _Pragma("unroll") for (int i = 0; i < QMV_GROUP; i++) {                                                     \
      if (i < g.n) {                                                                                             \
        const int ni = g.start[i + 1] - g.start[i], nb = (ni + BN - 1) / BN;                                     \
        if (bx >= b0 && bx < b0 + nb) at = i, N = ni, lx = bx - b0;                                              \
        b0 += nb;                                                                                                \
      }                                                                                                          \
    }                                                                                                            \
    const u32 *W = g.words[0], *SB = g.sb[0];                                                                        \
    float* Y = g.y[0];                                                                                           \
    _Pragma("unroll") for (int i = 1; i < QMV_GROUP; i++) if (at == i) W = g.words[i], SB = g.sb[i], Y = g.y[i];    \
    if (at < 0) return;                                                                                          \
    gemm_tile<BM, BN, WM, WN, S, MODE_DENSE, WG>(X, 0, W, SB, 0, 0, Y, M, N, K, 0, 0, 0, lx);                      \
  }
#define GEMM_MOE_ENTRIES(NAME, BM, BN, WM, WN, S, MINB, WG)                                                         \
  extern "C" __global__ void __launch_bounds__(WM* WN * 32, MINB)                                                \
      gemm_gateup_##NAME(const u16* X, const int* rowTok, const u32* Wg, const u32* SBg, const u32* Wu,          \
                         const u32* SBu, u16* H, int N, int K, const int* tiles, const int* offsets,             \
                         const int* ntiles) { pdl_begin();                                                       \
    gemm_tile<BM, BN, WM, WN, S, MODE_GATEUP, WG>(X, rowTok, Wg, SBg, Wu, SBu, H, 0, N, K, tiles, offsets, ntiles,  \
                                              PETAL_BID_X());                                                    \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(WM* WN * 32, MINB)                                                \
      gemm_down_##NAME(const u16* Hs, const u32* W, const u32* SB, float* Ys, int N, int K, const int* tiles,     \
                       const int* offsets, const int* ntiles) { pdl_begin();                                     \
    gemm_tile<BM, BN, WM, WN, S, MODE_DOWN, WG>(Hs, 0, W, SB, 0, 0, Ys, 0, N, K, tiles, offsets, ntiles, PETAL_BID_X()); \
  }

// gemm_wg.cu includes this file for gemm_tile and its helpers, and makes
// its own entries (sm_90a); the rest is this module's.
#ifndef GEMM_WG_MODULE
GEMM_ENTRIES(m128, 128, 128, 2, 2, 3, 2, 0)
GEMM_ENTRIES(m128w8, 128, 128, 2, 4, 3, 2, 0)
GEMM_ENTRIES(m64, 64, 128, 2, 2, 3, 3, 0)
GEMM_ENTRIES(m32, 32, 128, 1, 4, 4, 3, 0)
GEMM_ENTRIES(m16, 16, 128, 1, 4, 4, 4, 0)

// gemm_sum_splits: y_i[M, N_i] = the sum over z of a split-K launch's
// partials, for the matrices of g (y: the outputs; start: their rows):
// matrix i's partials are [splits][M][N_i] floats from parts + splits·M·
// start[i], added in z order. Four floats a thread (M·N_i % 4 == 0), grid
// ceil(M·start[n] / 1024), block 256.
extern "C" __global__ void __launch_bounds__(256)
    gemm_sum_splits(const QMVGroup g, const float* __restrict__ parts, int M, int splits) {
  pdl_begin();
  const long long at = ((long long)PETAL_BID_X() * 256 + PETAL_TID_X()) * 4;
  if (at >= (long long)M * g.start[g.n]) return;
  int i = 0;
#pragma unroll
  for (int m = 1; m < QMV_GROUP; m++)
    if (m < g.n && at >= (long long)M * g.start[m]) i = m;
  float* y = g.y[0];
#pragma unroll
  for (int m = 1; m < QMV_GROUP; m++)
    if (i == m) y = g.y[m];
  const long long n = (long long)M * (g.start[i + 1] - g.start[i]), j = at - (long long)M * g.start[i];
  const float* p = parts + (long long)splits * M * g.start[i] + j;
  float4v v = *(const float4v*)p;
  for (int z = 1; z < splits; z++) {
    const float4v u = *(const float4v*)(p + z * n);
    v.x += u.x, v.y += u.y, v.z += u.z, v.w += u.w;
  }
  *(float4v*)(y + j) = v;
}

// ---- The grouped MoE GEMMs at a few rows an expert (gemm_gateup_r16 ..) ----
//
// Prefill's MoE at 512 tokens gives an expert about 16 rows, and its GEMM is
// then a read of every expert's weights in which dequantising them is most
// of the arithmetic: gemm_tile dequantises a k-tile into a bf16 W tile in
// shared memory, and its warps wait at a second barrier to read it back.
// Here the codes are staged as they are (cp.async, RQ_STAGES deep, with
// their scale/bias words and the tile's X rows) and each thread dequantises
// its own B fragments of the mma in registers: one barrier a stage.
//
// The mma's k order is free as long as A and B agree on it. Thread c (lane
// & 3) reads code words 2c and 2c+1 of its W row, elements 16c .. 16c+15 of
// the group, and dequant's pairs come out as (e_j, e_j+4) of a word; so
// k-step s takes logical k = 2c, 2c+1, 2c+8, 2c+9 to be elements 16c + s,
// 16c+s+4, 16c+8+s, 16c+12+s. The B fragments are then dequant's words as
// they are, and the A fragments the same pairs of X, made once a k-tile
// for all of a warp's n-tiles.
//
// A stage is RQ_KG groups of each weight row, contiguous in memory, the
// code chunks swizzled by row (rq_swz) so that a warp's eight rows fall in
// distinct banks.
//
// A block takes items (a tile of the tile map, and a chunk of RQ_WARPS ·
// RQ_NT · 8 weight rows: gate/up, a warp's first RQ_NT/2 tiles gate rows
// and the rest the up rows of the same outputs) in turn, its grid any size,
// the stages of its items one stream so that the next item's loads overlap
// the last k of this one.
#define RQ_WARPS 4
#define RQ_NT 4  // n8 tiles a warp
#define RQ_KG 2  // groups of 64 a stage
#define RQ_CPR (RQ_KG * 2)  // 16-byte chunks of a staged code row
// rq_swz is the shared position of chunk ch of code row i: XOR-ed with the
// row's place among the rows that share a 128-byte line of banks.
#define rq_swz(ch, i) ((ch) ^ (((i) / (8 / RQ_CPR)) % RQ_CPR))
#define RQ_STAGES 3
#define RQ_ROWS (RQ_WARPS * RQ_NT * 8)  // weight rows a block item
#define RQ_CODES (RQ_ROWS * RQ_KG * 32)  // bytes of a stage's codes
#define RQ_SBS (RQ_ROWS * RQ_KG * 4)     // bytes of its scale/bias words
#define RQ_XROW (RQ_KG * 128 + 16)       // bytes of a staged X row, padded so the quads' reads miss each other's banks
#define RQ_STAGE(BM) (RQ_CODES + RQ_SBS + (BM) * RQ_XROW)
#define RQ_SHARED(BM) (RQ_STAGES * RQ_STAGE(BM))

static __device__ __forceinline__ void ld_shared_v2(u32 addr, u32& a, u32& b) {
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "r"(addr));
}
static __device__ __forceinline__ u32 ld_shared_u32(u32 addr) {
  u32 a;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(a) : "r"(addr));
  return a;
}


template <int MT, int MODE>
static __device__ __forceinline__ void gemm_rq(const u16* __restrict__ X, const int* __restrict__ rowTok,
                                               const u32* __restrict__ W, const u32* __restrict__ SB,
                                               const u32* __restrict__ W2, const u32* __restrict__ SB2,
                                               void* __restrict__ Y, int N, int K, const int* __restrict__ tiles,
                                               const int* __restrict__ offsets, const int* __restrict__ ntiles) {
  constexpr int BM = 16 * MT, STAGE = RQ_STAGE(BM), NTHREADS = RQ_WARPS * 32, HALF = RQ_NT / 2;
  constexpr int OUT_W = MODE == MODE_GATEUP ? HALF * 8 : RQ_NT * 8, OUT_B = OUT_W * RQ_WARPS;
  extern __shared__ __attribute__((aligned(128))) unsigned char gsm[];
  const u32 sbase = smem_u32(gsm);
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const int nch = (N + OUT_B - 1) / OUT_B, items = ntiles[0] * nch;
  const int groups = K / 64, kstages = (groups + RQ_KG - 1) / RQ_KG, bid = PETAL_BID_X(), grid = PETAL_NCTAID_X();
  const int mine = bid < items ? (items - bid + grid - 1) / grid : 0;  // this block's items
  const int steps = mine * kstages;
  const long long wpr = K / 8;

  // Weight row of block row i (warp w, tile j, row gg; i = (w·RQ_NT + j)·8 + gg).
  auto wrow = [&](int i, int nb, int& n) __attribute__((always_inline)) {
    const int w = i / (RQ_NT * 8), j = (i / 8) % RQ_NT;
    n = nb + w * OUT_W + (MODE == MODE_GATEUP ? j % HALF : j) * 8 + i % 8;
    return MODE == MODE_GATEUP && j >= HALF;
  };
  // load stages step q (the block's item q / kstages, groups RQ_KG·(q % kstages) ..).
  auto load = [&](int q) __attribute__((always_inline)) {
    if (q < steps) {
      const int g0 = (q % kstages) * RQ_KG, item = bid + (q / kstages) * grid;
      const int t = item / nch, nb = (item % nch) * OUT_B;
      const int e = tiles[2 * t], r0 = tiles[2 * t + 1], oe = offsets[e + 1], rend = oe < r0 + BM ? oe : r0 + BM;
      const u32 st = sbase + (q % RQ_STAGES) * STAGE;
#pragma unroll
      for (int x = tid; x < RQ_CODES / 16; x += NTHREADS) {
        const int i = x / (RQ_KG * 2), ch = x % (RQ_KG * 2);
        int n;
        const bool up = wrow(i, nb, n), v = n < N && g0 + ch / 2 < groups;
        const u32* src = (up ? W2 : W) + (v ? ((long long)e * N + n) * wpr + g0 * 8 + ch * 4 : 0);
        cp_async16(st + i * RQ_KG * 32 + (rq_swz(ch, i) << 4), src, v);
      }
#pragma unroll
      for (int i = tid; i < RQ_ROWS; i += NTHREADS) {
        int n;
        const bool up = wrow(i, nb, n), v = n < N;
        const long long row = v ? (long long)e * N + n : 0;
#pragma unroll
        for (int k = 0; k < RQ_KG; k++)  // four words, unless the row's groups end
          cp_async4(st + RQ_CODES + (i * RQ_KG + k) * 4, (up ? SB2 : SB) + row * groups + g0 + k, v && g0 + k < groups);
      }
#pragma unroll
      for (int x = tid; x < BM * RQ_KG * 8; x += NTHREADS) {
        const int row = x / (RQ_KG * 8), ch = x % (RQ_KG * 8), r = r0 + row;
        const bool v = r < rend && g0 + ch / 8 < groups;
        const u16* src = X;
        if (v) src = X + (long long)(MODE == MODE_GATEUP ? rowTok[r] : r) * K + g0 * 64 + ch * 8;
        cp_async16(st + RQ_CODES + RQ_SBS + row * RQ_XROW + ch * 16, src, v);
      }
    }
    cp_commit();
  };

  float acc[MT][RQ_NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int j = 0; j < RQ_NT; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) acc[mt][j][k] = 0.f;

#pragma unroll
  for (int q = 0; q < RQ_STAGES - 1; q++) load(q);
  for (int q = 0; q < steps; q++) {
    cp_wait<RQ_STAGES - 2>();
    // Every thread's copies of step q have landed, and every warp is done
    // with step q-1, whose stage the next load reuses.
    __syncthreads();
    load(q + RQ_STAGES - 1);
    const u32 st = sbase + (q % RQ_STAGES) * STAGE;
    const int gn = groups - (q % kstages) * RQ_KG;  // groups left in the row
#pragma unroll
    for (int kg = 0; kg < RQ_KG; kg++) {
      if (kg >= gn) break;
      // A fragments of the group's four k-steps: rows g and g+8 of each
      // 16-row fragment, X elements 16c .. 16c+15 paired as B's are.
      u32 af[MT][4][4];
#pragma unroll
      for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          u32 u[8];
          const u32 ra = st + RQ_CODES + RQ_SBS + (mt * 16 + g + 8 * h) * RQ_XROW + kg * 128 + c * 32;
          ld_shared_v4(ra, u);
          ld_shared_v4(ra + 16, u + 4);
#pragma unroll
          for (int s = 0; s < 4; s++) {
            const u32 sel = (s & 1) ? 0x7632u : 0x5410u;
            af[mt][s][h] = prmt(u[s >> 1], u[2 + (s >> 1)], sel);          // (x[s], x[s+4])
            af[mt][s][2 + h] = prmt(u[4 + (s >> 1)], u[6 + (s >> 1)], sel);  // (x[8+s], x[12+s])
          }
        }
#pragma unroll
      for (int j = 0; j < RQ_NT; j++) {
        const int i = (warp * RQ_NT + j) * 8 + g;
        u32 w0, w1;
        ld_shared_v2(st + i * RQ_KG * 32 + (rq_swz(2 * kg + (c >> 1), i) << 4) + (c & 1) * 8, w0, w1);
        const u32 sb = ld_shared_u32(st + RQ_CODES + (i * RQ_KG + kg) * 4);
        const u32 s2 = prmt(sb, sb, 0x1010u), b2 = prmt(sb, sb, 0x3232u);
        u32 p0[4], p1[4];
        dequant_pairs(w0, s2, b2, p0);
        dequant_pairs(w1, s2, b2, p1);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int s = 0; s < 4; s++) mma_bf16(acc[mt][j], af[mt][s], p0[s], p1[s]);
      }
    }
    if (q % kstages != kstages - 1) continue;

    // The item's last stage: its outputs.
    const int item = bid + (q / kstages) * grid, t = item / nch, n0 = (item % nch) * OUT_B + warp * OUT_W;
    const int e = tiles[2 * t], r0 = tiles[2 * t + 1], oe = offsets[e + 1], rend = oe < r0 + BM ? oe : r0 + BM;
    store_item<MODE, MT, RQ_NT>(Y, N, acc, r0, rend, n0, g, c);
  }
  cp_wait<0>();
}

// Entry points gemm_gateup_r16/r32 and gemm_down_r16/r32: the arguments of
// gemm_gateup_m32 and gemm_down_m32, RQ_WARPS*32 threads, RQ_SHARED(BM)
// bytes of dynamic shared memory, a grid of any size (the items are read
// from ntiles). K % 64 == 0, N % 8 == 0.
#define RQ_ENTRIES(NAME, MT, MINB)                                                                                \
  extern "C" __global__ void __launch_bounds__(RQ_WARPS * 32, MINB)                                               \
      gemm_gateup_##NAME(const u16* X, const int* rowTok, const u32* Wg, const u32* SBg, const u32* Wu,           \
                         const u32* SBu, u16* H, int N, int K, const int* tiles, const int* offsets,              \
                         const int* ntiles) { pdl_begin();                                                        \
    gemm_rq<MT, MODE_GATEUP>(X, rowTok, Wg, SBg, Wu, SBu, H, N, K, tiles, offsets, ntiles);                       \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(RQ_WARPS * 32, MINB)                                               \
      gemm_down_##NAME(const u16* Hs, const u32* W, const u32* SB, float* Ys, int N, int K, const int* tiles,      \
                       const int* offsets, const int* ntiles) { pdl_begin();                                      \
    gemm_rq<MT, MODE_DOWN>(Hs, 0, W, SB, 0, 0, Ys, N, K, tiles, offsets, ntiles);                                 \
  }
RQ_ENTRIES(r16, 1, 4)
RQ_ENTRIES(r32, 2, 3)

// ---- The grouped MoE GEMMs streamed (gemm_gateup_s16, gemm_down_s16) ----
//
// At a few rows an expert the grouped GEMM is a read of every expert's
// weights, and what it needs is many weight bytes in flight and no barrier
// between them. Here a block's warps each stream their own weight rows
// through a ring of RING steps in shared memory that only the lane that
// copied a word reads back (cp.async, no barrier), and the tile's 16·MT X
// rows are staged once an item for all of K, so that the k loop has no
// barrier. MT = 2 (s32) dequantises each weight once for 32 rows, and reads
// an expert given 17-32 rows once where 16-row tiles read it twice.
//
// A step is a k-block of 128 for NT n8 tiles of a warp: lane (g, c)
// copies the 16 code bytes 32c .. 32c+31 of its tile row g (elements 32c ..
// 32c+31 of the k-block: one group, 64c/64 ... of the block's two) and that
// group's scale/bias word. As in gemm_rq the mma's k order is free as long
// as A and B agree: dequant_pairs gives, for code word w of the lane, the
// pairs P[w][j] = (e_8w+j, e_8w+j+4), and k-step s (0..7) takes b0 =
// P[2(s/4)][s%4] and b1 = P[2(s/4)+1][s%4]. X is staged with each 16-byte
// chunk (8 elements) rewritten into the same pairs, so that the A
// fragments are whole 16-byte loads: a0 = the pair of row g at b0's
// elements, a1 the same of row g+8, a2 and a3 at b1's.
//
// Staged X chunk L of row r sits at L ^ ((L >> 3) & 1) ^ ((r & 1) << 1):
// the eight lanes of a quarter warp (rows g, g+1, lanes c 0..3) then read
// eight distinct 16-byte bank groups.
//
// A block takes items (a 16·MT-row tile of the tile map and a chunk of
// outputs: WARPS warps of NT n8 tiles a pass; gate/up, a warp's first
// NT/2 tiles gate rows and the rest the up rows of the same outputs) in
// turn; its warps' step streams run on across items, so the next item's
// weights are in flight while its X is staged.
#define ST_SLOT(NT) ((NT) * 32 * 20)  // a warp's step: 16 code bytes and a scale/bias word a lane and n-tile
#define ST_RINGS(WARPS, NT, RING) ((WARPS) * (RING) * ST_SLOT(NT))
#define ST_DOWN_PASSES 2

static __device__ __forceinline__ int st_phys(int L, int r) { return L ^ ((L >> 3) & 1) ^ ((r & 1) << 1); }

template <int MODE, int WARPS, int NT, int RING, int MT>
static __device__ __forceinline__ void gemm_stream(const u16* __restrict__ X, const int* __restrict__ rowTok,
                                                   const u32* __restrict__ W, const u32* __restrict__ SB,
                                                   const u32* __restrict__ W2, const u32* __restrict__ SB2,
                                                   void* __restrict__ Y, int N, int K, const int* __restrict__ tiles,
                                                   const int* __restrict__ offsets, const int* __restrict__ ntiles) {
  constexpr int NTHREADS = WARPS * 32, HALF = NT / 2;
  constexpr int OUT_W = MODE == MODE_GATEUP ? HALF * 8 : NT * 8;  // outputs of a warp's pass
  constexpr int PASSES = MODE == MODE_GATEUP ? 1 : ST_DOWN_PASSES;
  constexpr int OUT_B = OUT_W * WARPS * PASSES;  // outputs of an item
  extern __shared__ __attribute__((aligned(128))) unsigned char gsm[];
  const u32 sbase = smem_u32(gsm);
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const u32 ring = sbase + warp * (RING * ST_SLOT(NT)), xs = sbase + ST_RINGS(WARPS, NT, RING);
  const int kblocks = K / 128, xrow = 2 * K;
  const int nch = (N + OUT_B - 1) / OUT_B, items = ntiles[0] * nch;
  const int bid = PETAL_BID_X(), grid = PETAL_NCTAID_X();
  const int mine = bid < items ? (items - bid + grid - 1) / grid : 0;
  const long long wpr = K / 8, gpr = K / 64;
  // X staging's chunks of 16 bytes: cpr a row; the thread's first, and
  // the rows and chunks a block's threads advance
  const int cpr = K / 8, chunks = 16 * MT * cpr, srow = tid / cpr, sch = tid % cpr;
  const int drow = NTHREADS / cpr, dch = NTHREADS % cpr;
  auto st_next = [&](int& r, int& c) __attribute__((always_inline)) {
    r += drow, c += dch;
    if (c >= cpr) r++, c -= cpr;
  };

  // The copies' cursor: the next step to issue is pass qp, k-block qkb of
  // the block's item number qi (qe its expert, qob its first output),
  // advanced a step an issue, so that the k loop divides by nothing
  // (dividing q by the steps an item, as first built, took more
  // instructions a step than a tile's products).
  int qi = 0, qp = 0, qkb = 0, qe = 0, qob = 0;
  auto locate = [&]() __attribute__((always_inline)) {
    if (qi < mine) {
      const int item = bid + qi * grid;
      qe = tiles[2 * (item / nch)], qob = (item % nch) * OUT_B;
    }
  };
  locate();
  // issue queues the copies of step q (the cursor's) into ring slot q % RING.
  auto issue = [&](int q) __attribute__((always_inline)) {
    if (qi < mine) {
      const int ob = qob + (qp * WARPS + warp) * OUT_W;
      const u32 slot = ring + (q % RING) * ST_SLOT(NT);
#pragma unroll
      for (int j = 0; j < NT; j++) {
        const int n = ob + (MODE == MODE_GATEUP ? j % HALF : j) * 8 + g;
        const bool up = MODE == MODE_GATEUP && j >= HALF, v = n < N;
        const long long row = (long long)qe * N + (v ? n : 0);
        cp_async16(slot + (j * 32 + lane) * 16, (up ? W2 : W) + row * wpr + qkb * 16 + c * 4, v);
        cp_async4(slot + NT * 512 + (j * 32 + lane) * 4, (up ? SB2 : SB) + row * gpr + qkb * 2 + (c >> 1), v);
      }
      if (++qkb == kblocks) {
        qkb = 0;
        if (++qp == PASSES) qp = 0, qi++, locate();
      }
    }
    cp_commit();
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) acc[mt][j][k] = 0.f;

#pragma unroll
  for (int q = 0; q < RING - 1; q++) issue(q);
  int q = 0;
  for (int i = 0; i < mine; i++) {
    const int item = bid + i * grid, t = item / nch;
    const int e = tiles[2 * t], r0 = tiles[2 * t + 1], oe = offsets[e + 1], rend = oe < r0 + 16 * MT ? oe : r0 + 16 * MT;

    // Stage the tile's X rows (zeros past rend), chunks rewritten into
    // pairs, eight 16-byte loads of a thread in flight at once.
    // Chunk x = row·cpr + ch is walked from the thread's first chunk
    // (srow, sch) a block's threads at a time, without dividing.
    __syncthreads();  // every warp is done with the last item's X
    int row = srow, ch = sch;
    for (int x0 = tid; x0 < chunks; x0 += 8 * NTHREADS) {
      const int row1 = row, ch1 = ch;
      u32x4 v[8];
#pragma unroll
      for (int u = 0; u < 8; u++) {
        const int x = x0 + u * NTHREADS, r = r0 + row;
        v[u] = u32x4{0u, 0u, 0u, 0u};
        if (x < chunks && r < rend) {
          const long long src = MODE == MODE_GATEUP ? rowTok[r] : r;
          v[u] = *(const u32x4*)(X + src * K + ch * 8);
        }
        st_next(row, ch);
      }
      row = row1, ch = ch1;
#pragma unroll
      for (int u = 0; u < 8; u++) {
        const int x = x0 + u * NTHREADS;
        if (x < chunks)
          st_shared_v4(xs + row * xrow + st_phys(ch, row) * 16, prmt(v[u].x, v[u].z, 0x5410u),
                       prmt(v[u].x, v[u].z, 0x7632u), prmt(v[u].y, v[u].w, 0x5410u), prmt(v[u].y, v[u].w, 0x7632u));
        st_next(row, ch);
      }
    }
    __syncthreads();

    for (int p = 0; p < PASSES; p++) {
      for (int kb = 0; kb < kblocks; kb++, q++) {
        cp_wait<RING - 2>();  // this lane's copies of step q have landed
        issue(q + RING - 1);  // into the slot this lane read at step q-1
        const u32 slot = ring + (q % RING) * ST_SLOT(NT);
        u32 xa[MT][2][4][4];  // rows g, g+8 of each 16: the lane's four X chunks of the k-block
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
          for (int h = 0; h < 2; h++)
#pragma unroll
            for (int w = 0; w < 4; w++) {
              const int row = 16 * mt + g + 8 * h;
              ld_shared_v4(xs + row * xrow + st_phys(kb * 16 + c * 4 + w, row) * 16, xa[mt][h][w]);
            }
#pragma unroll
        for (int j = 0; j < NT; j++) {
          u32 cw[4];
          ld_shared_v4(slot + (j * 32 + lane) * 16, cw);
          const u32 sb = ld_shared_u32(slot + NT * 512 + (j * 32 + lane) * 4);
          const u32 s2 = prmt(sb, sb, 0x1010u), b2 = prmt(sb, sb, 0x3232u);
          u32 pp[4][4];
#pragma unroll
          for (int w = 0; w < 4; w++) dequant_pairs(cw[w], s2, b2, pp[w]);
#pragma unroll
          for (int s = 0; s < 8; s++) {
            const int w0 = 2 * (s >> 2), jj = s & 3;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
              const u32 a[4] = {xa[mt][0][w0][jj], xa[mt][1][w0][jj], xa[mt][0][w0 + 1][jj], xa[mt][1][w0 + 1][jj]};
              mma_bf16(acc[mt][j], a, pp[w0][jj], pp[w0 + 1][jj]);
            }
          }
        }
      }

      // The pass's outputs.
      store_item<MODE, MT, NT>(Y, N, acc, r0, rend, (item % nch) * OUT_B + (p * WARPS + warp) * OUT_W, g, c);
    }
  }
  cp_wait<0>();
}

// Entry points gemm_gateup_<name> and gemm_down_<name> of WARPS warps of NT
// n8 tiles, a ring of RING steps and MT m16 tiles: the arguments of
// gemm_gateup_m32 and gemm_down_m32, WARPS*32 threads, ST_RINGS(WARPS, NT,
// RING) + 32·MT·K bytes of dynamic shared memory (K: hidden for gate/up,
// inter for down), a grid of any size. K % 128 == 0, N % 8 == 0. s32: 8
// warps (the registers of two m16 tiles' fragments), a ring of 4.
#define STREAM_ENTRIES(NAME, WARPS, NT, RING, MT)                                                                   \
  extern "C" __global__ void __launch_bounds__(WARPS * 32, 1)                                                      \
      gemm_gateup_##NAME(const u16* X, const int* rowTok, const u32* Wg, const u32* SBg, const u32* Wu,            \
                         const u32* SBu, u16* H, int N, int K, const int* tiles, const int* offsets,               \
                         const int* ntiles) {                                                                      \
    pdl_begin();                                                                                                   \
    gemm_stream<MODE_GATEUP, WARPS, NT, RING, MT>(X, rowTok, Wg, SBg, Wu, SBu, H, N, K, tiles, offsets, ntiles);   \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(WARPS * 32, 1)                                                      \
      gemm_down_##NAME(const u16* Hs, const u32* W, const u32* SB, float* Ys, int N, int K, const int* tiles,      \
                       const int* offsets, const int* ntiles) {                                                    \
    pdl_begin();                                                                                                   \
    gemm_stream<MODE_DOWN, WARPS, NT, RING, MT>(Hs, 0, W, SB, 0, 0, Ys, N, K, tiles, offsets, ntiles);             \
  }
STREAM_ENTRIES(s16, 16, 4, 3, 1)
STREAM_ENTRIES(s16r4, 16, 4, 4, 1)
STREAM_ENTRIES(s16n8, 16, 8, 2, 1)
STREAM_ENTRIES(s32, 8, 4, 4, 2)

// gemm_to_bf16 rounds n float32 (n % 4 == 0, 16-byte aligned) to bf16.
extern "C" __global__ void gemm_to_bf16(const float* __restrict__ x, u32* __restrict__ y, long long n) {
  pdl_begin();
  const long long i = ((long long)PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X()) * 4;
  if (i >= n) return;
  const float4v v = *(const float4v*)(x + i);
  u32 lo = pack_bf16x2(v.x, v.y), hi = pack_bf16x2(v.z, v.w);
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(y + i / 2), "r"(lo), "r"(hi) : "memory");
}

// moe_route groups the T*GEMM_TOPK (token, slot) pairs by expert, in one
// block of ROUTE_THREADS threads (E <= ROUTE_THREADS). ids[t*TOPK+k] is
// token t's k-th expert. Writes counts[E], offsets[E+1] (exclusive scan),
// pos[t*TOPK+k] (the pair's sorted row; -1 for an id outside [0, E)),
// rowTok[row] (the token of each sorted row), the tile map (expert, first
// row) of each BM-row tile of each expert's rows, ntiles[0], and
// status[0] = the number of ids outside [0, E). The order of rows inside an
// expert's group is not fixed, but every row's result is computed the same
// way wherever it sits, so the outputs are.
template <int AHEAD>
static __device__ __forceinline__ void route_pairs(const int* __restrict__ ids, int T, int E, int BM,
                                                   int* __restrict__ counts, int* __restrict__ offsets,
                                                   int* __restrict__ pos, int* __restrict__ rowTok,
                                                   int* __restrict__ tiles, int* __restrict__ ntiles,
                                                   int* __restrict__ status) {
  __shared__ int hist[ROUTE_THREADS];
  __shared__ int base[ROUTE_THREADS];
  __shared__ int warpSum[2][32];
  __shared__ int bad;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  hist[tid] = 0;
  if (tid == 0) bad = 0;
  __syncthreads();
  const int n = T * GEMM_TOPK;
  const u32 hbase = smem_u32(hist);
  // Each thread loads AHEAD ids before its atomics (their "memory"
  // clobbers would otherwise hold each load behind the atomic before it):
  // one wait on device memory a AHEAD pairs, not one a pair (4096 tokens:
  // 32 pairs a thread).
  for (int i0 = 0; i0 < n; i0 += ROUTE_THREADS * AHEAD) {
    int ev[AHEAD];
#pragma unroll
    for (int u = 0; u < AHEAD; u++) {
      const int i = i0 + u * ROUTE_THREADS + tid;
      ev[u] = i < n ? ids[i] : 0;
    }
#pragma unroll
    for (int u = 0; u < AHEAD; u++) {
      const int i = i0 + u * ROUTE_THREADS + tid, e = ev[u];
      if (i >= n) break;
      int rank = -1;
      if (e >= 0 && e < E) {
        asm volatile("atom.shared.add.u32 %0, [%1], 1;" : "=r"(rank) : "r"(hbase + 4 * e) : "memory");
      } else {
        asm volatile("red.shared.add.u32 [%0], 1;" ::"r"(smem_u32(&bad)) : "memory");
      }
      pos[i] = rank;
    }
  }
  __syncthreads();
  // Exclusive scans of the counts and of the tiles per expert.
  const int cnt = tid < E ? hist[tid] : 0;
  const int nt = (cnt + BM - 1) / BM;
  int a = cnt, b = nt;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int ua = g_shfl_up(a, d), ub = g_shfl_up(b, d);
    if (lane >= d) a += ua, b += ub;
  }
  if (lane == 31) warpSum[0][warp] = a, warpSum[1][warp] = b;
  __syncthreads();
  if (warp == 0) {
    int wa = warpSum[0][lane], wb = warpSum[1][lane];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int ua = g_shfl_up(wa, d), ub = g_shfl_up(wb, d);
      if (lane >= d) wa += ua, wb += ub;
    }
    warpSum[0][lane] = wa, warpSum[1][lane] = wb;
  }
  __syncthreads();
  const int off = a - cnt + (warp > 0 ? warpSum[0][warp - 1] : 0);
  const int toff = b - nt + (warp > 0 ? warpSum[1][warp - 1] : 0);
  if (tid < E) {
    counts[tid] = cnt;
    offsets[tid] = off;
    base[tid] = off;
    for (int j = 0; j < nt; j++) tiles[2 * (toff + j)] = tid, tiles[2 * (toff + j) + 1] = off + j * BM;
  }
  if (tid == E - 1) offsets[E] = off + cnt, ntiles[0] = toff + nt;
  if (tid == 0) status[0] = bad;
  __syncthreads();
  for (int i0 = 0; i0 < n; i0 += ROUTE_THREADS * AHEAD) {
    int ev[AHEAD], rv[AHEAD];
#pragma unroll
    for (int u = 0; u < AHEAD; u++) {
      const int i = i0 + u * ROUTE_THREADS + tid;
      ev[u] = i < n ? ids[i] : -1;
      rv[u] = i < n ? pos[i] : 0;  // this thread's own rank, written above
    }
#pragma unroll
    for (int u = 0; u < AHEAD; u++) {
      const int i = i0 + u * ROUTE_THREADS + tid, e = ev[u];
      if (e < 0 || e >= E) continue;
      const int p = base[e] + rv[u];
      pos[i] = p;
      rowTok[p] = i / GEMM_TOPK;
    }
  }
}

extern "C" __global__ void __launch_bounds__(ROUTE_THREADS, 1)
    moe_route(const int* __restrict__ ids, int T, int E, int BM, int* __restrict__ counts, int* __restrict__ offsets,
              int* __restrict__ pos, int* __restrict__ rowTok, int* __restrict__ tiles, int* __restrict__ ntiles,
              int* __restrict__ status) {
  pdl_begin();
  route_pairs<1>(ids, T, E, BM, counts, offsets, pos, rowTok, tiles, ntiles, status);
}

// moe_route8: moe_route with eight ids a thread loaded ahead, the default
// (GEMM.RouteAhead): 8-9 % less time from 2048 tokens on an H200.
extern "C" __global__ void __launch_bounds__(ROUTE_THREADS, 1)
    moe_route8(const int* __restrict__ ids, int T, int E, int BM, int* __restrict__ counts, int* __restrict__ offsets,
               int* __restrict__ pos, int* __restrict__ rowTok, int* __restrict__ tiles, int* __restrict__ ntiles,
               int* __restrict__ status) {
  pdl_begin();
  route_pairs<8>(ids, T, E, BM, counts, offsets, pos, rowTok, tiles, ntiles, status);
}

#endif  // GEMM_WG_MODULE

// combine_load4 is four consecutive expert outputs from ys at i: float32,
// or bf16 (moe_combine_bf, gemm_downbf.cu), each the top half of its
// float32.
static __device__ __forceinline__ float4v combine_load4(const float* ys, long long i) {
  return *(const float4v*)(ys + i);
}
static __device__ __forceinline__ float4v combine_load4(const u16* ys, long long i) {
  const unsigned long long v = *(const unsigned long long*)(ys + i);
  const u32 lo = (u32)v, hi = (u32)(v >> 32);
  return float4v{__uint_as_float(lo << 16), __uint_as_float(lo & 0xFFFF0000u), __uint_as_float(hi << 16),
                 __uint_as_float(hi & 0xFFFF0000u)};
}

// combine_rows: out[t][n] = (add ? out[t][n] : 0) + sum_k w[t,k]·Ys[pos(t,k)][n]
// in slot order, float32 sums, one block per token, N % 4 == 0. A slot
// whose expert id was outside the stack (pos -1) makes its token's row NaN,
// as the plain kernels do: a bad id is never silently left out.
template <typename Y>
static __device__ __forceinline__ void combine_rows(const Y* __restrict__ ys, const int* __restrict__ pos,
                                                    const float* __restrict__ wts, float* __restrict__ out, int N,
                                                    int add) {
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
      const float4v v = combine_load4(ys, (long long)p[k] * N + n);
      s.x += w[k] * v.x, s.y += w[k] * v.y, s.z += w[k] * v.z, s.w += w[k] * v.w;
    }
    *(float4v*)(o + n) = s;
  }
}

#ifndef GEMM_WG_MODULE
// moe_combine: combine_rows over float32 expert outputs.
extern "C" __global__ void __launch_bounds__(COMBINE_THREADS)
    moe_combine(const float* __restrict__ ys, const int* __restrict__ pos, const float* __restrict__ wts,
                float* __restrict__ out, int N, int add) {
  pdl_begin();
  combine_rows(ys, pos, wts, out, N, add);
}

// moe_shared_swiglu: h[t][i] = bf16(sigmoid(logit[t]) · silu(g[t][i]) · u[t][i])
// for i < inter, t < rows (n = rows·inter): the shared expert of a chunk on
// the tensor cores, its sigmoid gate taken in before the down GEMM (linear
// in h), which then writes the block's output for moe_combine to add the
// routed experts to. g, u float32 [rows, inter] from the dense GEMMs.
extern "C" __global__ void __launch_bounds__(256)
    moe_shared_swiglu(const float* __restrict__ g, const float* __restrict__ u, const float* __restrict__ logit,
                      u16* __restrict__ h, int inter, long long n) {
  pdl_begin();
  const long long i = (long long)PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  if (i >= n) return;
  const float gi = g[i], gate = 1.f / (1.f + gexp(-logit[i / inter]));
  const float v = gate * (gi / (1.f + gexp(-gi))) * u[i];
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
  h[i] = r;
}
#endif  // GEMM_WG_MODULE
