// gdn_chunk.cu: the gated delta rule of prefill in its chunked form (spec
// 2.6): blocks of GC_C tokens, each a few matrix products against the
// state at the block's start instead of a pass over the state per token.
// Per block of n tokens, with G[i] the sum of the log-gates up to token i
// and γ_i = e^G[i]:
//
//	A[i][m] = beta_i·(k_i·k_m)·e^(G[i]-G[m])          (m < i)
//	T       = (I + A)^-1
//	W       = T·(beta·γ·K),  U = T·(beta·V)            (the WY form)
//	Vn      = U - W·S0ᵀ
//	o_i     = γ_i·S0·q_i + Σ_{m<=i} (q_i·k_m)·e^(G[i]-G[m])·Vn[m]
//	S_end   = γ_{n-1}·S0 + Σ_m e^(G[n-1]-G[m])·Vn[m] ⊗ k_m
//
// Everything but the last three lines is independent of the state, so it
// runs in two kernels:
//
// gdn_chunk_prep, one block of GC_PREP_THREADS threads per (value head,
// block of tokens), all in parallel: the gates and their sums, the
// normalised q and k, k·k and q·k with their decays, and the forward
// substitution (I + A)·[W U] = [beta·γ·K  beta·V], each thread a column,
// in float32 FMA. It writes GC_WS floats per pair to a workspace: W, γ·Q,
// e^(G[n-1]-G)·K and U (GC_C x 128 each), the decayed, masked q·k
// (GC_C x GC_C) and γ_{n-1}.
//
// gdn_chunk_state, one block of GC_STATE_THREADS threads per (value head,
// slice of GC_VT rows of its state; rows of the state are independent
// given the keys and gates), walks the blocks in order with its slice in
// shared memory in float32: per block the four products above (Vn, γ·S0·Q,
// the masked q·k times Vn, Vnᵀ times the decayed K), while cp.async brings
// the next block's part of the workspace into the other of two buffers.
//
// Every product runs on mma.sync m16n8k8 in tf32 with each float32
// operand split into two tf32 parts, hi + lo, and three products (hi·hi,
// hi·lo, lo·hi): about 2^-21 relative per operand, where a single tf32
// product would be 2^-11 and the bf16 parts of the form before these
// kernels 2^-17. The decays e^(G[i]-G[m]) are exponentials of differences of the
// log-gates summed in float64, never quotients of γ, so they neither
// overflow nor lose digits.
//
// GC_C = 32 keeps the forward substitution's depth and the double buffer
// (149 KB of shared memory) small; GC_VT = 32 makes Hv·4 = 128 blocks for
// the 35B model's 32 value heads, about one per multiprocessor of an H200.
#include "rowmath.h"
#include "tf32.h"

#define GC_D 128
#define GC_C 32
#define GC_VT 32
#define GC_LK (GC_D + 4)
#define GC_LC (GC_C + 4)
#define GC_PREP_THREADS 128

// GC_PREP_VEC: the prep writes its fragment-order matrices a lane's
// fragment at a time (one 16- or 8-byte store, gc_put_afrag and
// gc_put_bfrag) over fixed trip counts, and takes its q and k norms two
// tokens at a time, where it writes one element a loop step (a fragment
// position worked out from the step's index each time) and one token's
// norms a step. The same values to the same places: the same bits. 1 in
// the built families: the delta rule at 4096 tokens 569 against 595 µs,
// prefill of 4K tokens 0.0-1.3 % faster on an H100 (two rounds,
// docs/bench/cuda/2026-12-08-combo1).
#ifndef GC_PREP_VEC
#define GC_PREP_VEC 1
#endif

// gc_dyn_smem is the dynamic shared memory of the launch, in bytes.
static __device__ __forceinline__ u32 gc_dyn_smem() {
  u32 n;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
}

// GcF2 is two floats stored as one 8-byte access.
struct __attribute__((aligned(8))) GcF2 {
  float x, y;
};

// GcMat is a float32 matrix in shared memory: element (r, c) at p[r*rs + c*cs].
struct GcMat {
  const float* p;
  int rs, cs;
  __device__ __forceinline__ float at(int r, int c) const { return p[r * rs + c * cs]; }
};

