// route_i8.cu: qgemm_i8, the router's logits of a prefill chunk on the
// integer tensor cores (router=i8), in a module of its own, loaded under
// that option only, so that ops.ptx and its machine code stay as they are
// while it is measured.
#include "rowmath.h"

// qgemm_i8: qgemm_f64's logits on the integer tensor cores (mma m16n8k32,
// 8-bit operands, int32 sums), as exact: each group of 64 columns of x is
// written as d·(p0 + p1/2^8 + p2/2^16 + p3/2^24) with d a power of two (the
// group's largest |x| below 128·d), p0 a signed byte and p1..p3 unsigned
// ones, each step exact in float32 (a product by a power of two, a floor, a
// subtraction of it), which drops only the bits below d·2^-24 (under 2^-30
// of the group's largest |x|). The codes are bytes as they are (4-bit ones
// spread to bytes), so sum(q·p_i) is an exact int32 for each part; two
// parts share an accumulator (the first's sums times 2^8 before the
// second's products: under 2^31), and the group's sum over x becomes
// d·2^-24·(s·V + b·P), V = sum(q·P) and P = sum(P) over the group's
// P = p0·2^24 + p1·2^16 + p2·2^8 + p3: s·V and b·P are exact in float64
// (8 significant bits of a bf16 times at most 45 and 37), so each group
// adds one rounded float64 to float64 sums, as qgemm_f64's products do. A
// group holding a NaN or an infinity gives NaN logits, as the float64 sums
// would. Grid (ceil(R/BN), ceil(T/BM), S) for a block of BM tokens x BN
// rows (qi_gemm, below) with qgemm_f64's split of the columns (its
// partials to part for route_select), qiShape.shared (lower.go) bytes of
// dynamic shared memory.
#define QI_S 3     // stages of copies
#define QI_LD 80   // bytes a staged row of codes or of parts: 16-byte aligned, the fragments' loads conflict-free

template <bool SA>
static __device__ __forceinline__ void mma_i8(int* c, const u32 (&a)[4], u32 b0, u32 b1) {
  if (SA)
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ u32 umax(u32 a, u32 b) { return a > b ? a : b; }
static __device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }
// floor_magic is floor(f) for |f| < 2^22, as the float f + 1.5·2^23
// rounded down, whose low bits are the integer: an add, not a conversion
// (which a multiprocessor does at a quarter of the float rate).
static __device__ __forceinline__ float floor_magic(float f) {
  float r;
  asm("add.rm.f32 %0, %1, 0f4B400000;" : "=f"(r) : "f"(f));
  return r;
}
// i64_to_f64 is (double)v for |v| < 2^51 by the same kind of magic number:
// 1.5·2^52's bits plus v, less 1.5·2^52, an integer add and a float64 add.
static __device__ __forceinline__ double i64_to_f64(long long v) {
  return __builtin_bit_cast(double, 0x4338000000000000LL + v) - 6755399441055744.0;
}

// qi_nibbles spreads four 4-bit codes (a 16-bit half of a code word, the
// first in its low bits) to four bytes.
static __device__ __forceinline__ u32 qi_nibbles(u32 h) {
  return (h & 0xFu) | ((h & 0xF0u) << 4) | ((h & 0xF00u) << 8) | ((h & 0xF000u) << 12);
}

