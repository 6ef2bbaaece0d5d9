// ops.cu: plain kernels for every op of engine/backend at any number of rows
// (a prefill chunk or one token), any head size, bit width and group size
// the format allows: the CUDA backend's general path, where no fused decode
// kernel (qmv, route, moe, attn) takes the op. Each kernel is a row loop or
// a grid over rows, float32 throughout; the position is read on the device.
// Matrices come as QDesc tables (rowmath.h).
#include "f64mma.h"
#include "rope.h"
#include "rowmath.h"

// embed_rows: grid rows, block 256. out[r] = table row tokens[r]; an id
// outside the vocabulary gives a row of NaN.
extern "C" __global__ void __launch_bounds__(256)
    embed_rows(const QDesc* __restrict__ table, const int* __restrict__ tokens, float* __restrict__ out) {
  pdl_begin();
  const QDesc d = *table;
  const int r = PETAL_BID_X(), id = tokens[r];
  const bool ok = id >= 0 && id < d.rows;
  for (int c = PETAL_TID_X(); c < d.cols; c += PETAL_NTID_X())
    out[(long long)r * d.cols + c] = ok ? qweight(d, id, c) : f32_nan();
}

// add_rmsnorm: grid rows, block 256. h += delta (when given), then
// out = h/rms(h)·w.
extern "C" __global__ void __launch_bounds__(256)
    add_rmsnorm(float* __restrict__ h, const float* __restrict__ delta, const float* __restrict__ w,
                float* __restrict__ out, int dim, float eps) {
  pdl_begin();
  __shared__ float red[32];
  add_rmsnorm_row(h, delta, w, out, nullptr, dim, eps, red);
}

// qgemm: y[T, R] = x[T, C] · Wᵀ, a plain tiled GEMM with the weights
// dequantised into shared memory: tiles of TM weight rows × TN tokens,
// grid (ceil(R/TM), ceil(T/TN)), block 256 (16 × 16 threads, each TM/16
// weight rows × TN/16 tokens). y rows are ldy apart. qgemm has 64 × 64
// tiles; qgemm_s 32 × 32, four times the blocks, for the narrow products
// (the router's 256 logits, the shared expert's gate) that left most of
// the GPU idle with 64 × 64.
#define GK 64
template <int TM, int TN>
static __device__ __forceinline__ void qgemm_tiles(const QDesc* __restrict__ wd, const float* __restrict__ x,
                                                   float* __restrict__ y, int T, int ldy) {
  constexpr int PM = TM / 16, PN = TN / 16;
  __shared__ float ws[GK][TM + 4];
  __shared__ float xs[GK][TN + 4];
  const QDesc d = *wd;
  const int t = PETAL_TID_X(), tm = t & 15, tn = t >> 4;
  const long long m0 = (long long)PETAL_BID_X() * TM;
  const int n0 = bid_y() * TN;
  // each tile's products are summed apart and then added to the total:
  // the rounding grows with 64 + C/64 terms, not with C
  float acc[PM][PN] = {};
  for (int k0 = 0; k0 < d.cols; k0 += GK) {
    float part[PM][PN] = {};
    for (int e = t; e < TM * GK; e += 256) {
      const int m = e / GK, k = e % GK;
      const long long r = m0 + m;
      ws[k][m] = r < d.rows && k0 + k < d.cols ? qweight(d, r, k0 + k) : 0.f;
    }
    for (int e = t; e < TN * GK; e += 256) {
      const int n = e / GK, k = e % GK;
      xs[k][n] = n0 + n < T && k0 + k < d.cols ? x[(long long)(n0 + n) * d.cols + k0 + k] : 0.f;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < GK; k++) {
      float a[PM], b[PN];
#pragma unroll
      for (int i = 0; i < PM; i++) a[i] = ws[k][tm + 16 * i];
#pragma unroll
      for (int j = 0; j < PN; j++) b[j] = xs[k][tn + 16 * j];
#pragma unroll
      for (int i = 0; i < PM; i++)
#pragma unroll
        for (int j = 0; j < PN; j++) part[i][j] += a[i] * b[j];
    }
#pragma unroll
    for (int i = 0; i < PM; i++)
#pragma unroll
      for (int j = 0; j < PN; j++) acc[i][j] += part[i][j];
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < PM; i++)
#pragma unroll
    for (int j = 0; j < PN; j++) {
      const long long r = m0 + tm + 16 * i;
      const int n = n0 + tn + 16 * j;
      if (r < d.rows && n < T) y[(long long)n * ldy + r] = acc[i][j];
    }
}