// gc_gates fills beta (sigmoid(b)), the log-gates' running sums G (float64,
// 0 past n so G stays G[n-1]), γ = e^G and the decays to the block's end
// e^(G[GC_C-1]-G) for the n tokens from t0 of value head j; every thread
// of the block calls it (it synchronises).
static __device__ __forceinline__ void gc_gates(const float* __restrict__ bb, const float* __restrict__ aa,
                                                const float* __restrict__ aLog, const float* __restrict__ dtBias,
                                                int t0, int n, int j, int Hv, int tid, double* Gd, float* betaS,
                                                float* gam, float* dec) {
  if (tid < GC_C) {
    float b = 0.f;
    double lg = 0;
    if (tid < n) {
      const long long r = (long long)(t0 + tid) * Hv + j;
      b = (float)dsigmoid((double)bb[r]);
      lg = -dexp((double)aLog[j]) * dsoftplus((double)aa[r] + (double)dtBias[j]);
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
}

// gc_split is tf32_split; in gdn_chunk_tf32.cu and gdn_chunk_frag.cu
// (GC_ONE_PRODUCT) the rounding alone, the lo part never read, but where
// Three asks for both parts (the prep's 3xTF32 products, in every form).
#ifdef GC_ONE_PRODUCT
#define GC_THREE false
#else
#define GC_THREE true
#endif
template <bool Three = GC_THREE>
static __device__ __forceinline__ void gc_split(float x, u32& hi, u32& lo) {
  if constexpr (Three) {
    tf32_split(x, hi, lo);
  } else {
    hi = tf32_round(x);
    lo = 0;
  }
}

// gc_mma adds a·b to the accumulator c: mma_tf32x3, or in gdn_chunk_tf32.cu
// the one product of the hi parts.
static __device__ __forceinline__ void gc_mma(float* c, const TfA& a, const TfB& b) {
#ifdef GC_ONE_PRODUCT
  mma_tf32(c, a.hi, b.hi);
#else
  mma_tf32x3(c, a, b);
#endif
}

// gc_frag_a is A[r0:r0+16, k0:k0+8] (a0 at row g, col t; a1 row g+8; a2
// col t+4; a3 both), gc_frag_b B[k0:k0+8, n0:n0+8] (b0 at row t, col g;
// b1 row t+4).
template <bool Three = GC_THREE>
static __device__ __forceinline__ TfA gc_frag_a(GcMat A, int r0, int k0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  TfA f;
  gc_split<Three>(A.at(r0 + g, k0 + t), f.hi[0], f.lo[0]);
  gc_split<Three>(A.at(r0 + g + 8, k0 + t), f.hi[1], f.lo[1]);
  gc_split<Three>(A.at(r0 + g, k0 + t + 4), f.hi[2], f.lo[2]);
  gc_split<Three>(A.at(r0 + g + 8, k0 + t + 4), f.hi[3], f.lo[3]);
  return f;
}
template <bool Three = GC_THREE>
static __device__ __forceinline__ TfB gc_frag_b(GcMat B, int k0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  TfB f;
  gc_split<Three>(B.at(k0 + t, n0 + g), f.hi[0], f.lo[0]);
  gc_split<Three>(B.at(k0 + t + 4, n0 + g), f.hi[1], f.lo[1]);
  return f;
}

// GC_FRAG (gdn_chunk_frag.cu): the prep writes W, γ·Q and the masked q·k
// already rounded to tf32 in the order of the m16n8k8 A fragments, and the
// decayed K in the order of the B fragments, so that the state pass reads
// a fragment with one 16- or 8-byte load where gc_frag_a takes four loads
// and four roundings (gc_frag_b two). gc_afrag_at is where element (r, k)
// of a GC_C-row matrix goes: 16 x 8 tile (k/8, r/16), then the lane that
// holds it, its four elements contiguous (a0 .. a3); gc_bfrag_at is where
// element (k, n) of a GC_C x GC_D matrix goes: 8 x 8 tile (k/8, n/8), then
// the lane, its two elements contiguous (b0, b1).
static __device__ __forceinline__ int gc_afrag_at(int r, int k) {
  const int t = k & 7, rr = r & 15;
  return (((k >> 3) * (GC_C / 16) + (r >> 4)) * 32 + (rr & 7) * 4 + (t & 3)) * 4 + (t >> 2) * 2 + (rr >> 3);
}
static __device__ __forceinline__ int gc_bfrag_at(int k, int n) {
  const int t = k & 7;
  return (((k >> 3) * (GC_D / 8) + (n >> 3)) * 32 + (n & 7) * 4 + (t & 3)) * 2 + (t >> 2);
}
// gc_pre_a and gc_pre_b are gc_frag_a and gc_frag_b of a matrix the prep
// laid out so (m: its first element), their hi parts as stored.
static __device__ __forceinline__ TfA gc_pre_a(const float* m, int r0, int k0, int lane) {
  const float4v v = *(const float4v*)(m + gc_afrag_at(r0, k0) + 4 * lane);
  TfA f;
  f.hi[0] = __float_as_uint(v.x), f.hi[1] = __float_as_uint(v.y), f.hi[2] = __float_as_uint(v.z), f.hi[3] = __float_as_uint(v.w);
  f.lo[0] = f.lo[1] = f.lo[2] = f.lo[3] = 0;
  return f;
}
static __device__ __forceinline__ TfB gc_pre_b(const float* m, int k0, int n0, int lane) {
  TfB f;
  // one 8-byte load (clang splits a GcF2 read here in two: it cannot see the alignment)
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(f.hi[0]), "=r"(f.hi[1]) : "r"(smem_u32(m + gc_bfrag_at(k0, n0) + 2 * lane)));
  f.lo[0] = f.lo[1] = 0;
  return f;
}
// gc_afrag_rc and gc_bfrag_kn are the inverses: the element (r, k) or
// (k, n) at position x of the fragment order.
static __device__ __forceinline__ void gc_afrag_rc(int x, int& r, int& k) {
  const int tile = x >> 7, lane = (x >> 2) & 31, e = x & 3;
  r = (tile % (GC_C / 16)) * 16 + (lane >> 2) + (e & 1) * 8;
  k = (tile / (GC_C / 16)) * 8 + (lane & 3) + (e >> 1) * 4;
}
static __device__ __forceinline__ void gc_bfrag_kn(int x, int& k, int& n) {
  const int tile = x >> 6, lane = (x >> 1) & 31, e = x & 1;
  k = (tile / (GC_D / 8)) * 8 + (lane & 3) + e * 4;
  n = (tile % (GC_D / 8)) * 8 + (lane >> 2);
}
// GcF4 is four floats stored as one 16-byte access.
struct __attribute__((aligned(16))) GcF4 {
  float x, y, z, w;
};

// gc_put_afrag writes the GC_C x GC_D matrix whose element (r, k) is
// val(r, k) to dst in A-fragment order (gc_afrag_at), a lane's four
// elements (a0 .. a3) as one 16-byte store; gc_put_bfrag the GC_C x GC_D
// matrix of elements (k, n) in B-fragment order (gc_bfrag_at), a lane's
// two as one 8-byte store; the prep's threads on consecutive lanes
// (GC_PREP_VEC).
template <typename F>
static __device__ __forceinline__ void gc_put_afrag(float* dst, int tid, F val) {
#pragma unroll 1
  for (int it = 0; it < GC_C * GC_D / 4 / GC_PREP_THREADS; it++) {
    const int q = tid + it * GC_PREP_THREADS;
    int r, k;
    gc_afrag_rc(4 * q, r, k);
    *(GcF4*)(dst + 4 * q) = GcF4{val(r, k), val(r + 8, k), val(r, k + 4), val(r + 8, k + 4)};
  }
}
template <typename F>
static __device__ __forceinline__ void gc_put_bfrag(float* dst, int tid, F val) {
#pragma unroll 1
  for (int it = 0; it < GC_C * GC_D / 2 / GC_PREP_THREADS; it++) {
    const int q = tid + it * GC_PREP_THREADS;
    int k, n;
    gc_bfrag_kn(2 * q, k, n);
    *(GcF2*)(dst + 2 * q) = GcF2{val(k, n), val(k + 4, n)};
  }
}

#ifdef GC_FRAG
// a workspace value the state pass reads as a tf32 operand, rounded once here
#define GC_PRE(x) __uint_as_float(tf32_round(x))
#define GC_AT_A(r, k, ld) gc_afrag_at(r, k)
#else
#define GC_PRE(x) (x)
#define GC_AT_A(r, k, ld) ((r) * (ld) + (k))
#endif
// GC_FA and GC_FB are the state pass's fragments of a workspace matrix:
// mat its view as the prep writes it without GC_FRAG, base its first
// element as it writes it with
#ifdef GC_FRAG
#define GC_FA(mat, base, r0, k0) gc_pre_a(base, r0, k0, lane)
#define GC_FB(mat, base, k0, n0) gc_pre_b(base, k0, n0, lane)
#else
#define GC_FA(mat, base, r0, k0) gc_frag_a(mat, r0, k0, lane)
#define GC_FB(mat, base, k0, n0) gc_frag_b(mat, k0, n0, lane)
#endif


// The workspace, per (value head, block of tokens), GC_WS floats (a
// multiple of 4, so each part is 16-byte aligned): W, γ·Q, the decayed K
// and U at GC_C·GC_D apart, then the masked q·k (GC_C x GC_C), then
// γ_{n-1} and 3 floats of padding.
#define GC_WS 17412
static_assert(GC_WS == 4 * GC_C * GC_D + GC_C * GC_C + 4, "GC_WS");
#define GC_WS_M (4 * GC_C * GC_D)
#define GC_WS_GL (GC_WS_M + GC_C * GC_C)

static_assert(GC_PREP_THREADS == GC_D, "a thread per column of K and of V");
// shared memory: G (doubles), Kb, Qb [C][LK], Am [C][LC], beta, γ, dec [C]
#define GC_PREP_SHARED (8 * GC_C + 4 * (2 * GC_C * GC_LK + GC_C * GC_LC + 3 * GC_C))

// gdn_chunk_prep computes the workspace of value head bid / nb and block
// bid % nb (nb = ceil(rows / GC_C)): q and k L2-normalised (q scaled by
// 128^-1/2), beta = sigmoid(b), log g = -exp(A_log)·softplus(a + dt_bias).
// (gdn_chunk_tf32.cu takes gdn_chunk.ptx's prep;
// under GC_FLOW it is gc_prep_task, the work of one (value head j, block
// blk) for gdn_chunk_prep_flow's loop; under GC_PAIR gdn_chunk_prep_pair,
// below, in its place)
#if (!defined(GC_ONE_PRODUCT) || defined(GC_FRAG)) && !defined(GC_PAIR)
#ifdef GC_FRAG
#define GC_PREP_ENTRY gdn_chunk_prep_frag
#else
#define GC_PREP_ENTRY gdn_chunk_prep
#endif
#ifdef GC_FLOW
static __device__ __forceinline__ void gc_prep_task(const float* __restrict__ qkv, const float* __restrict__ bb,
                                                    const float* __restrict__ aa, const float* __restrict__ aLog,
                                                    const float* __restrict__ dtBias, float* __restrict__ ws, int rows,
                                                    int Hk, int Hv, int j, int blk) {
#else
extern "C" __global__ void __launch_bounds__(GC_PREP_THREADS)
    GC_PREP_ENTRY(const float* __restrict__ qkv, const float* __restrict__ bb, const float* __restrict__ aa,
                   const float* __restrict__ aLog, const float* __restrict__ dtBias, float* __restrict__ ws, int rows,
                   int Hk, int Hv) {
  pdl_begin();
#endif
  extern __shared__ double gc_prep_smem[];
  if (gc_dyn_smem() < GC_PREP_SHARED) __builtin_trap();  // a launch with too little shared memory is a bug
  double* Gd = gc_prep_smem;
  float* Kb = (float*)(gc_prep_smem + GC_C);
  float* Qb = Kb + GC_C * GC_LK;
  float* Am = Qb + GC_C * GC_LK;
  float* betaS = Am + GC_C * GC_LC;
  float* gam = betaS + GC_C;
  float* dec = gam + GC_C;

  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int nb = (rows + GC_C - 1) / GC_C;
#ifndef GC_FLOW
  const int j = PETAL_BID_X() / nb, blk = PETAL_BID_X() % nb;
  if (j >= Hv) return;
#endif
  const int t0 = blk * GC_C, n = imin(GC_C, rows - t0);
  const int kh = j / (Hv / Hk);
  const long long width = 2LL * Hk * GC_D + (long long)Hv * GC_D;
  float* w = ws + ((long long)j * nb + blk) * GC_WS;

  // this thread's column of the block's values, loaded first (used last)
  float v[GC_C];
#pragma unroll
  for (int i = 0; i < GC_C; i++) v[i] = i < n ? qkv[(long long)(t0 + i) * width + 2LL * Hk * GC_D + j * GC_D + tid] : 0.f;
  gc_gates(bb, aa, aLog, dtBias, t0, n, j, Hv, tid, Gd, betaS, gam, dec);

  // the normalised queries and keys (zero rows past n), a warp a token;
  // γ·Q and the decayed K go to the workspace
  const float qscale = 1.f / __builtin_sqrtf((float)GC_D);
#if GC_PREP_VEC
  // a fixed trip count, two tokens' loads in flight at once
#pragma unroll 2
  for (int it = 0; it < GC_C / (GC_PREP_THREADS / 32); it++) {
    const int i = warp + it * (GC_PREP_THREADS / 32);
#else
  for (int i = warp; i < GC_C; i += GC_PREP_THREADS / 32) {
#endif
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
      const float qn = q[u] * qinv, kn = k[u] * kinv;
      Qb[i * GC_LK + c] = qn;
      Kb[i * GC_LK + c] = kn;
#ifndef GC_FRAG
      w[GC_C * GC_D + i * GC_D + c] = gam[i] * qn;
      w[2 * GC_C * GC_D + i * GC_D + c] = dec[i] * kn;
#endif
    }
  }
  __syncthreads();
#ifdef GC_FRAG
  // γ·Q and the decayed K in fragment order, from the normalised rows in
  // shared memory: consecutive threads write consecutive elements
#if GC_PREP_VEC
  gc_put_afrag(w + GC_C * GC_D, tid, [&](int r, int k) { return GC_PRE(gam[r] * Qb[r * GC_LK + k]); });
  gc_put_bfrag(w + 2 * GC_C * GC_D, tid, [&](int k, int n) { return GC_PRE(dec[k] * Kb[k * GC_LK + n]); });
#else
  for (int at = tid; at < GC_C * GC_D; at += GC_PREP_THREADS) {
    int r, k;
    gc_afrag_rc(at, r, k);
    w[GC_C * GC_D + at] = GC_PRE(gam[r] * Qb[r * GC_LK + k]);
    gc_bfrag_kn(at, r, k);
    w[2 * GC_C * GC_D + at] = GC_PRE(dec[r] * Kb[r * GC_LK + k]);
  }
#endif
#endif

  // k·k → A (beta, decayed, strictly lower) and q·k → the workspace's M
  // (decayed, m <= i): 16 tiles of 16x8, those above the diagonal zero
  for (int item = warp; item < 16; item += GC_PREP_THREADS / 32) {
    const int kind = item / 8, r0 = (item % 8) / 4 * 16, n0 = item % 4 * 8;
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    if (n0 <= r0 + 15) {
      const GcMat A{kind ? Qb : Kb, GC_LK, 1}, B{Kb, 1, GC_LK};
#pragma unroll 4
      for (int k0 = 0; k0 < GC_D; k0 += 8) mma_tf32x3(c, gc_frag_a<true>(A, r0, k0, lane), gc_frag_b<true>(B, k0, n0, lane));
    }
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = r0 + g + (e >> 1) * 8, m = n0 + 2 * tq + (e & 1);
      const float d = m <= r ? (float)dexp(Gd[r] - Gd[m]) : 0.f;
      if (kind == 0)
        Am[r * GC_LC + m] = m < r ? betaS[r] * c[e] * d : 0.f;
      else
        w[GC_WS_M + GC_AT_A(r, m, GC_C)] = GC_PRE(c[e] * d);
    }
  }
  __syncthreads();

  // (I + A)·[W U] = [beta·γ·K  beta·V] by forward substitution, this
  // thread's column of each
  float x[GC_C], y[GC_C];
#pragma unroll
  for (int i = 0; i < GC_C; i++) {
    float sx = betaS[i] * gam[i] * Kb[i * GC_LK + tid], sy = betaS[i] * v[i];
#pragma unroll
    for (int m = 0; m < i; m++) {
      const float a = Am[i * GC_LC + m];
      sx = __builtin_fmaf(-a, x[m], sx);
      sy = __builtin_fmaf(-a, y[m], sy);
    }
    x[i] = sx, y[i] = sy;
#ifdef GC_FRAG
    Qb[i * GC_LK + tid] = sx;  // Qb's q·k products are done (the barrier above)
#else
    w[i * GC_D + tid] = sx;
#endif
    w[3 * GC_C * GC_D + i * GC_D + tid] = sy;
  }
#ifdef GC_FRAG
  __syncthreads();
#if GC_PREP_VEC
  gc_put_afrag(w, tid, [&](int r, int k) { return GC_PRE(Qb[r * GC_LK + k]); });  // W in fragment order, as γ·Q
#else
  for (int at = tid; at < GC_C * GC_D; at += GC_PREP_THREADS) {  // W in fragment order, as γ·Q
    int r, k;
    gc_afrag_rc(at, r, k);
    w[at] = GC_PRE(Qb[r * GC_LK + k]);
  }
#endif
#endif
  if (tid == 0) w[GC_WS_GL] = gam[GC_C - 1];
}
#endif  // (!GC_ONE_PRODUCT || GC_FRAG) && !GC_PAIR

#ifdef GC_PAIR
// gdn_chunk_prep_pair (gdn_chunk_pair.cu, deltapair=on): gdn_chunk_prep_frag
// for the two value heads 2jp and 2jp+1 of block bid % nb at once (jp =
// bid / nb), which share a key head (Hv / Hk even): a thread a column of
// each head (threads 0-127 the first, 128-255 the second). The queries and
// keys are read and normalised once, and q·k and k·k taken once, for both
// heads; only the gates, their decays and V are a head's own. Each value
// is computed as gdn_chunk_prep_frag computes it: the same workspace, bit
// for bit. Its norm loop, q·k and k·k tiles and forward substitution are
// copies of the prep's: shared as inline functions they reorder
// gdn_chunk_frag.ptx's and gdn_chunk.ptx's instructions, whose cubins only
// a GPU can make again (docs/bench/cuda/README.md, Next).
// shared memory: a head's G (doubles) [C] each; Kb, Qb [C][LK]; a head's
// W [C][LK], Am [C][LC], beta, γ, dec [C] each
#define GC_PAIR_HEAD (GC_C * GC_LK + GC_C * GC_LC + 3 * GC_C)
#define GC_PAIR_SHARED (2 * 8 * GC_C + 4 * (2 * GC_C * GC_LK + 2 * GC_PAIR_HEAD))
#define GC_PAIR_THREADS (2 * GC_PREP_THREADS)
#ifdef GC_FLOW
// (gdn_chunk_pairflow.cu) gc_pair_task is gdn_chunk_prep_pair's work for
// the pair jp and block blk, for gdn_chunk_prep_pair_flow's loop
static __device__ __forceinline__ void gc_pair_task(const float* __restrict__ qkv, const float* __restrict__ bb,
                                                    const float* __restrict__ aa, const float* __restrict__ aLog,
                                                    const float* __restrict__ dtBias, float* __restrict__ ws, int rows,
                                                    int Hk, int Hv, int jp, int blk) {
#else
extern "C" __global__ void __launch_bounds__(GC_PAIR_THREADS)
    gdn_chunk_prep_pair(const float* __restrict__ qkv, const float* __restrict__ bb, const float* __restrict__ aa,
                        const float* __restrict__ aLog, const float* __restrict__ dtBias, float* __restrict__ ws,
                        int rows, int Hk, int Hv) {
  pdl_begin();
#endif
  extern __shared__ double gc_pair_smem[];
  if (gc_dyn_smem() < GC_PAIR_SHARED) __builtin_trap();  // a launch with too little shared memory is a bug
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int h = tid / GC_PREP_THREADS, ct = tid % GC_PREP_THREADS;  // this thread's head of the pair, its column
  const int g = lane >> 2, tq = lane & 3;
  const int nb = (rows + GC_C - 1) / GC_C;
#ifndef GC_FLOW
  const int jp = PETAL_BID_X() / nb, blk = PETAL_BID_X() % nb;
  if (2 * jp >= Hv) return;
#endif
  const int j = 2 * jp + h;
  const int t0 = blk * GC_C, n = imin(GC_C, rows - t0);
  const int kh = 2 * jp / (Hv / Hk);
  const long long width = 2LL * Hk * GC_D + (long long)Hv * GC_D;
  float* Kb = (float*)(gc_pair_smem + 2 * GC_C);
  float* Qb = Kb + GC_C * GC_LK;
  // head hh's part of shared memory
  auto Wof = [&](int hh) { return Qb + GC_C * GC_LK + hh * GC_PAIR_HEAD; };
  double* Gd = gc_pair_smem + h * GC_C;
  float* Wb = Wof(h);
  float* Am = Wb + GC_C * GC_LK;
  float* betaS = Am + GC_C * GC_LC;
  float* gam = betaS + GC_C;
  float* dec = gam + GC_C;
  float* w = ws + ((long long)j * nb + blk) * GC_WS;

  // this thread's column of its head's values, loaded first (used last)
  float v[GC_C];
#pragma unroll
  for (int i = 0; i < GC_C; i++) v[i] = i < n ? qkv[(long long)(t0 + i) * width + 2LL * Hk * GC_D + j * GC_D + ct] : 0.f;
  gc_gates(bb, aa, aLog, dtBias, t0, n, j, Hv, ct, Gd, betaS, gam, dec);

  // the normalised queries and keys (zero rows past n), a warp a token, for both heads
  const float qscale = 1.f / __builtin_sqrtf((float)GC_D);
#pragma unroll 2
  for (int it = 0; it < GC_C / (GC_PAIR_THREADS / 32); it++) {
    const int i = warp + it * (GC_PAIR_THREADS / 32);
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
  __syncthreads();
  // γ·Q and the decayed K of this thread's head in fragment order
  gc_put_afrag(w + GC_C * GC_D, ct, [&](int r, int k) { return GC_PRE(gam[r] * Qb[r * GC_LK + k]); });
  gc_put_bfrag(w + 2 * GC_C * GC_D, ct, [&](int k, int n) { return GC_PRE(dec[k] * Kb[k * GC_LK + n]); });

  // k·k → each head's A (beta, decayed, strictly lower) and q·k → each
  // head's M (decayed, m <= i): 16 tiles of 16x8 over the 8 warps, each
  // product taken once for both heads
  for (int item = warp; item < 16; item += GC_PAIR_THREADS / 32) {
    const int kind = item / 8, r0 = (item % 8) / 4 * 16, n0 = item % 4 * 8;
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    if (n0 <= r0 + 15) {
      const GcMat A{kind ? Qb : Kb, GC_LK, 1}, B{Kb, 1, GC_LK};
#pragma unroll 4
      for (int k0 = 0; k0 < GC_D; k0 += 8) mma_tf32x3(c, gc_frag_a<true>(A, r0, k0, lane), gc_frag_b<true>(B, k0, n0, lane));
    }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
      const double* G = gc_pair_smem + hh * GC_C;
      float* A = Wof(hh) + GC_C * GC_LK;
      const float* beta = A + GC_C * GC_LC;
      float* M = ws + ((long long)(2 * jp + hh) * nb + blk) * GC_WS + GC_WS_M;
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = r0 + g + (e >> 1) * 8, m = n0 + 2 * tq + (e & 1);
        const float d = m <= r ? (float)dexp(G[r] - G[m]) : 0.f;
        if (kind == 0)
          A[r * GC_LC + m] = m < r ? beta[r] * c[e] * d : 0.f;
        else
          M[GC_AT_A(r, m, GC_C)] = GC_PRE(c[e] * d);
      }
    }
  }
  __syncthreads();

  // (I + A)·[W U] = [beta·γ·K  beta·V] by forward substitution, this
  // thread's column of its head's (U's column through its own pointer:
  // an index of i and ct leaves the stores 32 addresses, and ptxas 12.4
  // then takes 255 registers and spills)
  float x[GC_C], y[GC_C];
  float* wu = w + 3 * GC_C * GC_D + ct;
#pragma unroll
  for (int i = 0; i < GC_C; i++) {
    float sx = betaS[i] * gam[i] * Kb[i * GC_LK + ct], sy = betaS[i] * v[i];
#pragma unroll
    for (int m = 0; m < i; m++) {
      const float a = Am[i * GC_LC + m];
      sx = __builtin_fmaf(-a, x[m], sx);
      sy = __builtin_fmaf(-a, y[m], sy);
    }
    x[i] = sx, y[i] = sy;
    Wb[i * GC_LK + ct] = sx;
    wu[i * GC_D] = sy;
  }
  __syncthreads();
  gc_put_afrag(w, ct, [&](int r, int k) { return GC_PRE(Wb[r * GC_LK + k]); });  // W in fragment order, as γ·Q
  if (ct == 0) w[GC_WS_GL] = gam[GC_C - 1];
}
#endif  // GC_PAIR

#define GC_STATE_THREADS 256
static_assert(GC_STATE_THREADS == 8 * 32 && GC_C == 32 && GC_VT == 32, "gdn_chunk_state's tiling: 8 warps, 32x32");
#define GC_LKD (GC_D + 8)
#define GC_LV (GC_VT + 8)
// a buffer: W, γ·Q [C][LK], the decayed K [C][LKD], U's slice [C][LV], M [C][LC], γ_{n-1} and padding;
// under GC_FRAG W, γ·Q and the decayed K in fragment order [C·D] each and M [C·C]
#ifdef GC_FRAG
#define GC_WQ (GC_C * GC_D)
#define GC_KDS (GC_C * GC_D)
#define GC_MS (GC_C * GC_C)
#else
#define GC_WQ (GC_C * GC_LK)
#define GC_KDS (GC_C * GC_LKD)
#define GC_MS (GC_C * GC_LC)
#endif
#define GC_BUF (2 * GC_WQ + GC_KDS + GC_C * GC_LV + GC_MS + 4)
// shared memory: the state's slice [VT][LK], two buffers, Vn and γ·S0·q [C][LV]
#define GC_STATE_SHARED (4 * (GC_VT * GC_LK + 2 * GC_BUF + 2 * GC_C * GC_LV))
// gdn_chunk_state_sk's partial sums after them: a warp's Vn and γ·S0·q [2][C][LV]
#define GC_SK_WARP (2 * GC_C * GC_LV)
#define GC_STATE_SK_SHARED (GC_STATE_SHARED + 4 * (GC_STATE_THREADS / 32) * GC_SK_WARP)

static __device__ __forceinline__ void gc_cp16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}

