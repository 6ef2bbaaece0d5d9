// gdn.cu: the Gated DeltaNet step of one decoded token (spec 2.5 steps 2-8)
// in one launch, after the projections: the causal conv (K = 4) with SiLU
// and its state update, the q/k L2 norms, the gates beta = sigmoid(b) and
// g = exp(-exp(A_log) * softplus(a + dt_bias)), the delta rule on each
// value head's 128x128 float32 state, read once and written once, the
// output S·q, and the gated RMSNorm rms(o)·w·silu(z).
//
// Block b takes value head j = b / split and 128/split rows of its state
// (a row v of S is independent of the others given q, k, beta and g); a
// warp owns GDN_RPW rows, a lane four columns of each, held in registers
// while the rest is computed. Every block recomputes its key head's q and
// k (256 channels of conv and norm) and its own rows' v.
//
// Two tickets from counters that wrap by themselves (so that the launch can
// be replayed in a graph) keep the blocks of a head from racing: the conv
// state of a key head's q and k channels is read by every block of its
// (Hv/Hk)*split and shifted by the last of them to take a ticket; and the
// gated norm, which needs all 128 outputs of a head, is done by the last of
// the head's blocks, from the raw outputs the others left in out.
//
// The state rows are loaded before pdl_begin: this layer's step for the
// previous token wrote them, and it finished before this launch (only the
// kernel just before, the projections, may still be running, and they do
// not write the state), so they are read early, through L2 (written on
// other multiprocessors; L1 is not coherent), while the projections end.
// Everything else, the projections' outputs, the conv state and every
// store, comes after the wait.
#include "qgroup.h"
#ifdef GDN_CL_MODULE
#include "cluster.h"
#endif

#define GDN_THREADS 256
#define GDN_D 128