extern "C" __global__ void __launch_bounds__(256)
    qgemm(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y, int T, int ldy) {
  pdl_begin();
  qgemm_tiles<64, 64>(wd, x, y, T, ldy);
}

extern "C" __global__ void __launch_bounds__(256)
    qgemm_s(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y, int T, int ldy) {
  pdl_begin();
  qgemm_tiles<32, 32>(wd, x, y, T, ldy);
}

// qgemm_f64: y[T, R] = x[T, C] · Wᵀ in float64 on the tensor cores (mma
// m8n8k4 .f64) for weights of groups of 64 (4- or 8-bit): the router's
// logits of a prefill chunk, which choose the experts. x widens to float64
// exactly, and so does each weight q·s + b (a code of at most 8 bits times
// a bf16 scale, plus a bf16 bias: exact for a scale and a bias less than
// 2^37 apart), so every product is exact and only float64 sums round: the
// logits are float64's over the checkpoint's weights, rounded once to
// float32. It replaced qgemm_codes (the codes exact in tf32 against x in two
// tf32 parts, float64 sums after every 8-column product: as close to the
// reference, and 87 us a layer at 512 tokens, 326 us at 4K, where this
// takes 48.5 and 223; docs/bench/cuda/2026-12-01-router4).
// Four warps a block, 2 x 2, each TM x TN tiles of 8 x 8 (tokens x rows):
// qgemm_f64 2 x 2 (a block 32 x 32, static shared memory), qgemm_f64_w
// 4 x 4 (64 x 64, QF_WIDE_SHARED bytes of dynamic shared memory), whose
// warps load half as many fragments a product: qgemm_f64 loads one double
// of shared memory an mma, about 145 bytes a cycle a multiprocessor at the
// float64 rate, above what shared memory gives (254 us a layer at 4096
// rows, 2026-12-06-stream1). Grid (ceil(R/BN), ceil(T/BM), S), block 128;
// C a multiple of 64. Each thread's loads of the next group are issued
// before the current group's products. With S > 1 the columns are split S
// ways (split-K): block z sums groups [z·G/S, (z+1)·G/S) in order and writes
// its float64 sums to part[z, T, ldy], which route_select adds in split
// order, so the logits are the same for the same S. One split took 48 us a
// layer whatever T up to 512 (32 groups one after another a block, 8
// blocks at 16 tokens): latency, not work.
#define QF_K 64
#define QF_LD (QF_K + 4)  // doubles: rows 8 banks apart, the fragments' loads conflict-free
#define QF_WIDE_SHARED (2 * 64 * QF_LD * 8)

static __device__ __forceinline__ void mma_f64(double* c, double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(c[0]), "+d"(c[1])
               : "d"(a), "d"(b));
}