// qi_gemm is qgemm_i8 for a block of WM x WN warps, each 16 tokens
// x NT·8 rows: BM = 16·WM tokens and BN = 8·NT·WN weight rows a block,
// G groups of 64 columns a stage of copies (one pair of barriers for G
// groups) and S stages, the layout of qiShape.shared (lower.go) in dynamic
// shared memory. The groups are added to
// each float64 sum in their order whatever G is.
//
// PARTS = 2 is route_cert.cu's approximate form: x's first two parts only
// (d·(p0 + p1/2^8): each element x less at most d/2^8, none more), int32
// sums, the groups' terms added in float32, each split's logits to y
// [split][T][ldy]; and per token and split the bound eps [split][T] of how
// far a logit may be from the exact one, over the split's groups
// d·gbound[group]·2^-7, gbound[group] at least any row's sum of
// |scale|·q + |bias| over the group (the truncation's d·2^-8 of it, and
// under 2^-10 of it for the float32 sums' roundings: twice over);
// infinite for a group holding a NaN or an infinity.
template <int WM, int WN, int NT, int G = 1, int S = QI_S, int PARTS = 4>
static __device__ __forceinline__ void qi_gemm(const QDesc* __restrict__ wd, const float* __restrict__ x,
                                               float* __restrict__ y, double* __restrict__ part, int T, int ldy,
                                               const float* __restrict__ gbound = nullptr,
                                               float* __restrict__ eps = nullptr) {
  static_assert(PARTS == 4 || PARTS == 2, "x in four parts (exact) or two (route_cert's bound)");
  constexpr int BM = 16 * WM, BN = 8 * NT * WN, THREADS = 32 * WM * WN;
  constexpr int X_BYTES = BM * 64 * 4, GROUP = X_BYTES + BN * QI_LD, STAGE = G * GROUP;
  static_assert(BM * 16 % THREADS == 0 && BM % (2 * WM * WN) == 0, "x's chunks and rows spread evenly");
  pdl_begin();
  extern __shared__ __attribute__((aligned(16))) unsigned char qi_smem[];
  const QDesc d = *wd;
  const u32 sbase = smem_u32(qi_smem);
  unsigned char* parts = qi_smem + S * STAGE;          // [G][4][BM][QI_LD]
  double* dsc = (double*)(parts + G * PARTS * BM * QI_LD);  // [G][BM] per token: d·2^-24 (PARTS = 2: d·2^-8)
  double* psum = dsc + G * BM;                          // [G][BM] per token: P summed over the group (NaN: not finite)
  double* sbs = psum + G * BM;                          // [G][BN] per weight row: scale, bias
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int wm = (warp / WN) * 16, wn = (warp % WN) * (8 * NT);  // the warp's tokens and rows in the tile
  const long long n0 = (long long)PETAL_BID_X() * BN;
  const int m0 = bid_y() * BM;
  const int wpg = 2 * d.bits;  // code words a group of 64
  const int groups = d.cols / 64, split = bid_z(), splits = nbid_z();
  const int g0 = split * groups / splits, g1 = (split + 1) * groups / splits;

  // load queues groups g0 + G·i .. + G-1's x rows and codes into stage i % S.
  auto load = [&](int i) __attribute__((always_inline)) {
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
      const int grp = g0 + G * i + gg;
      if (grp >= g1) break;
      const u32 st = sbase + (i % S) * STAGE + gg * GROUP;
#pragma unroll
      for (int j = 0; j < BM * 16 / THREADS; j++) {  // x: BM rows of 16 chunks
        const int ch = tid + THREADS * j, r = ch >> 4, k = ch & 15;
        const bool in = m0 + r < T;
        cp_async16(st + ch * 16, x + (long long)(in ? m0 + r : 0) * d.cols + grp * 64 + 4 * k, in);
      }
      const int per = d.bits / 2;  // chunks of 16 bytes a row's group: 4 (8-bit) or 2
#pragma unroll
      for (int j = 0; j < (BN * 4 + THREADS - 1) / THREADS; j++) {  // at most 4 chunks a row
        const int ch = tid + THREADS * j, r = ch / per, k = ch % per;
        if (r < BN) {
          const bool in = n0 + r < d.rows;
          cp_async16(st + X_BYTES + r * QI_LD + 16 * k, d.w + (in ? n0 + r : 0) * d.wpr + grp * wpg + 4 * k, in);
        }
      }
    }
    cp_commit();
  };
  // the next stage's scales and biases of row n0 + tid (tid < BN)
  u16 ns[G] = {}, nb[G] = {};
  auto fetch_sb = [&](int i) __attribute__((always_inline)) {
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
      const int grp = g0 + G * i + gg;
      if (tid < BN && grp < g1 && n0 + tid < d.rows) {
        ns[gg] = d.s[(n0 + tid) * d.gpr + grp];
        nb[gg] = d.b[(n0 + tid) * d.gpr + grp];
      }
    }
  };