static __device__ __forceinline__ float gexp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
static __device__ __forceinline__ float glog(float x) {
  float r;
  asm("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r * 0.6931471805599453f;
}
static __device__ __forceinline__ float gsilu(float x) { return x / (1.f + gexp(-x)); }
static __device__ __forceinline__ float gsigmoid(float x) { return 1.f / (1.f + gexp(-x)); }
// softplus(x) = log(1 + e^x): x itself past 20, a series where e^x is small
// (1 + e^x would round it away).
static __device__ __forceinline__ float gsoftplus(float x) {
  if (x > 20.f) return x;
  const float e = gexp(x);
  if (e < 1e-3f) return e * (1.f - e * (0.5f - e * (1.f / 3.f)));
  return glog(1.f + e);
}

struct __attribute__((aligned(16))) f32x4 {
  float x, y, z, w;
};
// ld_cg4 loads 16 bytes through L2 only (ld.global.cg), not L1: for the
// state, read before pdl_begin.
static __device__ __forceinline__ f32x4 ld_cg4(const float* p) {
  f32x4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
static __device__ __forceinline__ void st4(float* p, f32x4 v) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
static __device__ __forceinline__ float dot4(f32x4 a, f32x4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

// sums reduces RPW values across the warp, the rows' shuffles interleaved.
template <int RPW>
static __device__ __forceinline__ void warp_sums(float (&v)[RPW]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int i = 0; i < RPW; i++) v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
  }
}

// In gdn_cl.cu (GDN_CL_MODULE: gdn_step_s<split>_cl, launched in clusters
// of split blocks, one value head a cluster): the gated norm without the
// second ticket.
// Each block keeps its rows' raw outputs in shared memory with their sum
// of squares, the cluster meets at its barrier, and every block reads the
// split sums through distributed shared memory (in rank order, so each
// has the same total) and writes its own rows normed: no fence, no
// atomic, no last block reading the head's outputs back from device
// memory. The default (gdnnorm=cluster): decode 0.3-0.6 % faster on an
// H100 (docs/bench/cuda/2026-12-06-deltacl1).
template <int RPW>
static __device__ __forceinline__ void gdn_step(const float* __restrict__ qkv, const float* __restrict__ z,
                                                const float* __restrict__ bb, const float* __restrict__ aa,
                                                const float* __restrict__ convW, float* convState,
                                                const float* __restrict__ aLog, const float* __restrict__ dtBias,
                                                const float* __restrict__ normW, float* state, float* out,
                                                u32* counters, int Hk, int Hv, float eps) {
  constexpr int R = 8 * RPW;  // rows per block
  constexpr int split = GDN_D / R;
  __shared__ float qk[2 * GDN_D];
  __shared__ float vs[R];
  __shared__ float red[8];
  __shared__ float gates[2];
  __shared__ int last, shiftLast;
#ifdef GDN_CL_MODULE
  __shared__ float os[R];  // this block's raw outputs
  __shared__ float part;   // their sum of squares
#endif
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int j = PETAL_BID_X() / split, slice = PETAL_BID_X() % split;
  const int kh = j / (Hv / Hk);
  const int C = (2 * Hk + Hv) * GDN_D;
  const int row0 = slice * R + warp * RPW;

  // The state rows first, before the wait for the projections (see the
  // top of the file): their loads are in flight while those finish and
  // during the prologue.
  float* S0 = state + ((long long)j * GDN_D + row0) * GDN_D + 4 * lane;
  f32x4 S[RPW];
#pragma unroll
  for (int i = 0; i < RPW; i++) S[i] = ld_cg4(S0 + i * GDN_D);
  pdl_begin();
  // The gates' inputs, and the gated norm's z and weight (used by the last
  // block of the head at the end), loaded with them: read after the conv,
  // each was one more wait for memory on the way.
  float gb = 0.f, ga = 0.f, gl = 0.f, gd = 0.f;
  if (tid == 0) gb = bb[j], ga = aa[j], gl = aLog[j], gd = dtBias[j];
#ifdef GDN_CL_MODULE
  // the block's own rows' z and weight
  const float zv = tid < R ? z[j * GDN_D + slice * R + tid] : 0.f, nw = tid < R ? normW[slice * R + tid] : 0.f;
#else
  const float zv = tid < GDN_D ? z[j * GDN_D + tid] : 0.f, nw = tid < GDN_D ? normW[tid] : 0.f;
#endif

  // Conv and SiLU of the key head's q (threads 0-127) and k (128-255)
  // channels, and of this block's rows of v.
  const int ch = tid < GDN_D ? kh * GDN_D + tid : (Hk + kh) * GDN_D + tid - GDN_D;
  const f32x4 w = *(const f32x4*)(convW + 4 * ch);
  const float s0 = convState[ch], s1 = convState[C + ch], s2 = convState[2 * C + ch], xt = qkv[ch];
  const float c = gsilu(w.x * s0 + w.y * s1 + w.z * s2 + w.w * xt);
  if (tid < R) {
    const int vc = (2 * Hk + j) * GDN_D + slice * R + tid;
    const f32x4 wv = *(const f32x4*)(convW + 4 * vc);
    const float v0 = convState[vc], v1 = convState[C + vc], v2 = convState[2 * C + vc], vx = qkv[vc];
    vs[tid] = gsilu(wv.x * v0 + wv.y * v1 + wv.z * v2 + wv.w * vx);
    // Only this block reads these channels: shift their state now.
    convState[vc] = v1, convState[C + vc] = v2, convState[2 * C + vc] = vx;
  }
  float ss = warp_sum(c * c);
  if (lane == 0) red[warp] = ss;
  if (tid == 0) {
    gates[0] = gsigmoid(gb);
    gates[1] = gexp(-gexp(gl) * gsoftplus(ga + gd));
  }
  __syncthreads();
  {
    const float sq = red[0] + red[1] + red[2] + red[3], sk = red[4] + red[5] + red[6] + red[7];
    const float scale = tid < GDN_D ? 1.f / (__builtin_sqrtf(sq + 1e-6f) * __builtin_sqrtf((float)GDN_D))
                                    : 1.f / __builtin_sqrtf(sk + 1e-6f);
    qk[tid] = c * scale;
  }
  // Every block of the key head has read its q/k conv state once it has
  // a ticket (the loads have returned: their values are used above); the
  // last one shifts it, at the end: thread 0 asks for the ticket here and
  // looks at it with the gated norm's, so that the atomic's round trip
  // runs beside the delta rule, not before it.
  __syncthreads();
  u32 shiftTicket = 0;
  const u32 readers = (u32)(Hv / Hk) * split;
  if (tid == 0) shiftTicket = ticket_inc(counters + kh, readers - 1);

  // The delta rule on this warp's rows: S = g*S; m = S·k; d = beta*(v - m);
  // S += d⊗k; o = S·q.
  const float beta = gates[0], g = gates[1];
  const f32x4 k4 = *(const f32x4*)(qk + GDN_D + 4 * lane);
  const f32x4 q4 = *(const f32x4*)(qk + 4 * lane);
  float m[RPW];
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    S[i].x *= g, S[i].y *= g, S[i].z *= g, S[i].w *= g;
    m[i] = dot4(S[i], k4);
  }
  warp_sums<RPW>(m);
  float o[RPW];
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const float d = beta * (vs[warp * RPW + i] - m[i]);
    S[i].x += d * k4.x, S[i].y += d * k4.y, S[i].z += d * k4.z, S[i].w += d * k4.w;
    st4(S0 + i * GDN_D, S[i]);
    o[i] = dot4(S[i], q4);
  }
  warp_sums<RPW>(o);
  pdl_trigger();  // the state is written; the gated norm is all that is left
  float* oh = out + (long long)j * GDN_D;