template <int TM, int TN, bool M16 = false>
static __device__ __forceinline__ void qf_gemm(const QDesc* __restrict__ wd, const float* __restrict__ x,
                                               float* __restrict__ y, double* __restrict__ part, int T, int ldy,
                                               double (*__restrict__ xs)[QF_LD], double (*__restrict__ ws)[QF_LD]) {
  constexpr int BM = 16 * TM, BN = 16 * TN;          // the block's tokens and weight rows
  constexpr int XR = BM / 4;                         // token rows a warp stages
  constexpr int WORDS = BN * (QF_K / 4) / 128;       // a thread's words of codes a group, 8-bit (4-bit: half)
  const QDesc d = *wd;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int wm = (warp >> 1) * TM * 8, wn = (warp & 1) * TN * 8;  // the warp's tokens and weight rows in the tile
  const int fr = lane >> 2, fk = lane & 3;                        // a fragment's row and k (A and B alike)
  const long long n0 = (long long)PETAL_BID_X() * BN;
  const int m0 = bid_y() * BM;
  const int per = 32 / d.bits, wpg = QF_K / per;
  const u32 mask = (1u << d.bits) - 1u;
  const int groups = d.cols / QF_K, split = bid_z(), splits = nbid_z();
  const int g0 = split * groups / splits, g1 = (split + 1) * groups / splits;
  // [token tile][row tile][the fragment's two columns]; under M16
  // [16-token tile][row tile][c0..c3 of m16n8k16]
  double acc[M16 ? TM / 2 : TM][TN][M16 ? 4 : 2] = {};
  // the next group's loads: XR tokens x 2 columns of x, and WORDS code words
  // with their rows' scales and biases
  float nx[2 * XR];
  u32 nw[WORDS];
  u16 ns[WORDS], nb[WORDS];
  auto fetch = [&](int grp) __attribute__((always_inline)) {
    qf_fetch<XR, WORDS, BN, QF_K>(d, x, T, m0, n0, grp, tid, warp, lane, wpg, nx, nw, ns, nb);
  };
  fetch(g0);
  for (int grp = g0; grp < g1; grp++) {
#pragma unroll
    for (int i = 0; i < XR; i++) {
      const int r = warp * XR + i;
      xs[r][lane] = (double)nx[2 * i];
      xs[r][lane + 32] = (double)nx[2 * i + 1];
    }
    qf_store_w<WORDS, BN>(d, ws, tid, wpg, per, mask, nw, ns, nb);
    __syncthreads();
    if (grp + 1 < g1) fetch(grp + 1);  // in flight during the products
    if constexpr (M16) {
#pragma unroll
      for (int k = 0; k < QF_K; k += 16) {
        double a[TM / 2][8], b[TN][4];
#pragma unroll
        for (int i = 0; i < TM / 2; i++)
#pragma unroll
          for (int e = 0; e < 8; e++) a[i][e] = xs[wm + 16 * i + fr + 8 * (e & 1)][k + fk + 4 * (e >> 1)];
#pragma unroll
        for (int j = 0; j < TN; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) b[j][e] = ws[wn + 8 * j + fr][k + fk + 4 * e];
#pragma unroll
        for (int i = 0; i < TM / 2; i++)
#pragma unroll
          for (int j = 0; j < TN; j++) mma_f64_16(acc[i][j], a[i], b[j]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < QF_K; k += 4) {
        double a[TM], b[TN];
#pragma unroll
        for (int i = 0; i < TM; i++) a[i] = xs[wm + 8 * i + fr][k + fk];
#pragma unroll
        for (int j = 0; j < TN; j++) b[j] = ws[wn + 8 * j + fr][k + fk];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
          for (int j = 0; j < TN; j++) mma_f64(acc[i][j], a[i], b[j]);
      }
    }
    __syncthreads();  // before the next group is staged over this one
  }
  constexpr int TI = M16 ? TM / 2 : TM, TE = M16 ? 4 : 2;
#pragma unroll
  for (int i = 0; i < TI; i++)
#pragma unroll
    for (int j = 0; j < TN; j++)
#pragma unroll
      for (int e = 0; e < TE; e++) {
        const int m = M16 ? m0 + wm + 16 * i + fr + 8 * (e >> 1) : m0 + wm + 8 * i + fr;
        const long long n = n0 + wn + 8 * j + 2 * fk + (e & 1);
        if (m >= T || n >= d.rows) continue;
        if (splits == 1)
          y[(long long)m * ldy + n] = (float)acc[i][j][e];
        else
          part[((long long)split * T + m) * ldy + n] = acc[i][j][e];
      }
}

extern "C" __global__ void __launch_bounds__(128)
    qgemm_f64(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y,
              double* __restrict__ part, int T, int ldy) {
  pdl_begin();
  __shared__ double xs[32][QF_LD], ws[32][QF_LD];
  qf_gemm<2, 2>(wd, x, y, part, T, ldy, xs, ws);
}

extern "C" __global__ void __launch_bounds__(128)
    qgemm_f64_w(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y,
                double* __restrict__ part, int T, int ldy) {
  pdl_begin();
  extern __shared__ double qf_smem[];
  qf_gemm<4, 4>(wd, x, y, part, T, ldy, (double (*)[QF_LD])qf_smem, (double (*)[QF_LD])(qf_smem + 64 * QF_LD));
}

// qgemm_f64_h: qgemm_f64_w with its products as m16n8k16 (sm_90's float64
// shapes) in place of m8n8k4: each warp's 32 x 32 as 2 x 4 products a 16
// columns, the same fragments' loads a column. On an H100 175 us at 4096
// rows against qgemm_f64_w's 227, 44 at 512 against 52 (2026-12-06-
// router5). The sums of a product run in another order than m8n8k4's four,
// so the logits may differ from qgemm_f64_w's in their last float64 bits.
extern "C" __global__ void __launch_bounds__(128)
    qgemm_f64_h(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y,
                double* __restrict__ part, int T, int ldy) {
  pdl_begin();
  extern __shared__ double qf_smem[];
  qf_gemm<4, 4, true>(wd, x, y, part, T, ldy, (double (*)[QF_LD])qf_smem,
                      (double (*)[QF_LD])(qf_smem + 64 * QF_LD));
}

// qgemm_rows: y[T, R] = x[T, C] · Wᵀ for a matrix of a few rows (the shared
// expert's gate has one), a warp per (token, row), 4- or 8-bit with groups
// of whole words. qgemm_s's 32 x 32 tiles left 31 of 32 rows idle there
// and took 100 us a layer at 512 tokens (ktrace1). Grid ceil(T·R/8),
// block 256.
extern "C" __global__ void __launch_bounds__(256)
    qgemm_rows(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y, int T, int ldy) {
  pdl_begin();
  const QDesc d = *wd;
  const long long task = (long long)PETAL_BID_X() * 8 + (PETAL_TID_X() >> 5);
  if (task >= (long long)T * d.rows) return;  // whole warps
  const long long tok = task / d.rows;
  const int r = (int)(task % d.rows);
  const float v = qrow_dot(d, r, x + tok * d.cols);
  if ((PETAL_TID_X() & 31) == 0) y[tok * ldy + r] = v;
}

// conv_silu: grid (ceil(C/256), ceil(rows/CONV_ROWS)), a thread per
// channel and block of CONV_ROWS rows: the causal depthwise conv of width K
// (at most 16, so CONV_ROWS >= K-1) over [state; x], SiLU. A block's
// window starts in x, or for the first block in the state; the first
// block also advances the state to the last K-1 inputs once it has read
// it (no other block reads it). One thread walking all the rows of its
// channel left the GPU nearly idle in prefill (32 blocks for 8192
// channels).
#define CONV_ROWS 32
extern "C" __global__ void __launch_bounds__(256)
    conv_silu(const float* __restrict__ x, float* __restrict__ state, const float* __restrict__ w,
              float* __restrict__ out, int rows, int C, int K) {
  pdl_begin();
  const int c = PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  if (c >= C) return;
  const int r0 = PETAL_BID_Y() * CONV_ROWS, r1 = imin(rows, r0 + CONV_ROWS);
  // the input at row i (negative: the state's rows)
#define CONV_IN(i) ((i) >= 0 ? x[(long long)(i) * C + c] : state[(long long)((i) + K - 1) * C + c])
  if (K == 4) {
    // The Qwen3.5 / 3.6 Gated DeltaNet's width: the window in registers
    // (the loops below keep it in local memory, K being known only at run
    // time) and the rows' loads free to run ahead.
    const float w0 = w[c * 4LL], w1 = w[c * 4LL + 1], w2 = w[c * 4LL + 2], w3 = w[c * 4LL + 3];
    float a = CONV_IN(r0 - 3), b = CONV_IN(r0 - 2), d = CONV_IN(r0 - 1);
    // the sums in the order of the loops below
    auto conv = [&](float p0, float p1, float p2, float xv)
                    __attribute__((always_inline)) { return conv4_silu(w0, w1, w2, w3, p0, p1, p2, xv); };
    int r = r0;
    for (; r + 4 <= r1; r += 4) {  // four rows' loads in flight at once
      const float* xr = x + (long long)r * C + c;
      const float x0 = xr[0], x1 = xr[C], x2 = xr[2LL * C], x3 = xr[3LL * C];
      float* o = out + (long long)r * C + c;
      o[0] = conv(a, b, d, x0);
      o[C] = conv(b, d, x0, x1);
      o[2LL * C] = conv(d, x0, x1, x2);
      o[3LL * C] = conv(x0, x1, x2, x3);
      a = x1, b = x2, d = x3;
    }
    for (; r < r1; r++) {
      const float xv = x[(long long)r * C + c];
      out[(long long)r * C + c] = conv(a, b, d, xv);
      a = b, b = d, d = xv;
    }
    if (r0 == 0)
      for (int j = 0; j < 3; j++) state[(long long)j * C + c] = CONV_IN(rows - 3 + j);
    return;
  }
  float wk[16], win[16];
  for (int j = 0; j < K; j++) wk[j] = w[(long long)c * K + j];
  for (int j = 0; j < K - 1; j++) win[j] = CONV_IN(r0 - (K - 1) + j);
  for (int r = r0; r < r1; r++) {
    const float xv = x[(long long)r * C + c];
    float s = wk[K - 1] * xv;
    for (int j = 0; j < K - 1; j++) s += wk[j] * win[j];
    out[(long long)r * C + c] = fsilu(s);
    for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
    if (K > 1) win[K - 2] = xv;
  }
  if (r0 == 0) {
    // row rows-(K-1)+j of the input; where that is still in the state
    // (rows < K-1) it is a later row of it than j, not yet overwritten
    for (int j = 0; j < K - 1; j++) state[(long long)j * C + c] = CONV_IN(rows - (K - 1) + j);
  }
#undef CONV_IN
}

// delta_rule: the gated delta rule token by token; a warp owns row a of
// value head j's state (rows are independent given q, k, beta and g), its
// Dk (at most 256) columns in registers, 8 per lane. Grid ceil(Hv·Dv/8),
// block 256. Each warp computes its head's norms and gates itself.
#define DR_PER 8
extern "C" __global__ void __launch_bounds__(256)
    delta_rule(const float* __restrict__ qkv, const float* __restrict__ bb, const float* __restrict__ aa,
               const float* __restrict__ aLog, const float* __restrict__ dtBias, float* __restrict__ state,
               float* __restrict__ out, int rows, int Hk, int Dk, int Hv, int Dv) {
  pdl_begin();
  const int lane = PETAL_TID_X() & 31;
  const int task = PETAL_BID_X() * (PETAL_NTID_X() >> 5) + (PETAL_TID_X() >> 5);
  if (task >= Hv * Dv) return;
  const int j = task / Dv, a = task % Dv, kh = j / (Hv / Hk);
  const int width = 2 * Hk * Dk + Hv * Dv;
  float* srow = state + ((long long)j * Dv + a) * Dk;
  float s[DR_PER];
#pragma unroll
  for (int i = 0; i < DR_PER; i++) {
    const int c = lane + 32 * i;
    s[i] = c < Dk ? srow[c] : 0.f;
  }
  const double decay = dexp((double)aLog[j]);
  const float qscale = 1.f / __builtin_sqrtf((float)Dk);
  for (int r = 0; r < rows; r++) {
    const float* row = qkv + (long long)r * width;
    float q[DR_PER], k[DR_PER], qs = 0.f, ks = 0.f;
#pragma unroll
    for (int i = 0; i < DR_PER; i++) {
      const int c = lane + 32 * i;
      q[i] = c < Dk ? row[kh * Dk + c] : 0.f;
      k[i] = c < Dk ? row[(Hk + kh) * Dk + c] : 0.f;
      qs += q[i] * q[i];
      ks += k[i] * k[i];
    }
    qs = warp_sum(qs), ks = warp_sum(ks);
    const float qinv = qscale / __builtin_sqrtf(qs + 1e-6f), kinv = 1.f / __builtin_sqrtf(ks + 1e-6f);
    const float v = row[2 * Hk * Dk + j * Dv + a];
    const float beta = (float)dsigmoid((double)bb[(long long)r * Hv + j]);
    const float g = (float)dexp(-decay * dsoftplus((double)aa[(long long)r * Hv + j] + (double)dtBias[j]));
    float sk = 0.f;
#pragma unroll
    for (int i = 0; i < DR_PER; i++) {
      k[i] *= kinv, q[i] *= qinv;
      s[i] *= g;
      sk += s[i] * k[i];
    }
    sk = warp_sum(sk);
    const float dlt = beta * (v - sk);
    float o = 0.f;
#pragma unroll
    for (int i = 0; i < DR_PER; i++) {
      s[i] += dlt * k[i];
      o += s[i] * q[i];
    }
    o = warp_sum(o);
    if (lane == 0) out[((long long)r * Hv + j) * Dv + a] = o;
  }
#pragma unroll
  for (int i = 0; i < DR_PER; i++) {
    const int c = lane + 32 * i;
    if (c < Dk) srow[c] = s[i];
  }
}

// gated_rmsnorm: a warp per (row, head) of dim values: x/rms(x)·w·silu(z).
extern "C" __global__ void __launch_bounds__(256)
    gated_rmsnorm(const float* __restrict__ x, const float* __restrict__ z, const float* __restrict__ w,
                  float* __restrict__ out, int count, int dim, float eps) {
  pdl_begin();
  gated_rmsnorm_task(x, z, w, out, nullptr, count, dim, eps);
}

// qk_prep_rows: grid (QH+KVH, rows), block 32·ceil(D/32) (D at most 1024),
// dynamic shared memory D floats. Block (h, r) norms head h of row r (a
// query head, or key head h-QH), rotates it at position *pos + r, and
// writes the query, or the key and value into the caches at that row (no
// write at or past maxPos).
template <typename T>
static __device__ __forceinline__ void qk_prep_rows(const float* __restrict__ qg, const float* __restrict__ k,
                                                    const float* __restrict__ v, const float* __restrict__ qn,
                                                    const float* __restrict__ kn, float* __restrict__ q, T* kc,
                                                    T* vc, const int* __restrict__ pos, int maxPos,
                                                    const double* __restrict__ invFreq, int QH, int KVH, int D,
                                                    int rot, float eps) {
  extern __shared__ float xn[];
  __shared__ float red[32];
  const int d = PETAL_TID_X(), h = PETAL_BID_X(), r = bid_y();
  const bool isQ = h < QH;
  const int g = h - QH;
  float x = 0.f;
  if (d < D) x = isQ ? qg[((long long)r * QH + h) * 2 * D + d] : k[((long long)r * KVH + g) * D + d];
  const float ss = block_sum(x * x, red);
  const float y = d < D ? x * (1.f / __builtin_sqrtf(ss / D + eps)) * (isQ ? qn[d] : kn[d]) : 0.f;
  if (d < D) xn[d] = y;
  __syncthreads();
  if (d >= D) return;
  float out = y;
  const int p = *pos + r, half = rot / 2;
  if (d < rot) {
    const int i = d < half ? d : d - half;
    double sd, cd;
    sincos_exact((double)p * invFreq[i], sd, cd);
    const float sn = (float)sd, cs = (float)cd;
    const float x1 = xn[i], x2 = xn[i + half];
    out = d < half ? x1 * cs - x2 * sn : x1 * sn + x2 * cs;
  }
  if (isQ) {
    q[((long long)r * QH + h) * D + d] = out;
  } else if (p < maxPos) {
    const long long at = ((long long)p * KVH + g) * D + d;
    kv_put<T>(kc + at, out);
    kv_put<T>(vc + at, v[((long long)r * KVH + g) * D + d]);
  }
}

#define QK_PREP_ROWS(NAME, T)                                                                                  \
  extern "C" __global__ void __launch_bounds__(1024)                                                          \
      NAME(const float* qg, const float* k, const float* v, const float* qn, const float* kn, float* q, T* kc, \
           T* vc, const int* pos, int maxPos, const double* invFreq, int QH, int KVH, int D, int rot, float eps) { pdl_begin(); \
    qk_prep_rows<T>(qg, k, v, qn, kn, q, kc, vc, pos, maxPos, invFreq, QH, KVH, D, rot, eps);                  \
  }
QK_PREP_ROWS(qk_prep_rows_f32, float)
QK_PREP_ROWS(qk_prep_rows_bf16, u16)

// attn_rows: a warp per (row, query head), grid ceil(rows·QH/8), block
// 256: causal attention over cache rows 0..*pos+row with an online
// softmax in float32, the head's D (at most 32·J) values J per lane, then
// times sigmoid of the gate that follows the query in qg.
template <typename T, int J>
static __device__ __forceinline__ void attn_rows(const float* __restrict__ q, const float* __restrict__ qg,
                                                 const T* __restrict__ kc, const T* __restrict__ vc,
                                                 const int* __restrict__ pos, float* __restrict__ out, int rows,
                                                 int QH, int KVH, int D) {
  const int lane = PETAL_TID_X() & 31;
  const int task = PETAL_BID_X() * (PETAL_NTID_X() >> 5) + (PETAL_TID_X() >> 5);
  if (task >= rows * QH) return;
  const int r = task / QH, h = task % QH, kv = h / (QH / KVH);
  const int n = *pos + r + 1;
  const float scale = 1.4426950408889634f / __builtin_sqrtf((float)D);  // scores in log2 units
  float qv[J], acc[J];
#pragma unroll
  for (int i = 0; i < J; i++) {
    const int c = lane + 32 * i;
    qv[i] = c < D ? q[((long long)r * QH + h) * D + c] * scale : 0.f;
    acc[i] = 0.f;
  }
  float m = -__builtin_inff(), l = 0.f;
  const long long stride = (long long)KVH * D;
  for (int s = 0; s < n; s++) {
    const T* kr = kc + s * stride + kv * D;
    const T* vr = vc + s * stride + kv * D;
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < J; i++) {
      const int c = lane + 32 * i;
      if (c < D) dot += qv[i] * kv_get(kr + c);
    }
    dot = warp_sum(dot);
    const float mn = __builtin_fmaxf(m, dot);
    float c, p;
    asm("ex2.approx.f32 %0, %1;" : "=f"(c) : "f"(m - mn));
    asm("ex2.approx.f32 %0, %1;" : "=f"(p) : "f"(dot - mn));
    l = l * c + p;
#pragma unroll
    for (int i = 0; i < J; i++) {
      const int cc = lane + 32 * i;
      acc[i] = acc[i] * c + (cc < D ? p * kv_get(vr + cc) : 0.f);
    }
    m = mn;
  }
#pragma unroll
  for (int i = 0; i < J; i++) {
    const int c = lane + 32 * i;
    if (c < D) {
      const float gate = qg[((long long)r * QH + h) * 2 * D + D + c];
      out[((long long)r * QH + h) * D + c] = acc[i] / l * fsigmoid(gate);
    }
  }
}