#pragma unroll
  for (int i = 0; i < S - 1; i++) load(i);
  fetch_sb(0);

  double acc[NT][4] = {};  // [n8 tile][fragment element]
  float accf[NT][4] = {};  // PARTS = 2: the float32 sums
  float epsAcc[BM / (2 * WM * WN)] = {};  // PARTS = 2: the bounds of this thread's rows (lanes 0 and 16)
  for (int i = 0; g0 + G * i < g1; i++) {
    cp_wait<S - 2>();
    __syncthreads();  // stage i staged; every warp done with stage i - 1
    load(i + S - 1);
    const int live = imin(G, g1 - (g0 + G * i));  // the stage's groups (the last may have fewer)
    if (tid < BN) {
#pragma unroll
      for (int gg = 0; gg < G; gg++) {
        sbs[2 * (gg * BN + tid)] = (double)bf16_to_f32(ns[gg]);
        sbs[2 * (gg * BN + tid) + 1] = (double)bf16_to_f32(nb[gg]);
      }
    }
    fetch_sb(i + 1);
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
      if (gg >= live) break;
      const unsigned char* st = qi_smem + (i % S) * STAGE + gg * GROUP;
      unsigned char* gparts = parts + gg * PARTS * BM * QI_LD;
      // x's rows to parts: a half-warp a row, four columns a lane
#pragma unroll
      for (int pass = 0; pass < BM / (2 * WM * WN); pass++) {
        const int r = BM / (WM * WN) * warp + 2 * pass + (lane >> 4), l = lane & 15;
        const float4v v = *(const float4v*)(st + r * 256 + 16 * l);
        const float xv[4] = {v.x, v.y, v.z, v.w};
        // the largest magnitude by its bits: a NaN or an infinity above every finite value
        u32 mb = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) mb = umax(mb, __float_as_uint(xv[e]) & 0x7FFFFFFFu);
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) mb = umax(mb, (u32)shfl_xor_int((int)mb, o));
        // d = 2^(E-6) for the largest's exponent E (at least -120, so that
        // 1/d is a float32 too): |x|/d < 128
        const int E = imax((int)(mb >> 23) - 127, -120);
        const float inv = __uint_as_float((u32)(127 + 6 - E) << 23);
        u32 w[PARTS] = {};
        long long ps = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
          float f = xv[e] * inv;  // exact
          int p[PARTS];
#pragma unroll
          for (int k = 0; k < PARTS; k++) {
            const float t = floor_magic(f);
            p[k] = (int)(__float_as_uint(t) - 0x4B400000u);
            f = (f - (t - 12582912.f)) * 256.f;  // exact
            w[k] |= ((u32)p[k] & 0xFFu) << (8 * e);
          }
          if constexpr (PARTS == 4)
            ps += p[0] * 16777216 + p[1] * 65536 + p[2] * 256 + p[3];  // under 2^31 in magnitude
          else
            ps += p[0] * 256 + p[1];
        }
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) ps += (long long)shfl_xor_u64((unsigned long long)ps, o);
#pragma unroll
        for (int k = 0; k < PARTS; k++) *(u32*)(gparts + (k * BM + r) * QI_LD + 4 * l) = w[k];
        if (l == 0) {
          dsc[gg * BM + r] = __builtin_bit_cast(double, (unsigned long long)(1023 + E - 6 - (PARTS == 4 ? 24 : 8)) << 52);
          psum[gg * BM + r] = mb >= 0x7F800000u ? __builtin_nan("") : (double)ps;
          if constexpr (PARTS == 2)  // d·gbound·2^-7, d = 2^(E-6) (a float32 for E >= -120)
            epsAcc[pass] += mb >= 0x7F800000u
                                ? __builtin_inff()
                                : __uint_as_float((u32)(127 + E - 6) << 23) * gbound[g0 + G * i + gg] * 0.0078125f;
        }
      }
    }
    __syncthreads();  // the parts and the scales written
