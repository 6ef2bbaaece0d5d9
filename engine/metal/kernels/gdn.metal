// gdn.metal: the Gated DeltaNet step of one decoded token (spec 2.5 steps
// 2-8) after the projections: the sibling of engine/cuda/kernels/gdn.cu, in
// two dispatches where the CUDA kernel uses one:
//
//   gdn_step_s<split>: Hv*split threadgroups of GDN_THREADS threads.
//     Threadgroup b takes value head j = b / split and 128/split rows of its
//     128x128 float32 state; a simdgroup owns RPW rows, a lane four columns
//     of each. It computes the causal conv (K = 4) with SiLU of its key
//     head's q and k channels and of its rows of v (shifting the conv state
//     of those v channels, which only it reads), the q/k L2 norms, the gates
//     beta = sigmoid(b) and g = exp(-exp(A_log) * softplus(a + dt_bias)),
//     the delta rule S = g*S; m = S·k; S += beta*(v - m)⊗k, and o = S·q
//     into out.
//   gdn_finish: Hv threadgroups of GDN_THREADS threads: threadgroup j
//     shifts the conv state of key head j's q and k channels (j < Hk) and
//     applies the gated RMSNorm rms(o)·w·silu(z) to value head j.
//
// CUDA orders the blocks of a head with tickets from atomic counters and
// device-scope fences (the last reader shifts, the last writer normalises);
// Metal before MSL 3.2 has no device-scope fence, so that work is the next
// dispatch, after a barrier. Buffer layouts and arithmetic are gdn.cu's.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"

#define GDN_THREADS 256
#define GDN_D 128

static inline float gsilu(float x) { return x / (1.f + exp(-x)); }
static inline float gsigmoid(float x) { return 1.f / (1.f + exp(-x)); }
// softplus(x) = log(1 + e^x): x itself past 20, a series where e^x is small.
static inline float gsoftplus(float x) {
  if (x > 20.f) return x;
  const float e = exp(x);
  if (e < 1e-3f) return e * (1.f - e * (0.5f - e * (1.f / 3.f)));
  return log(1.f + e);
}

// conv_silu is channel ch's causal conv over its three carried inputs and
// xt, then SiLU; w holds four taps per channel, state three rows of C.
static inline float conv_silu(device const float* w, device const float* state, int C, int ch, float xt) {
  device const float* wc = w + 4 * ch;
  return gsilu(wc[0] * state[ch] + wc[1] * state[C + ch] + wc[2] * state[2 * C + ch] + wc[3] * xt);
}