#define ATTN_ROWS(NAME, T, J)                                                                                 \
  extern "C" __global__ void __launch_bounds__(256) NAME(const float* q, const float* qg, const T* kc,        \
                                                         const T* vc, const int* pos, float* out, int rows,   \
                                                         int QH, int KVH, int D) { pdl_begin();               \
    attn_rows<T, J>(q, qg, kc, vc, pos, out, rows, QH, KVH, D);                                               \
  }
ATTN_ROWS(attn_rows_f32_j2, float, 2)
ATTN_ROWS(attn_rows_f32_j4, float, 4)
ATTN_ROWS(attn_rows_f32_j8, float, 8)
ATTN_ROWS(attn_rows_f32_j16, float, 16)
ATTN_ROWS(attn_rows_bf16_j2, u16, 2)
ATTN_ROWS(attn_rows_bf16_j4, u16, 4)
ATTN_ROWS(attn_rows_bf16_j8, u16, 8)
ATTN_ROWS(attn_rows_bf16_j16, u16, 16)

// route_select: a warp per row of router logits [rows, E] (grid rows,
// block 32, dynamic shared memory E bytes): the topK largest logits (the
// lower id first on ties; NaN never chosen first), their softmax
// probabilities over all E (float64 from the float32 logits),
// renormalised over the chosen when normalize. With splits > 0 the row's
// logits are first the sums of qgemm_f64's split partials part[splits,
// rows, E], added in split order and rounded once to float32.
extern "C" __global__ void __launch_bounds__(32)
    route_select(float* __restrict__ logits, const double* __restrict__ part, int* __restrict__ ids,
                 float* __restrict__ wts, int E, int topK, int normalize, int splits) {
  pdl_begin();
  extern __shared__ unsigned char taken[];
  const int lane = PETAL_TID_X(), r = PETAL_BID_X(), rows = PETAL_NCTAID_X();
  float* l = logits + (long long)r * E;
  if (splits > 0) {
    for (int e = lane; e < E; e += 32) {
      double v = 0;
      for (int z = 0; z < splits; z++) v += part[((long long)z * rows + r) * E + e];
      l[e] = (float)v;
    }
    __syncwarp();  // the row, written by the warp's lanes, read by all of them below
  }
  float m = -__builtin_inff();
  for (int e = lane; e < E; e += 32) {
    taken[e] = 0;
    if (!is_nan(l[e])) m = __builtin_fmaxf(m, l[e]);
  }
  m = warp_max(m);
  double sum = 0;
  for (int e = lane; e < E; e += 32)
    if (!is_nan(l[e])) sum += dexp((double)l[e] - m);
  for (int o = 16; o > 0; o >>= 1) sum += shfl_xor_f64(sum, o);
  __syncwarp();
  double chosen = 0;
  for (int k = 0; k < topK; k++) {
    // best key: the logit's order, then the lower id
    unsigned long long best = 0;
    for (int e = lane; e < E; e += 32) {
      if (taken[e]) continue;
      const unsigned long long key = rank_key(l[e], e);
      best = key > best ? key : best;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const unsigned long long u = shfl_xor_u64(best, o);
      best = u > best ? u : best;
    }
    const int e = best == 0 ? 0 : rank_id(best);  // 0: nothing but NaN left
    const double p = dexp((double)l[e] - m) / sum;
    if (lane == 0) {
      taken[e] = 1;
      ids[(long long)r * topK + k] = e;
      wts[(long long)r * topK + k] = (float)p;
    }
    chosen += p;
    __syncwarp();
  }
  if (normalize) {
    for (int k = lane; k < topK; k += 32) {
      const int e = ids[(long long)r * topK + k];  // its weight again in float64, over the chosen total
      wts[(long long)r * topK + k] = (float)(dexp((double)l[e] - m) / sum / chosen);
    }
  }
}