#pragma unroll
    for (int gg = 0; gg < G; gg++) {
      if (gg >= live) break;
      const unsigned char* st = qi_smem + (i % S) * STAGE + gg * GROUP;
      const unsigned char* gparts = parts + gg * PARTS * BM * QI_LD;
      const double* gsbs = sbs + 2 * gg * BN;
      // B fragments: the codes of rows wn + 8j + g, columns 32ks + 4c (+16)
      u32 b[2][NT][2];
#pragma unroll
      for (int ks = 0; ks < 2; ks++)
#pragma unroll
        for (int j = 0; j < NT; j++) {
          const unsigned char* cr = st + X_BYTES + (wn + 8 * j + g) * QI_LD;
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int k = 32 * ks + 16 * h + 4 * c;
            b[ks][j][h] = d.bits == 8 ? *(const u32*)(cr + k) : qi_nibbles(*(const u16*)(cr + k / 2));
          }
        }
      int ca[NT][4] = {}, cb[NT][4] = {};
#pragma unroll
      for (int p = 0; p < PARTS; p++) {
        if (p & 1) {
#pragma unroll
          for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
              if (p == 1) ca[j][e] *= 256;
              else cb[j][e] *= 256;
            }
        }
#pragma unroll
        for (int ks = 0; ks < 2; ks++) {
          const unsigned char* pr = gparts + (p * BM + wm + g) * QI_LD + 32 * ks + 4 * c;
          const u32 a[4] = {*(const u32*)pr, *(const u32*)(pr + 8 * QI_LD), *(const u32*)(pr + 16),
                            *(const u32*)(pr + 8 * QI_LD + 16)};
#pragma unroll
          for (int j = 0; j < NT; j++) {
            if (p == 0)
              mma_i8<true>(ca[j], a, b[ks][j][0], b[ks][j][1]);
            else
              mma_i8<false>(p == 1 ? ca[j] : cb[j], a, b[ks][j][0], b[ks][j][1]);
          }
        }
      }
      // the group's exact terms added to the float64 sums (PARTS = 2:
      // its terms, rounded, to the float32 ones)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = wm + g + 8 * (e >> 1);
        const double ds = dsc[gg * BM + r], pp = psum[gg * BM + r];
#pragma unroll
        for (int j = 0; j < NT; j++) {
          const int n = wn + 8 * j + 2 * c + (e & 1);
          if constexpr (PARTS == 4) {
            const double v = i64_to_f64((long long)ca[j][e] * 65536 + cb[j][e]);
            const double t = __builtin_fma(gsbs[2 * n], v, gsbs[2 * n + 1] * pp);
            acc[j][e] = __builtin_fma(t, ds, acc[j][e]);
          } else {
            const float t = __builtin_fmaf((float)gsbs[2 * n], (float)ca[j][e], (float)gsbs[2 * n + 1] * (float)pp);
            accf[j][e] = __builtin_fmaf(t, (float)ds, accf[j][e]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < NT; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int m = m0 + wm + g + 8 * (e >> 1);
      const long long n = n0 + wn + 8 * j + 2 * c + (e & 1);
      if (m >= T || n >= d.rows) continue;
      if constexpr (PARTS == 2)
        y[((long long)split * T + m) * ldy + n] = accf[j][e];
      else if (splits == 1)
        y[(long long)m * ldy + n] = (float)acc[j][e];
      else
        part[((long long)split * T + m) * ldy + n] = acc[j][e];
    }
  if constexpr (PARTS == 2) {
    if (PETAL_BID_X() == 0 && (lane & 15) == 0) {
#pragma unroll
      for (int pass = 0; pass < BM / (2 * WM * WN); pass++) {
        const int m = m0 + BM / (WM * WN) * warp + 2 * pass + (lane >> 4);
        if (m < T) eps[(long long)split * T + m] = epsAcc[pass];
      }
    }
  }
}

#define QI_KERNEL(name, threads, minb, ...)                                                       \
  extern "C" __global__ void __launch_bounds__(threads, minb)                                     \
      name(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y,      \
           double* __restrict__ part, int T, int ldy) {                                           \
    qi_gemm<__VA_ARGS__>(wd, x, y, part, T, ldy);                                                 \
  }
#ifndef QI_HELPERS_ONLY
// qgemm_i8: eight warps of 16 tokens x 32 rows, 32 x 128 a block
QI_KERNEL(qgemm_i8, 256, 2, 2, 4, 4)
#endif  // QI_HELPERS_ONLY