template <int RPW>
static inline void gdn_step(device const float* qkv, device const float* bb, device const float* aa,
                            device const float* convW, device float* convState, device const float* aLog,
                            device const float* dtBias, device float* state, device float* out,
                            constant GdnParams& p, uint tid, uint bid, threadgroup float* qk, threadgroup float* vs,
                            threadgroup float* red, threadgroup float* gates) {
  const int R = 8 * RPW;  // rows per threadgroup
  const int split = GDN_D / R;
  const int lane = tid & 31, warp = tid >> 5;
  const int j = int(bid) / split, slice = int(bid) % split;
  const int kh = j / (p.Hv / p.Hk);
  const int C = (2 * p.Hk + p.Hv) * GDN_D;
  const int row0 = slice * R + warp * RPW;

  device float* S0 = state + (ulong(j) * GDN_D + ulong(row0)) * GDN_D + 4 * lane;
  float S[RPW][4];
  for (int i = 0; i < RPW; i++)
    for (int c = 0; c < 4; c++) S[i][c] = S0[i * GDN_D + c];

  // Conv and SiLU of the key head's q (threads 0-127) and k (128-255)
  // channels, and of this threadgroup's rows of v.
  const int ch = int(tid) < GDN_D ? kh * GDN_D + int(tid) : (p.Hk + kh) * GDN_D + int(tid) - GDN_D;
  const float c = conv_silu(convW, convState, C, ch, qkv[ch]);
  if (int(tid) < R) {
    const int vc = (2 * p.Hk + j) * GDN_D + slice * R + int(tid);
    const float vx = qkv[vc];
    vs[tid] = conv_silu(convW, convState, C, vc, vx);
    convState[vc] = convState[C + vc];
    convState[C + vc] = convState[2 * C + vc];
    convState[2 * C + vc] = vx;
  }
  const float ss = warp_sum(c * c);
  if (lane == 0) red[warp] = ss;
  if (tid == 0) {
    gates[0] = gsigmoid(bb[j]);
    gates[1] = exp(-exp(aLog[j]) * gsoftplus(aa[j] + dtBias[j]));
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  {
    const float sq = red[0] + red[1] + red[2] + red[3], sk = red[4] + red[5] + red[6] + red[7];
    const float scale = int(tid) < GDN_D ? 1.f / (sqrt(sq + 1e-6f) * sqrt(float(GDN_D))) : 1.f / sqrt(sk + 1e-6f);
    qk[tid] = c * scale;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);

  const float beta = gates[0], g = gates[1];
  float k4[4], q4[4];
  for (int e = 0; e < 4; e++) {
    k4[e] = qk[GDN_D + 4 * lane + e];
    q4[e] = qk[4 * lane + e];
  }
  float m[RPW];
  for (int i = 0; i < RPW; i++) {
    for (int e = 0; e < 4; e++) S[i][e] *= g;
    m[i] = S[i][0] * k4[0] + S[i][1] * k4[1] + S[i][2] * k4[2] + S[i][3] * k4[3];
  }
  for (ushort o = 16; o > 0; o >>= 1)
    for (int i = 0; i < RPW; i++) m[i] += simd_shuffle_xor(m[i], o);
  float ov[RPW];
  for (int i = 0; i < RPW; i++) {
    const float d = beta * (vs[warp * RPW + i] - m[i]);
    for (int e = 0; e < 4; e++) {
      S[i][e] += d * k4[e];
      S0[i * GDN_D + e] = S[i][e];
    }
    ov[i] = S[i][0] * q4[0] + S[i][1] * q4[1] + S[i][2] * q4[2] + S[i][3] * q4[3];
  }
  for (ushort o = 16; o > 0; o >>= 1)
    for (int i = 0; i < RPW; i++) ov[i] += simd_shuffle_xor(ov[i], o);
  device float* oh = out + ulong(j) * GDN_D;
  for (int i = 0; i < RPW; i++)
    if (lane == i) oh[row0 + i] = ov[i];
}

// Entry points gdn_step_s<split> (RPW = 16/split rows per simdgroup) and
// gdn_finish take the same buffers, in gdn.cu's order without its counters.
kernel void gdn_step_s1(device const float* qkv [[buffer(0)]], device const float* z [[buffer(1)]],
    device const float* bb [[buffer(2)]], device const float* aa [[buffer(3)]], device const float* convW [[buffer(4)]],
    device float* convState [[buffer(5)]], device const float* aLog [[buffer(6)]], device const float* dtBias [[buffer(7)]],
    device const float* normW [[buffer(8)]], device float* state [[buffer(9)]], device float* out [[buffer(10)]],
    constant GdnParams& p [[buffer(11)]], uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float qk[2 * GDN_D];
  threadgroup float vs[GDN_D];
  threadgroup float red[8];
  threadgroup float gates[2];
  gdn_step<16>(qkv, bb, aa, convW, convState, aLog, dtBias, state, out, p, tid, bid, qk, vs, red, gates);
}
kernel void gdn_step_s2(device const float* qkv [[buffer(0)]], device const float* z [[buffer(1)]],
    device const float* bb [[buffer(2)]], device const float* aa [[buffer(3)]], device const float* convW [[buffer(4)]],
    device float* convState [[buffer(5)]], device const float* aLog [[buffer(6)]], device const float* dtBias [[buffer(7)]],
    device const float* normW [[buffer(8)]], device float* state [[buffer(9)]], device float* out [[buffer(10)]],
    constant GdnParams& p [[buffer(11)]], uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float qk[2 * GDN_D];
  threadgroup float vs[GDN_D];
  threadgroup float red[8];
  threadgroup float gates[2];
  gdn_step<8>(qkv, bb, aa, convW, convState, aLog, dtBias, state, out, p, tid, bid, qk, vs, red, gates);
}
kernel void gdn_step_s4(device const float* qkv [[buffer(0)]], device const float* z [[buffer(1)]],
    device const float* bb [[buffer(2)]], device const float* aa [[buffer(3)]], device const float* convW [[buffer(4)]],
    device float* convState [[buffer(5)]], device const float* aLog [[buffer(6)]], device const float* dtBias [[buffer(7)]],
    device const float* normW [[buffer(8)]], device float* state [[buffer(9)]], device float* out [[buffer(10)]],
    constant GdnParams& p [[buffer(11)]], uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float qk[2 * GDN_D];
  threadgroup float vs[GDN_D];
  threadgroup float red[8];
  threadgroup float gates[2];
  gdn_step<4>(qkv, bb, aa, convW, convState, aLog, dtBias, state, out, p, tid, bid, qk, vs, red, gates);
}
kernel void gdn_step_s8(device const float* qkv [[buffer(0)]], device const float* z [[buffer(1)]],
    device const float* bb [[buffer(2)]], device const float* aa [[buffer(3)]], device const float* convW [[buffer(4)]],
    device float* convState [[buffer(5)]], device const float* aLog [[buffer(6)]], device const float* dtBias [[buffer(7)]],
    device const float* normW [[buffer(8)]], device float* state [[buffer(9)]], device float* out [[buffer(10)]],
    constant GdnParams& p [[buffer(11)]], uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float qk[2 * GDN_D];
  threadgroup float vs[GDN_D];
  threadgroup float red[8];
  threadgroup float gates[2];
  gdn_step<2>(qkv, bb, aa, convW, convState, aLog, dtBias, state, out, p, tid, bid, qk, vs, red, gates);
}
kernel void gdn_step_s16(device const float* qkv [[buffer(0)]], device const float* z [[buffer(1)]],
    device const float* bb [[buffer(2)]], device const float* aa [[buffer(3)]], device const float* convW [[buffer(4)]],
    device float* convState [[buffer(5)]], device const float* aLog [[buffer(6)]], device const float* dtBias [[buffer(7)]],
    device const float* normW [[buffer(8)]], device float* state [[buffer(9)]], device float* out [[buffer(10)]],
    constant GdnParams& p [[buffer(11)]], uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float qk[2 * GDN_D];
  threadgroup float vs[GDN_D];
  threadgroup float red[8];
  threadgroup float gates[2];
  gdn_step<1>(qkv, bb, aa, convW, convState, aLog, dtBias, state, out, p, tid, bid, qk, vs, red, gates);
}

kernel void gdn_finish(device const float* qkv [[buffer(0)]], device const float* z [[buffer(1)]],
    device const float* bb [[buffer(2)]], device const float* aa [[buffer(3)]], device const float* convW [[buffer(4)]],
    device float* convState [[buffer(5)]], device const float* aLog [[buffer(6)]], device const float* dtBias [[buffer(7)]],
    device const float* normW [[buffer(8)]], device float* state [[buffer(9)]], device float* out [[buffer(10)]],
    constant GdnParams& p [[buffer(11)]], uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float red[8];
  const int j = int(bid), lane = tid & 31, warp = tid >> 5;
  const int C = (2 * p.Hk + p.Hv) * GDN_D;
  if (j < p.Hk) {
    // Key head j's q (threads 0-127) and k (128-255) channels.
    const int ch = int(tid) < GDN_D ? j * GDN_D + int(tid) : (p.Hk + j) * GDN_D + int(tid) - GDN_D;
    convState[ch] = convState[C + ch];
    convState[C + ch] = convState[2 * C + ch];
    convState[2 * C + ch] = qkv[ch];
  }
  device float* oh = out + ulong(j) * GDN_D;
  const float ov = int(tid) < GDN_D ? oh[tid] : 0.f;
  const float ss = warp_sum(ov * ov);
  if (lane == 0) red[warp] = ss;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (int(tid) < GDN_D) {
    const float inv = 1.f / sqrt((red[0] + red[1] + red[2] + red[3]) / GDN_D + p.eps);
    oh[tid] = ov * inv * normW[tid] * gsilu(z[j * GDN_D + int(tid)]);
  }
}