// experts_gate_up: a warp per task, grid ceil(tasks/8), block 256. Per row
// t of x there are topK·inter routed tasks (slot k, row i of expert
// ids[t,k]'s gate and up), sinter shared-expert tasks and one for the
// shared expert gate's logit: h[t] = [silu(g)·u per slot and row | shared],
// logit[t]. An expert id outside the stack gives NaN.
extern "C" __global__ void __launch_bounds__(256)
    experts_gate_up(const QDesc* __restrict__ descs, const int* __restrict__ ids, const float* __restrict__ x,
                    float* __restrict__ h, float* __restrict__ logit, int rows, int topK, int inter, int sinter) {
  pdl_begin();
  const int lane = PETAL_TID_X() & 31;
  const long long task = (long long)PETAL_BID_X() * (PETAL_NTID_X() >> 5) + (PETAL_TID_X() >> 5);
  const int per = topK * inter + sinter + 1;
  if (task >= (long long)rows * per) return;
  const int t = (int)(task / per), u = (int)(task % per);
  const QDesc gate = descs[0];
  const float* xr = x + (long long)t * gate.cols;
  const long long hb = (long long)t * (topK * inter + sinter);
  if (u < topK * inter) {
    const int k = u / inter, i = u % inter;
    const int e = ids[(long long)t * topK + k];
    if (e < 0 || (long long)(e + 1) * inter > gate.rows) {
      if (lane == 0) h[hb + u] = f32_nan();
      return;
    }
    const float g = qrow_dot(gate, (long long)e * inter + i, xr);
    const QDesc up = descs[1];
    const float v = qrow_dot(up, (long long)e * inter + i, xr);
    if (lane == 0) h[hb + u] = fsilu(g) * v;
  } else if (u < topK * inter + sinter) {
    const int i = u - topK * inter;
    const QDesc sgate = descs[2], sup = descs[3];
    const float g = qrow_dot(sgate, i, xr);
    const float v = qrow_dot(sup, i, xr);
    if (lane == 0) h[hb + u] = fsilu(g) * v;
  } else {
    const QDesc seg = descs[4];
    const float s = qrow_dot(seg, 0, xr);
    if (lane == 0) logit[t] = s;
  }
}