// gc_fetch starts copying one block's workspace src (the slice's
// columns a0.. of U) into the buffer bf.
static __device__ __forceinline__ void gc_fetch(const float* __restrict__ src, float* bf, int a0, int tid) {
  constexpr int part = GC_C * GC_D / 4;  // 16-byte pieces of W, γ·Q or the decayed K
#ifdef GC_FRAG
  for (int i = tid; i < 3 * part; i += GC_STATE_THREADS) gc_cp16(bf + 4 * i, src + 4 * i);  // as laid out
#else
  for (int i = tid; i < 3 * part; i += GC_STATE_THREADS) {
    const int m = i / part, r = i % part / (GC_D / 4), c = i % (GC_D / 4) * 4;
    gc_cp16(bf + m * GC_C * GC_LK + r * (m == 2 ? GC_LKD : GC_LK) + c, src + m * GC_C * GC_D + r * GC_D + c);
  }
#endif
  float* U = bf + 2 * GC_WQ + GC_KDS;
  float* M = U + GC_C * GC_LV;
  for (int i = tid; i < GC_C * GC_VT / 4; i += GC_STATE_THREADS) {
    const int r = i / (GC_VT / 4), c = i % (GC_VT / 4) * 4;
    gc_cp16(U + r * GC_LV + c, src + 3 * GC_C * GC_D + r * GC_D + a0 + c);
  }
  for (int i = tid; i < GC_C * GC_C / 4; i += GC_STATE_THREADS) {
    const int r = i / (GC_C / 4), c = i % (GC_C / 4) * 4;
#ifdef GC_FRAG
    gc_cp16(M + 4 * i, src + GC_WS_M + 4 * i);
#else
    gc_cp16(M + r * GC_LC + c, src + GC_WS_M + r * GC_C + c);
#endif
  }
  if (tid == 0) gc_cp16(M + GC_MS, src + GC_WS_GL);
}

