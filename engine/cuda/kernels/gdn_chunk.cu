// gdn_chunk.cu: the gated delta rule of prefill in its chunked form (spec
// 2.6): blocks of GC_C tokens, each a few matrix products against the
// state at the block's start instead of a pass over the state per token.
// Per block of n tokens, with G[i] the sum of the log-gates up to token i
// and γ_i = e^G[i]:
//
//	R[i]    = beta_i·(v_i - γ_i·S0·k_i)
//	A[i][m] = beta_i·(k_i·k_m)·e^(G[i]-G[m])          (m < i)
//	Vn      = (I + A)^-1 R                             (forward substitution)
//	o_i     = γ_i·S0·q_i + Σ_{m<=i} (q_i·k_m)·e^(G[i]-G[m])·Vn[m]
//	S_end   = γ_{n-1}·S0 + Σ_m e^(G[n-1]-G[m])·Vn[m] ⊗ k_m
//
// Rows of the state are independent given the keys and gates, so a block
// of threads owns GC_VT rows of one value head's state (kept in shared
// memory in float32 for the whole op) and recomputes its head's k·k and
// q·k: grid Hv·(128/GC_VT), GC_THREADS threads, GC_SHARED bytes of dynamic
// shared memory.
//
// Every product (k·k, q·k, S0·k, S0·q, the decayed q·k times Vn, and the
// state update Vnᵀ·K) runs on mma.sync m16n8k16 with each float32 operand
// split into two bf16 parts, hi + lo, and three products (hi·hi, hi·lo,
// lo·hi): about 2^-17 relative per operand, float32's accuracy to within
// a few ulps, where a single bf16 product (2^-9) would leave the state
// off by about 3e-3 after every block. The triangular solve, short and
// sequential, is in float32 FMA. The decays e^(G[i]-G[m]) are exponentials
// of differences of the log-gates summed in float64, never quotients of
// γ, so they neither overflow nor lose digits.
//
// GC_C = 32: the solve's sequential depth grows with the block length and
// the number of blocks (each with a few barriers and a round of products
// against the state) shrinks with it; 32 keeps both short, is two mma row
// tiles, and keeps the shared memory at 79 KB.
#include "rowmath.h"

#define GC_D 128
#define GC_C 32
#define GC_VT 32
#define GC_THREADS 128
#define GC_LK (GC_D + 4)
#define GC_LC (GC_C + 4)
#define GC_LV (GC_VT + 4)
// shared memory: G (doubles) first, then Kb, Qb [C][LK], Sb [VT][LK],
// Am, Mm [C][LC], Rb, Vn, Wb, Ob [C][LV], beta, gam, dec [C]
#define GC_FLOATS (2 * GC_C + 2 * GC_C * GC_LK + GC_VT * GC_LK + 2 * GC_C * GC_LC + 4 * GC_C * GC_LV + 3 * GC_C)
#define GC_SHARED (4 * GC_FLOATS)