// experts_down: a warp per (row t, output d), grid ceil(rows·dim/8), block
// 256: Σ_k wts[t,k]·down_{ids[t,k]}[d]·h[t,k] + sigmoid(logit[t])·sdown[d]·h[t,shared].
extern "C" __global__ void __launch_bounds__(256)
    experts_down(const QDesc* __restrict__ descs, const int* __restrict__ ids, const float* __restrict__ wts,
                 const float* __restrict__ h, const float* __restrict__ logit, float* __restrict__ out, int rows,
                 int dim, int topK, int inter, int sinter) {
  pdl_begin();
  const int lane = PETAL_TID_X() & 31;
  const long long task = (long long)PETAL_BID_X() * (PETAL_NTID_X() >> 5) + (PETAL_TID_X() >> 5);
  if (task >= (long long)rows * dim) return;
  const int t = (int)(task / dim), d = (int)(task % dim);
  const QDesc down = descs[5], sdown = descs[6];
  const float* ht = h + (long long)t * (topK * inter + sinter);
  float acc = 0.f;
  for (int k = 0; k < topK; k++) {
    const int e = ids[(long long)t * topK + k];
    if (e < 0 || (long long)(e + 1) * dim > down.rows) {
      acc = f32_nan();
      break;
    }
    acc += wts[(long long)t * topK + k] * qrow_dot(down, (long long)e * dim + d, ht + k * inter);
  }
  acc += fsigmoid(logit[t]) * qrow_dot(sdown, d, ht + topK * inter);
  if (lane == 0) out[task] = acc;
}