// The flags of the flow form (GC_FLOW): a u32 a (value head, block of
// tokens), zero between launches; the prep adds the state pass's blocks
// of a head (GC_D / GC_VT) once the block's workspace is written, each of
// those takes one off once it has read it.
// gc_flag_peek reads a flag without waiting for it: its value is used a
// block of tokens later (gc_flag_wait's seen), the read's latency hidden.
static __device__ __forceinline__ u32 gc_flag_peek(const u32* f) {
  u32 v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
  return v;
}
// gc_flag_wait returns once the flag at f is up (seen: its last reading),
// reading it again with acquire semantics while it is not, sleeping
// between tries; a flag never raised (a bug) traps after about a second
// rather than hanging the GPU. The copies after it read the workspace
// through L2 (cp.async.cg), where the prep's writes are.
static __device__ __forceinline__ void gc_flag_wait(const u32* f, u32 seen) {
  for (int i = 0; seen == 0; i++) {
    if (i > 0) {
      if (i > (1 << 22)) __builtin_trap();
      asm volatile("nanosleep.u32 256;" ::: "memory");
    }
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(f) : "memory");
  }
}
// gc_flag_take takes a state block's count off the flag at f.
static __device__ __forceinline__ void gc_flag_take(u32* f) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(f), "r"(0xffffffffu) : "memory");
}
// gc_flag_raise adds the state pass's blocks of a head to the flag at f,
// after the writes of every thread of the block (a barrier first).
static __device__ __forceinline__ void gc_flag_raise(u32* f) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(f), "r"((u32)(GC_D / GC_VT)) : "memory");
}
// gc_ldcg is *p through L2 (a kernel that does not wait for the one
// before must not read a stale L1 line).
static __device__ __forceinline__ float gc_ldcg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