static __device__ __forceinline__ void gc_mma(float* c, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// gc_pack rounds (lo, hi) to bf16, nearest even, lo in the low half.
static __device__ __forceinline__ u32 gc_pack(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

// gc_split makes x0 and x1 two bf16 pairs, hi and the rest lo.
static __device__ __forceinline__ void gc_split(float x0, float x1, u32& hi, u32& lo) {
  hi = gc_pack(x0, x1);
  lo = gc_pack(x0 - bf16_to_f32((u16)(hi & 0xffff)), x1 - bf16_to_f32((u16)(hi >> 16)));
}

// GcMat is a float32 matrix in shared memory: element (r, c) at p[r*rs + c*cs].
struct GcMat {
  const float* p;
  int rs, cs;
  __device__ __forceinline__ float at(int r, int c) const { return p[r * rs + c * cs]; }
};

// gc_tile: c += A[r0:r0+16, 0:K] · B[0:K, n0:n0+8] for one warp, c in the
// m16n8 accumulator layout (c0, c1 at row g, cols 2t, 2t+1; c2, c3 at row
// g+8), K a multiple of 16.
template <int K>
static __device__ __forceinline__ void gc_tile(float* c, GcMat A, int r0, GcMat B, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 4
  for (int k0 = 0; k0 < K; k0 += 16) {
    const int k = k0 + 2 * t;
    u32 ah[4], al[4], b0h, b0l, b1h, b1l;
    gc_split(A.at(r0 + g, k), A.at(r0 + g, k + 1), ah[0], al[0]);
    gc_split(A.at(r0 + g + 8, k), A.at(r0 + g + 8, k + 1), ah[1], al[1]);
    gc_split(A.at(r0 + g, k + 8), A.at(r0 + g, k + 9), ah[2], al[2]);
    gc_split(A.at(r0 + g + 8, k + 8), A.at(r0 + g + 8, k + 9), ah[3], al[3]);
    gc_split(B.at(k, n0 + g), B.at(k + 1, n0 + g), b0h, b0l);
    gc_split(B.at(k + 8, n0 + g), B.at(k + 9, n0 + g), b1h, b1l);
    gc_mma(c, al, b0h, b1h);
    gc_mma(c, ah, b0l, b1l);
    gc_mma(c, ah, b0h, b1h);
  }
}

// gc_dyn_smem is the dynamic shared memory of the launch, in bytes.
static __device__ __forceinline__ u32 gc_dyn_smem() {
  u32 n;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
}

// gdn_chunk runs the delta rule of DeltaRule (ops.go) over rows tokens for
// heads of 128 keys and 128 values: q and k L2-normalised (q scaled by
// 128^-1/2), beta = sigmoid(b), log g = -exp(A_log)·softplus(a + dt_bias).
extern "C" __global__ void __launch_bounds__(GC_THREADS)
    gdn_chunk(const float* __restrict__ qkv, const float* __restrict__ bb, const float* __restrict__ aa,
              const float* __restrict__ aLog, const float* __restrict__ dtBias, float* __restrict__ state,
              float* __restrict__ out, int rows, int Hk, int Hv) {
  pdl_begin();
  extern __shared__ double gc_smem[];
  if (gc_dyn_smem() < GC_SHARED) __builtin_trap();  // a launch with too little shared memory is a bug
  double* Gd = gc_smem;
  float* Kb = (float*)(gc_smem + GC_C);
  float* Qb = Kb + GC_C * GC_LK;
  float* Sb = Qb + GC_C * GC_LK;
  float* Am = Sb + GC_VT * GC_LK;
  float* Mm = Am + GC_C * GC_LC;
  float* Rb = Mm + GC_C * GC_LC;
  float* Vn = Rb + GC_C * GC_LV;
  float* Wb = Vn + GC_C * GC_LV;
  float* Ob = Wb + GC_C * GC_LV;
  float* betaS = Ob + GC_C * GC_LV;
  float* gam = betaS + GC_C;
  float* dec = gam + GC_C;

  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int slices = GC_D / GC_VT;
  const int j = PETAL_BID_X() / slices, a0 = (PETAL_BID_X() % slices) * GC_VT;
  if (j >= Hv) return;
  const int kh = j / (Hv / Hk);
  const long long width = 2LL * Hk * GC_D + (long long)Hv * GC_D;
  float* st = state + ((long long)j * GC_D + a0) * GC_D;
  for (int i = tid; i < GC_VT * GC_D; i += GC_THREADS) Sb[(i / GC_D) * GC_LK + i % GC_D] = st[i];
  const double decay = dexp((double)aLog[j]);
  const float qscale = 1.f / __builtin_sqrtf((float)GC_D);

  for (int t0 = 0; t0 < rows; t0 += GC_C) {
    const int n = imin(GC_C, rows - t0);
    // the block's normalised queries and keys (zero rows past n), a warp a token
    for (int i = warp; i < GC_C; i += GC_THREADS / 32) {
      float q[GC_D / 32], k[GC_D / 32], qs = 0.f, ks = 0.f;
      const float* row = qkv + (long long)(t0 + i) * width;
#pragma unroll
      for (int u = 0; u < GC_D / 32; u++) {
        const int c = lane + 32 * u;
        q[u] = i < n ? row[kh * GC_D + c] : 0.f;
        k[u] = i < n ? row[(Hk + kh) * GC_D + c] : 0.f;
        qs += q[u] * q[u];
        ks += k[u] * k[u];
      }
      qs = warp_sum(qs), ks = warp_sum(ks);
      const float qinv = qscale / __builtin_sqrtf(qs + 1e-6f), kinv = 1.f / __builtin_sqrtf(ks + 1e-6f);
#pragma unroll
      for (int u = 0; u < GC_D / 32; u++) {
        const int c = lane + 32 * u;
        Qb[i * GC_LK + c] = q[u] * qinv;
        Kb[i * GC_LK + c] = k[u] * kinv;
      }
    }
    // the gates: beta and the log-gate (0 past n, so G stays G[n-1])
    if (tid < GC_C) {
      float b = 0.f;
      double lg = 0;
      if (tid < n) {
        const long long r = (long long)(t0 + tid) * Hv + j;
        b = (float)dsigmoid((double)bb[r]);
        lg = -decay * dsoftplus((double)aa[r] + (double)dtBias[j]);
      }
      betaS[tid] = b;
      Gd[tid] = lg;
    }
    __syncthreads();
    if (tid == 0) {
      double s = 0;
      for (int i = 0; i < GC_C; i++) s += Gd[i], Gd[i] = s;
    }
    __syncthreads();
    if (tid < GC_C) {
      gam[tid] = (float)dexp(Gd[tid]);
      dec[tid] = (float)dexp(Gd[GC_C - 1] - Gd[tid]);
    }
    __syncthreads();

    // k·k → A and q·k → M (decayed, masked), S0·k → R and S0·q → O: 32
    // tiles of 16x8, each with K = 128
    for (int item = warp; item < 32; item += GC_THREADS / 32) {
      const int kind = item / 8, r0 = (item % 8) / 4 * 16, n0 = item % 4 * 8;
      float c[4] = {0.f, 0.f, 0.f, 0.f};
      if (kind < 2) {
        if (n0 <= r0 + 15) gc_tile<GC_D>(c, GcMat{kind ? Qb : Kb, GC_LK, 1}, r0, GcMat{Kb, 1, GC_LK}, n0, lane);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = r0 + g + (e >> 1) * 8, m = n0 + 2 * tq + (e & 1);
          const float d = m <= r ? (float)dexp(Gd[r] - Gd[m]) : 0.f;
          if (kind == 0)
            Am[r * GC_LC + m] = m < r ? betaS[r] * c[e] * d : 0.f;
          else
            Mm[r * GC_LC + m] = c[e] * d;
        }
      } else {
        gc_tile<GC_D>(c, GcMat{kind == 2 ? Kb : Qb, GC_LK, 1}, r0, GcMat{Sb, 1, GC_LK}, n0, lane);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = r0 + g + (e >> 1) * 8, a = n0 + 2 * tq + (e & 1);
          if (kind == 2) {
            const float v = r < n ? qkv[(long long)(t0 + r) * width + 2LL * Hk * GC_D + j * GC_D + a0 + a] : 0.f;
            Rb[r * GC_LV + a] = betaS[r] * (v - gam[r] * c[e]);
          } else {
            Ob[r * GC_LV + a] = gam[r] * c[e];
          }
        }
      }
    }
    __syncthreads();

    // Vn = (I + A)^-1 R by forward substitution: warp w owns columns
    // 8w..8w+7, four lanes a column, each summing every fourth term.
    {
      const int a = warp * 8 + (lane & 7), part = lane >> 3;
      for (int i = 0; i < GC_C; i++) {
        float s = 0.f;
        for (int m = part; m < i; m += 4) s += Am[i * GC_LC + m] * Vn[m * GC_LV + a];
        s += __shfl_xor_sync(0xffffffffu, s, 8);
        s += __shfl_xor_sync(0xffffffffu, s, 16);
        const float x = Rb[i * GC_LV + a] - s;
        if (part == 0) {
          Vn[i * GC_LV + a] = x;
          Wb[i * GC_LV + a] = dec[i] * x;
        }
        __syncwarp();
      }
    }
    __syncthreads();

    // o = O + M·Vn (8 tiles, written out for the block's n tokens), and
    // S = γ_{n-1}·S + Wbᵀ·K (32 tiles): each of S's elements is read and
    // written by one thread only.
    for (int item = warp; item < 8 + 32; item += GC_THREADS / 32) {
      float c[4];
      if (item < 8) {
        const int r0 = item / 4 * 16, n0 = item % 4 * 8;
        c[0] = c[1] = c[2] = c[3] = 0.f;
        gc_tile<GC_C>(c, GcMat{Mm, GC_LC, 1}, r0, GcMat{Vn, GC_LV, 1}, n0, lane);
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int r = r0 + g + (e >> 1) * 8, a = n0 + 2 * tq + (e & 1);
          if (r < n) out[((long long)(t0 + r) * Hv + j) * GC_D + a0 + a] = Ob[r * GC_LV + a] + c[e];
        }
      } else {
        const int it = item - 8, r0 = it / 16 * 16, n0 = it % 16 * 8;
        const float gl = gam[GC_C - 1];
#pragma unroll
        for (int e = 0; e < 4; e++) c[e] = gl * Sb[(r0 + g + (e >> 1) * 8) * GC_LK + n0 + 2 * tq + (e & 1)];
        gc_tile<GC_C>(c, GcMat{Wb, 1, GC_LV}, r0, GcMat{Kb, GC_LK, 1}, n0, lane);
#pragma unroll
        for (int e = 0; e < 4; e++) Sb[(r0 + g + (e >> 1) * 8) * GC_LK + n0 + 2 * tq + (e & 1)] = c[e];
      }
    }
    __syncthreads();
  }
  for (int i = tid; i < GC_VT * GC_D; i += GC_THREADS) st[i] = Sb[(i / GC_D) * GC_LK + i % GC_D];
}