// advance: *pos += by.
extern "C" __global__ void advance(int* pos, int by) {
  pdl_begin(); *pos += by; }

// convert: dst[i] = src[i] between float types (0 f32, 1 bf16, 2 f16),
// rounding to nearest even as backend.Round does.
static __device__ __forceinline__ float load_as_f32(const void* p, long long i, int t) {
  if (t == 0) return ((const float*)p)[i];
  const u16 b = ((const u16*)p)[i];
  if (t == 1) return bf16_to_f32(b);
  float f;
  asm("{.reg .f16 h;\n\tmov.b16 h, %1;\n\tcvt.f32.f16 %0, h;}" : "=f"(f) : "h"(b));
  return f;
}
static __device__ __forceinline__ void store_from_f32(void* p, long long i, int t, float v) {
  if (t == 0) {
    ((float*)p)[i] = v;
    return;
  }
  u16 r;
  if (t == 1)
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(v));
  else
    asm("{.reg .f16 h;\n\tcvt.rn.f16.f32 h, %1;\n\tmov.b16 %0, h;}" : "=h"(r) : "f"(v));
  ((u16*)p)[i] = r;
}
extern "C" __global__ void __launch_bounds__(256)
    convert(const void* __restrict__ src, void* __restrict__ dst, long long n, int from, int to) {
  pdl_begin();
  const long long i = (long long)PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  if (i < n) store_from_f32(dst, i, to, load_as_f32(src, i, from));
}