// gc_mma3_split is mma_tf32x3 with its two small products summed in small
// and the large one in big: two accumulators, two chains of dependent mma
// (in gdn_chunk_tf32.cu the large one alone).
static __device__ __forceinline__ void gc_mma3_split(float* big, float* small, const TfA& a, const TfB& b) {
#ifndef GC_ONE_PRODUCT
  mma_tf32(small, a.lo, b.hi);
  mma_tf32(small, a.hi, b.lo);
#endif
  mma_tf32(big, a.hi, b.hi);
}

// gc_state advances rows a0..a0+GC_VT of value head j's state (bid =
// j·(128/GC_VT) + a0/GC_VT) over the blocks of the workspace that
// gdn_chunk_prep wrote, and writes those rows' outputs.
//
// A block walks the blocks of tokens one after another, so its time is the
// chain of dependent products a block of tokens. ILP = 0 adds every product
// into one accumulator a tile, in k order (W·S0ᵀ: 48 dependent mma). ILP =
// 1 keeps the small and the large products apart and the even and odd
// k-steps apart (four accumulators, chains of 16 and 8), adding them at
// the end: the same products, float32 sums in another order. ILP = 2
// computes the first two products (Vn and γ·S0·q, most of the work) split
// over k instead: each warp all 32 x 32 of both over its 16 of the 128 k,
// so that each operand element is split into its tf32 parts once (a tile
// a warp splits each A element four times, each B element twice: ncu had
// the state pass issue-bound, 61 % of issue slots), then the eight
// partials summed in warp order through shared memory (chains of 6 mma).
// (The next block's copies issued after a block's first barrier instead,
// a barrier fewer a block, measured under 1 % faster, 755 against 759 us
// at 4096 tokens on an H100, and went: docs/bench/cuda/2026-12-06-wgr1.)
//
// FLOW (gdn_chunk_state_flow, ILP 1): the prep runs beside this pass and
// raises each (value head, block of tokens)'s flag in flags once that
// block's workspace is written; this pass fetches a block once its flag
// is up (read a block ahead, so that the read's wait is hidden), after the
// block before's first barrier, and takes its count down by one, so that
// the flags are back at zero when the launch ends.
template <int ILP, bool FLOW = false>
static __device__ __forceinline__ void gc_state(const float* __restrict__ ws, float* __restrict__ state,
                                                float* __restrict__ out, int rows, int Hv, u32* __restrict__ flags = nullptr) {
  extern __shared__ __attribute__((aligned(16))) float gc_state_smem[];
  // a launch with too little shared memory is a bug
  if (gc_dyn_smem() < (ILP == 2 ? GC_STATE_SK_SHARED : GC_STATE_SHARED)) __builtin_trap();
  float* Sb = gc_state_smem;
  float* bufs = Sb + GC_VT * GC_LK;
  float* Vn = bufs + 2 * GC_BUF;
  float* Og = Vn + GC_C * GC_LV;
  float* P = Og + GC_C * GC_LV;  // ILP = 2: the warps' partial sums

  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int slices = GC_D / GC_VT;
  const int j = PETAL_BID_X() / slices, a0 = (PETAL_BID_X() % slices) * GC_VT;
  if (j >= Hv) return;
  const int nb = (rows + GC_C - 1) / GC_C;
  const float* wsj = ws + (long long)j * nb * GC_WS;
  float* st = state + ((long long)j * GC_D + a0) * GC_D;
  u32* fj = flags + (long long)j * nb;  // FLOW: this head's flags
  u32 fnext = 0;                        // FLOW: the flag of the block after the next, as last read
  if constexpr (FLOW) {
    gc_flag_wait(fj, 0);
    if (nb > 1) fnext = gc_flag_peek(fj + 1);
  }
  gc_fetch(wsj, bufs, a0, tid);
  asm volatile("cp.async.commit_group;" ::: "memory");
  for (int i = tid; i < GC_VT * GC_D; i += GC_STATE_THREADS) Sb[(i / GC_D) * GC_LK + i % GC_D] = FLOW ? gc_ldcg(st + i) : st[i];

  // warp w's tiles: rows r0.. of the block's tokens and columns n0.. of
  // the slice for Vn, γ·S0·q and o; rows s0.. of the slice and columns
  // c0..c0+31 of the state for its update
  const int r0 = (warp >> 2) * 16, n0 = (warp & 3) * 8, s0 = (warp >> 2) * 16, c0 = (warp & 3) * 32;
  for (int blk = 0; blk < nb; blk++) {
    if constexpr (!FLOW) {
      if (blk + 1 < nb) gc_fetch(wsj + (long long)(blk + 1) * GC_WS, bufs + ((blk + 1) & 1) * GC_BUF, a0, tid);
      asm volatile("cp.async.commit_group;" ::: "memory");
      asm volatile("cp.async.wait_group 1;" ::: "memory");
      __syncthreads();
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
      __syncthreads();
      // every thread has seen block blk's flag (before its copies): this
      // block's count comes off it
      if (tid == 0) gc_flag_take(fj + blk);
      if (blk + 1 < nb) {
        const u32 seen = fnext;
        if (blk + 2 < nb) fnext = gc_flag_peek(fj + blk + 2);
        gc_flag_wait(fj + blk + 1, seen);
        gc_fetch(wsj + (long long)(blk + 1) * GC_WS, bufs + ((blk + 1) & 1) * GC_BUF, a0, tid);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
    const float* W = bufs + (blk & 1) * GC_BUF;
    const float* Qg = W + GC_WQ;
    const float* Kd = Qg + GC_WQ;
    const float* U = Kd + GC_KDS;
    const float* M = U + GC_C * GC_LV;
    const float gl = M[GC_MS];

    // Vn = U - W·S0ᵀ and γ·S0·q, sharing S0's fragments
    if constexpr (ILP == 2) {
      float pv[2][4][4] = {}, po[2][4][4] = {};
      const GcMat S{Sb, 1, GC_LK}, Wm{W, GC_LK, 1}, Qm{Qg, GC_LK, 1};
#pragma unroll
      for (int ks = 0; ks < 2; ks++) {
        const int k0 = warp * 16 + ks * 8;
        TfB b[4];
#pragma unroll
        for (int nt = 0; nt < 4; nt++) b[nt] = gc_frag_b(S, k0, nt * 8, lane);
#pragma unroll
        for (int mt = 0; mt < 2; mt++) {
          const TfA aw = GC_FA(Wm, W, mt * 16, k0), aq = GC_FA(Qm, Qg, mt * 16, k0);
#pragma unroll
          for (int nt = 0; nt < 4; nt++) {
            gc_mma(pv[mt][nt], aw, b[nt]);
            gc_mma(po[mt][nt], aq, b[nt]);
          }
        }
      }
      float* pw = P + warp * GC_SK_WARP;
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const int i = (mt * 16 + g + h * 8) * GC_LV + nt * 8 + 2 * tq;
            *(GcF2*)(pw + i) = GcF2{pv[mt][nt][2 * h], pv[mt][nt][2 * h + 1]};
            *(GcF2*)(pw + GC_C * GC_LV + i) = GcF2{po[mt][nt][2 * h], po[mt][nt][2 * h + 1]};
          }
      __syncthreads();
      // thread tid sums columns c..c+3 of rows r and r+16 of Vn (tid <
      // 128) or of γ·S0·q: a quarter warp reads one row's 32 columns
      const int m = tid >> 7, c = (tid & 7) * 4;
#pragma unroll
      for (int rr = 0; rr < 2; rr++) {
        const int i = (((tid & 127) >> 3) + 16 * rr) * GC_LV + c;
        float4v sum = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int w = 0; w < GC_STATE_THREADS / 32; w++) {
          const float4v x = *(const float4v*)(P + w * GC_SK_WARP + m * GC_C * GC_LV + i);
          sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
        }
        if (m == 0) {
          const float4v u = *(const float4v*)(U + i);
          *(float4v*)(Vn + i) = float4v{u.x - sum.x, u.y - sum.y, u.z - sum.z, u.w - sum.w};
        } else {
          *(float4v*)(Og + i) = sum;
        }
      }
    } else {
      float cv[4] = {0.f, 0.f, 0.f, 0.f}, co[4] = {0.f, 0.f, 0.f, 0.f};
      const GcMat S{Sb, 1, GC_LK}, Wm{W, GC_LK, 1}, Qm{Qg, GC_LK, 1};
      if (ILP) {
        float vb[2][4] = {}, vs[2][4] = {}, ob[2][4] = {}, os[2][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < GC_D; k0 += 8) {
          const int par = (k0 >> 3) & 1;
          const TfB b = gc_frag_b(S, k0, n0, lane);
          gc_mma3_split(vb[par], vs[par], GC_FA(Wm, W, r0, k0), b);
          gc_mma3_split(ob[par], os[par], GC_FA(Qm, Qg, r0, k0), b);
        }
#pragma unroll
        for (int e = 0; e < 4; e++) {
          cv[e] = (vs[0][e] + vs[1][e]) + (vb[0][e] + vb[1][e]);
          co[e] = (os[0][e] + os[1][e]) + (ob[0][e] + ob[1][e]);
        }
      } else {
#pragma unroll 4
        for (int k0 = 0; k0 < GC_D; k0 += 8) {
          const TfB b = gc_frag_b(S, k0, n0, lane);
          gc_mma(cv, GC_FA(Wm, W, r0, k0), b);
          gc_mma(co, GC_FA(Qm, Qg, r0, k0), b);
        }
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = r0 + g + (e >> 1) * 8, a = n0 + 2 * tq + (e & 1);
        Vn[r * GC_LV + a] = U[r * GC_LV + a] - cv[e];
        Og[r * GC_LV + a] = co[e];
      }
    }
    __syncthreads();

    // o = γ·S0·q + M·Vn for the block's n tokens, and S = γ_{n-1}·S0 +
    // Vnᵀ·(decayed K): each of S's elements is read and written by one
    // thread only
    {
      const int t0 = blk * GC_C, n = imin(GC_C, rows - t0);
      float c[4] = {0.f, 0.f, 0.f, 0.f};
      const GcMat Mm{M, GC_LC, 1}, V{Vn, GC_LV, 1}, Vt{Vn, 1, GC_LV}, K{Kd, GC_LKD, 1};
      if (ILP) {
        float cb[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int k0 = 0; k0 < GC_C; k0 += 8) gc_mma3_split(cb, c, GC_FA(Mm, M, r0, k0), gc_frag_b(V, k0, n0, lane));
#pragma unroll
        for (int e = 0; e < 4; e++) c[e] += cb[e];
      } else {
#pragma unroll
        for (int k0 = 0; k0 < GC_C; k0 += 8) gc_mma(c, GC_FA(Mm, M, r0, k0), gc_frag_b(V, k0, n0, lane));
      }
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = r0 + g + (e >> 1) * 8, a = n0 + 2 * tq + (e & 1);
        if (r < n) out[((long long)(t0 + r) * Hv + j) * GC_D + a0 + a] = Og[r * GC_LV + a] + c[e];
      }
      float cs[4][4];
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int e = 0; e < 4; e++) cs[u][e] = gl * Sb[(s0 + g + (e >> 1) * 8) * GC_LK + c0 + u * 8 + 2 * tq + (e & 1)];
      if (ILP) {
        float css[4][4] = {};
#pragma unroll
        for (int k0 = 0; k0 < GC_C; k0 += 8) {
          const TfA a = gc_frag_a(Vt, s0, k0, lane);
#pragma unroll
          for (int u = 0; u < 4; u++) gc_mma3_split(cs[u], css[u], a, GC_FB(K, Kd, k0, c0 + u * 8));
        }
#pragma unroll
        for (int u = 0; u < 4; u++)
#pragma unroll
          for (int e = 0; e < 4; e++) cs[u][e] += css[u][e];
      } else {
#pragma unroll
        for (int k0 = 0; k0 < GC_C; k0 += 8) {
          const TfA a = gc_frag_a(Vt, s0, k0, lane);
#pragma unroll
          for (int u = 0; u < 4; u++) gc_mma(cs[u], a, GC_FB(K, Kd, k0, c0 + u * 8));
        }
      }
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int e = 0; e < 4; e++) Sb[(s0 + g + (e >> 1) * 8) * GC_LK + c0 + u * 8 + 2 * tq + (e & 1)] = cs[u][e];
    }
    __syncthreads();
  }
  for (int i = tid; i < GC_VT * GC_D; i += GC_STATE_THREADS) st[i] = Sb[(i / GC_D) * GC_LK + i % GC_D];
}

