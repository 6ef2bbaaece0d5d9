// route_f64.cu: prefill's router logits in float64 on the tensor cores with
// the next group of columns staged while this one's products run (the
// backend's router=f64d; written, not yet run on a GPU).
//
// qgemm_f64_d computes what ops.cu's qgemm_f64_h does, bit for bit: a 64 x
// 64 tile of logits (tokens x experts) a block of four warps, each 32 x 32
// as 2 x 4 m16n8k16 products a 16 columns, groups of 64 columns summed in
// order, every product exact and the sums float64's (ops.cu says why). It
// differs in where the operands wait: qgemm_f64_h stages a group (x turned
// to float64, the codes dequantised) into one buffer between two barriers,
// so no product runs while a group is staged; here two stages alternate,
// the next group stored into one while the products read the other, one
// barrier a group; and x stays float32 in shared memory (turned to float64
// as its fragments are read), a quarter less to read there. 2 x 52 KB of
// shared memory a block, two blocks a multiprocessor.
#include "f64mma.h"
#include "rowmath.h"

#define QD_K 64                 // columns a group: one scale and bias a row
#define QD_LX (QD_K + 4)        // floats: a row of x, rows 4 banks apart
#define QD_LW (QD_K + 4)        // doubles: a row of weights, rows 8 banks apart
#define QD_STAGE_X (64 * QD_LX * 4)
#define QD_STAGE (QD_STAGE_X + 64 * QD_LW * 8)
#define QD_SHARED (2 * QD_STAGE)  // the launch's dynamic shared memory

// Grid (ceil(R/64), ceil(T/64), S), block 128, QD_SHARED bytes of dynamic
// shared memory; C a multiple of 64; S > 1 splits the groups as qgemm_f64_h
// does, each split's float64 sums to part[z, T, ldy].
extern "C" __global__ void __launch_bounds__(128)
    qgemm_f64_d(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y,
                double* __restrict__ part, int T, int ldy) {
  pdl_begin();
  constexpr int BM = 64, BN = 64, XR = BM / 4;  // tokens, rows, token rows a warp stages
  constexpr int WORDS = BN * (QD_K / 4) / 128;   // a thread's words of codes a group, 8-bit (4-bit: half)
  extern __shared__ __attribute__((aligned(16))) unsigned char qd_smem[];
  const QDesc d = *wd;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;  // the warp's tokens and weight rows in the tile
  const int fr = lane >> 2, fk = lane & 3;                  // a fragment's row and k
  const long long n0 = (long long)PETAL_BID_X() * BN;
  const int m0 = bid_y() * BM;
  const int per = 32 / d.bits, wpg = QD_K / per;
  const u32 mask = (1u << d.bits) - 1u;
  const int groups = d.cols / QD_K, split = bid_z(), splits = nbid_z();
  const int g0 = split * groups / splits, g1 = (split + 1) * groups / splits;
  auto xs = [&](int st) __attribute__((always_inline)) { return (float (*)[QD_LX])(qd_smem + st * QD_STAGE); };
  auto ws = [&](int st) __attribute__((always_inline)) {
    return (double (*)[QD_LW])(qd_smem + st * QD_STAGE + QD_STAGE_X);
  };
  double acc[2][4][4] = {};  // [16-token tile][8-row tile][c0..c3 of m16n8k16]
  // a group's loads: XR tokens x 2 columns of x, and WORDS code words with
  // their rows' scales and biases
  float nx[2 * XR];
  u32 nw[WORDS];
  u16 ns[WORDS], nb[WORDS];
  auto fetch = [&](int grp) __attribute__((always_inline)) {
    qf_fetch<XR, WORDS, BN, QD_K>(d, x, T, m0, n0, grp, tid, warp, lane, wpg, nx, nw, ns, nb);
  };
  // store: the fetched group into stage st (x as it is, the weights
  // dequantised to float64: q·s + b, exact)
  auto store = [&](int st) __attribute__((always_inline)) {
    float (*sx)[QD_LX] = xs(st);
#pragma unroll
    for (int i = 0; i < XR; i++) {
      const int r = warp * XR + i;
      sx[r][lane] = nx[2 * i];
      sx[r][lane + 32] = nx[2 * i + 1];
    }
    qf_store_w<WORDS, BN>(d, ws(st), tid, wpg, per, mask, nw, ns, nb);
  };
  if (g0 < g1) {
    fetch(g0);
    store(0);
  }
  __syncthreads();
  for (int grp = g0; grp < g1; grp++) {
    const int cur = (grp - g0) & 1;
    const bool more = grp + 1 < g1;
    if (more) fetch(grp + 1);  // in flight during the products
    float (*sx)[QD_LX] = xs(cur);
    double (*sw)[QD_LW] = ws(cur);
#pragma unroll
    for (int k = 0; k < QD_K; k += 16) {
      double a[2][8], b[4][4];
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int e = 0; e < 8; e++) a[i][e] = (double)sx[wm + 16 * i + fr + 8 * (e & 1)][k + fk + 4 * (e >> 1)];
#pragma unroll
      for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) b[j][e] = sw[wn + 8 * j + fr][k + fk + 4 * e];
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) mma_f64_16(acc[i][j], a[i], b[j]);
    }
    // the other stage was last read in the iteration before, which every
    // warp ended at the barrier below
    if (more) store(cur ^ 1);
    __syncthreads();
  }
  // written as qf_gemm's M16 form writes them (split-K partials in float64)
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int m = m0 + wm + 16 * i + fr + 8 * (e >> 1);
        const long long n = n0 + wn + 8 * j + 2 * fk + (e & 1);
        if (m >= T || n >= d.rows) continue;
        if (splits == 1)
          y[(long long)m * ldy + n] = (float)acc[i][j][e];
        else
          part[((long long)split * T + m) * ldy + n] = acc[i][j][e];
      }
}