#ifdef GDN_CL_MODULE
  {
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      sq += o[i] * o[i];
      if (lane == i) os[warp * RPW + i] = o[i];
    }
    if (lane == 0) red[warp] = sq;
    __syncthreads();
    if (tid == 0) {
      part = ((red[0] + red[1]) + (red[2] + red[3])) + ((red[4] + red[5]) + (red[6] + red[7]));
      shiftLast = shiftTicket == readers - 1;
    }
    cluster_sync();
    if (shiftLast) convState[ch] = s1, convState[C + ch] = s2, convState[2 * C + ch] = xt;
    if (tid < R) {
      float tot = 0.f;
      for (int r = 0; r < split; r++) tot += ld_cluster_f32(cluster_addr(&part, r));
      const float inv = 1.f / __builtin_sqrtf(tot / GDN_D + eps);
      oh[slice * R + tid] = os[tid] * inv * nw * gsilu(zv);
    }
    cluster_sync();  // every block's reads of the others' sums done before any exits
    return;
  }
#else
#pragma unroll
  for (int i = 0; i < RPW; i++)
    if (lane == i) oh[row0 + i] = o[i];

  // The gated norm of the head, by the last of its blocks.
  fence_gpu();
  __syncthreads();
  if (tid == 0) {
    last = split == 1 || ticket_inc(counters + Hk + j, split - 1) == split - 1;
    shiftLast = shiftTicket == readers - 1;
  }
  __syncthreads();
  if (shiftLast) convState[ch] = s1, convState[C + ch] = s2, convState[2 * C + ch] = xt;
  if (!last) return;
  fence_gpu();
  const float ov = tid < GDN_D ? ((volatile float*)oh)[tid] : 0.f;
  ss = warp_sum(ov * ov);
  __syncthreads();
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  if (tid < GDN_D) {
    const float inv = 1.f / __builtin_sqrtf((red[0] + red[1] + red[2] + red[3]) / GDN_D + eps);
    oh[tid] = ov * inv * nw * gsilu(zv);
  }
#endif
}

// Entry points gdn_step_s<split>: launch Hv*split blocks of GDN_THREADS
// threads; counters is Hk+Hv u32 the host zeroes once (one set per layer
// state, or per stream). gdn_step calls pdl_begin itself, after its state
// loads.
#define GDN(RPW, NAME)                                                                                          \
  extern "C" __global__ void __launch_bounds__(GDN_THREADS)                                                     \
      NAME(const float* qkv, const float* z, const float* bb, const float* aa, const float* convW,                \
           float* convState, const float* aLog, const float* dtBias, const float* normW, float* state, float* out, \
           u32* counters, int Hk, int Hv, float eps) {                                                           \
    gdn_step<RPW>(qkv, z, bb, aa, convW, convState, aLog, dtBias, normW, state, out, counters, Hk, Hv, eps);     \
  }
// gdn_cl.cu includes this file for gdn_step and GDN and makes the cluster
// forms' entries; these are this module's.
#ifndef GDN_CL_MODULE
GDN(16, gdn_step_s1)
GDN(8, gdn_step_s2)
GDN(4, gdn_step_s4)
GDN(2, gdn_step_s8)
GDN(1, gdn_step_s16)
#endif