// The state kernels, a block per (value head, slice of GC_VT state rows),
// GC_STATE_THREADS threads, GC_STATE_SHARED bytes of dynamic shared memory
// (the _sk forms GC_STATE_SK_SHARED): gdn_chunk_state (gc_state's ILP 0),
// gdn_chunk_state_ilp (1) and gdn_chunk_state_sk (2).
#define GC_STATE_ENTRY(NAME, ILP)                                                                              \
  extern "C" __global__ void __launch_bounds__(GC_STATE_THREADS)                                               \
      NAME(const float* __restrict__ ws, float* __restrict__ state, float* __restrict__ out, int rows, int Hv) { \
    pdl_begin();                                                                                               \
    gc_state<ILP>(ws, state, out, rows, Hv);                                                                   \
  }
#if defined(GC_FLOW) && defined(GC_PAIR)
// GC_FLOW_AHEAD: gdn_chunk_prep_pair_flow asks L2 for its next task's q, k
// and v rows (gc_pair_ahead) before it works on this one, so that at one
// block a multiprocessor, where the prep waits on its loads, the next
// task's find them there. 0 in the built family; not yet measured.
#ifndef GC_FLOW_AHEAD
#define GC_FLOW_AHEAD 0
#endif
// gc_pair_ahead asks L2 for the q, k and v rows that gc_pair_task(jp,
// blk) reads: a row's 16 lines of 128 bytes (4 of q, 4 of k, 8 of the two
// heads' v), two a thread.
static __device__ __forceinline__ void gc_pair_ahead(const float* __restrict__ qkv, int rows, int Hk, int Hv, int jp,
                                                     int blk) {
  const int t0 = blk * GC_C, n = imin(GC_C, rows - t0), kh = 2 * jp / (Hv / Hk);
  const long long width = 2LL * Hk * GC_D + (long long)Hv * GC_D;
  for (int x = PETAL_TID_X(); x < n * 16; x += GC_PAIR_THREADS) {
    const int i = x / 16, l = x % 16;
    const long long col = l < 4   ? (long long)kh * GC_D + 32 * l
                          : l < 8 ? (long long)(Hk + kh) * GC_D + 32 * (l - 4)
                                  : 2LL * Hk * GC_D + 2LL * jp * GC_D + 32 * (l - 8);
    prefetch_l2(qkv + (long long)(t0 + i) * width + col);
  }
}
// gdn_chunk_prep_pair_flow (gdn_chunk_pairflow.cu): gdn_chunk_prep_flow
// with gdn_chunk_prep_pair's work, a (pair of value heads, block of
// tokens) a task in the order of the blocks, each task raising both heads'
// flags for gdn_chunk_flow.cu's state pass. One block a multiprocessor (78
// KB of shared memory, 256 threads of 128 registers) beside a state block.
extern "C" __global__ void __launch_bounds__(GC_PAIR_THREADS)
    gdn_chunk_prep_pair_flow(const float* __restrict__ qkv, const float* __restrict__ bb, const float* __restrict__ aa,
                             const float* __restrict__ aLog, const float* __restrict__ dtBias, float* __restrict__ ws,
                             int rows, int Hk, int Hv, u32* __restrict__ flags) {
  pdl_begin();
  pdl_trigger();
  const int nb = (rows + GC_C - 1) / GC_C, pairs = Hv / 2;
  for (int t = PETAL_BID_X(); t < nb * pairs; t += PETAL_NCTAID_X()) {
    const int blk = t / pairs, jp = t % pairs;
#if GC_FLOW_AHEAD
    if (const int tn = t + PETAL_NCTAID_X(); tn < nb * pairs) gc_pair_ahead(qkv, rows, Hk, Hv, tn % pairs, tn / pairs);
#endif
    gc_pair_task(qkv, bb, aa, aLog, dtBias, ws, rows, Hk, Hv, jp, blk);
    __syncthreads();  // the pair's workspace written, and shared memory free for the next
    if (PETAL_TID_X() < 2) gc_flag_raise(flags + (long long)(2 * jp + PETAL_TID_X()) * nb + blk);
  }
}
#elif defined(GC_FLOW)
// gdn_chunk_prep_flow: gdn_chunk_prep_frag's work over the (value head,
// block of tokens) pairs in the order of the blocks (the order the state
// pass walks them), each block of this launch taking every gridDim-th,
// raising each pair's flag once written. It lets the state pass launch
// as soon as it has waited for the kernel before: launched with fewer
// blocks than fill the GPU (two a multiprocessor), it leaves room for the
// state pass's block beside its own (two of these at 128 registers and
// one state block at 128, its launch bounds' cap, are the 64K registers of
// a multiprocessor; ptxas 12.4 gives this 128 as it is, and spills with
// minimum blocks asked).
extern "C" __global__ void __launch_bounds__(GC_PREP_THREADS)
    gdn_chunk_prep_flow(const float* __restrict__ qkv, const float* __restrict__ bb, const float* __restrict__ aa,
                        const float* __restrict__ aLog, const float* __restrict__ dtBias, float* __restrict__ ws,
                        int rows, int Hk, int Hv, u32* __restrict__ flags) {
  pdl_begin();
  pdl_trigger();
  const int nb = (rows + GC_C - 1) / GC_C;
  for (int t = PETAL_BID_X(); t < nb * Hv; t += PETAL_NCTAID_X()) {
    const int blk = t / Hv, j = t % Hv;
    gc_prep_task(qkv, bb, aa, aLog, dtBias, ws, rows, Hk, Hv, j, blk);
    __syncthreads();  // the pair's workspace written, and shared memory free for the next
    if (PETAL_TID_X() == 0) gc_flag_raise(flags + (long long)j * nb + blk);
  }
}
// gdn_chunk_state_flow: gdn_chunk_state_frag (gc_state<1>) fetching each
// block of tokens once its flag is up. It does not wait for the kernel
// before (the prep, which lets it launch once every one of its blocks has
// waited for its own predecessor, so every kernel before the prep has
// finished): it reads only the state (through L2) and, behind the flags,
// the workspace.
extern "C" __global__ void __launch_bounds__(GC_STATE_THREADS, 2)
    gdn_chunk_state_flow(const float* __restrict__ ws, float* __restrict__ state, float* __restrict__ out, int rows,
                         int Hv, u32* __restrict__ flags) {
  gc_state<1, true>(ws, state, out, rows, Hv, flags);
}
#elif defined(GC_PAIR)
// (the pair's prep only: gdn_chunk_frag.cu's state pass reads its workspace)
#elif !defined(GC_ONE_PRODUCT)
GC_STATE_ENTRY(gdn_chunk_state, 0)
GC_STATE_ENTRY(gdn_chunk_state_ilp, 1)
GC_STATE_ENTRY(gdn_chunk_state_sk, 2)
#elif defined(GC_FRAG)
GC_STATE_ENTRY(gdn_chunk_state_frag, 1)
GC_STATE_ENTRY(gdn_chunk_state_frag_sk, 2)
#else
GC_STATE_ENTRY(gdn_chunk_state_tf32, 1)
GC_STATE_ENTRY(gdn_chunk_state_tf32_sk, 2)
#endif
