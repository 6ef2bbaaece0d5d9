// ops.metal: plain kernels for every op of engine/backend at any number of
// rows (a prefill chunk or one token), any head size, bit width and group
// size the format allows: the sibling of engine/cuda/kernels/ops.cu, the
// general path where no fused decode kernel (qmv, route, moe, attn) takes
// the op. Each kernel is a row loop or a grid over rows, float32
// throughout; the position is read on the device. A quantised matrix is
// three buffers (codes, bf16 scales, bf16 biases) and a QShape (params.h)
// in a small constant table, where ops.cu reads a QDesc table with the
// pointers in it.
//
// Where ops.cu computes in float64 (delta_rule's gates, route_select's
// softmax), these use float32 (exp_acc, rowmath.h): Apple GPUs have none.
// Threadgroups are laid out as the CUDA blocks (a simdgroup is a warp of
// 32); two-dimensional grids are (x, y) as there.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "rowmath.h"
#include "rope.h"

// embed_rows: grid rows, threadgroup 256. out[r] = table row tokens[r];
// an id outside the vocabulary gives a row of NaN.
kernel void embed_rows(device const uint* tw [[buffer(0)]], device const ushort* ts [[buffer(1)]],
                       device const ushort* tb [[buffer(2)]], constant QShape* table [[buffer(3)]],
                       device const int* tokens [[buffer(4)]], device float* out [[buffer(5)]],
                       uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                       uint ntid [[threads_per_threadgroup]]) {
  const QMat d = qmat(tw, ts, tb, table[0]);
  const int r = int(bid), id = tokens[r];
  const bool ok = id >= 0 && id < d.rows;
  for (int c = int(tid); c < d.cols; c += int(ntid))
    out[ulong(r) * ulong(d.cols) + ulong(c)] = ok ? qweight(d, ulong(id), c) : f32_nan();
}

// add_rmsnorm: grid rows, threadgroup 256. h += delta (where p.hasDelta),
// then out = h/rms(h)·w.
kernel void add_rmsnorm(device float* h [[buffer(0)]], device const float* delta [[buffer(1)]],
                        device const float* w [[buffer(2)]], device float* out [[buffer(3)]],
                        constant NormParams& p [[buffer(4)]], uint tid [[thread_position_in_threadgroup]],
                        uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  threadgroup float red[32];
  const ulong base = ulong(bid) * ulong(p.dim);
  add_rmsnorm_row(h + base, delta + base, w, out + base, p.dim, p.hasDelta != 0, p.eps, red, int(tid), int(ntid));
}

// qgemm: y[T, R] = x[T, C] · Wᵀ, a plain tiled GEMM with the weights
// dequantised into threadgroup memory: tiles of TM weight rows × TN
// tokens, grid (ceil(R/TM), ceil(T/TN)), threadgroup 256 (16 × 16
// threads, each TM/16 weight rows × TN/16 tokens). y rows are p.ldy
// apart. qgemm has 64 × 64 tiles, qgemm_s 32 × 32 (the narrow products).
// The CUDA kernel stages 64 columns of both operands at once (34 KiB for
// 64 × 64 tiles with its padding); Metal has 32 KiB, so this one stages
// them in halves of GK_STAGE and keeps ops.cu's order of additions: each
// 64 columns' products summed apart (in column order), then added to the
// total, so that the rounding grows with 64 + C/64 terms, not with C.
#define GK 64
#define GK_STAGE 32
template <int TM, int TN>
static inline void qgemm_tiles(thread const QMat& d, device const float* x, device float* y, constant GemmParams& p,
                               int t, uint2 bid, threadgroup float (*ws)[TM + 4], threadgroup float (*xs)[TN + 4]) {
  const int PM = TM / 16, PN = TN / 16;
  const int tm = t & 15, tn = t >> 4;
  const long m0 = long(bid.x) * TM;
  const int n0 = int(bid.y) * TN;
  float acc[PM][PN];
  float part[PM][PN];
  for (int i = 0; i < PM; i++)
    for (int j = 0; j < PN; j++) acc[i][j] = 0.f, part[i][j] = 0.f;
  for (int k0 = 0; k0 < d.cols; k0 += GK_STAGE) {
    for (int e = t; e < TM * GK_STAGE; e += 256) {
      const int m = e / GK_STAGE, k = e % GK_STAGE;
      const long r = m0 + m;
      ws[k][m] = r < d.rows && k0 + k < d.cols ? qweight(d, ulong(r), k0 + k) : 0.f;
    }
    for (int e = t; e < TN * GK_STAGE; e += 256) {
      const int n = e / GK_STAGE, k = e % GK_STAGE;
      xs[k][n] = n0 + n < p.T && k0 + k < d.cols ? x[ulong(n0 + n) * ulong(d.cols) + ulong(k0 + k)] : 0.f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (int k = 0; k < GK_STAGE; k++) {
      float a[PM], b[PN];
      for (int i = 0; i < PM; i++) a[i] = ws[k][tm + 16 * i];
      for (int j = 0; j < PN; j++) b[j] = xs[k][tn + 16 * j];
      for (int i = 0; i < PM; i++)
        for (int j = 0; j < PN; j++) part[i][j] += a[i] * b[j];
    }
    // the end of a 64-column tile of ops.cu (or of the row)
    if ((k0 + GK_STAGE) % GK == 0 || k0 + GK_STAGE >= d.cols) {
      for (int i = 0; i < PM; i++)
        for (int j = 0; j < PN; j++) acc[i][j] += part[i][j], part[i][j] = 0.f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  for (int i = 0; i < PM; i++)
    for (int j = 0; j < PN; j++) {
      const long r = m0 + tm + 16 * i;
      const int n = n0 + tn + 16 * j;
      if (r < d.rows && n < p.T) y[ulong(n) * ulong(p.ldy) + ulong(r)] = acc[i][j];
    }
}

kernel void qgemm(device const uint* ww [[buffer(0)]], device const ushort* wsc [[buffer(1)]],
                  device const ushort* wb [[buffer(2)]], constant QShape* wd [[buffer(3)]],
                  device const float* x [[buffer(4)]], device float* y [[buffer(5)]],
                  constant GemmParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                  uint2 bid [[threadgroup_position_in_grid]]) {
  threadgroup float ws[GK_STAGE][64 + 4];
  threadgroup float xs[GK_STAGE][64 + 4];
  const QMat d = qmat(ww, wsc, wb, wd[0]);
  qgemm_tiles<64, 64>(d, x, y, p, int(tid), bid, ws, xs);
}

kernel void qgemm_s(device const uint* ww [[buffer(0)]], device const ushort* wsc [[buffer(1)]],
                    device const ushort* wb [[buffer(2)]], constant QShape* wd [[buffer(3)]],
                    device const float* x [[buffer(4)]], device float* y [[buffer(5)]],
                    constant GemmParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                    uint2 bid [[threadgroup_position_in_grid]]) {
  threadgroup float ws[GK_STAGE][32 + 4];
  threadgroup float xs[GK_STAGE][32 + 4];
  const QMat d = qmat(ww, wsc, wb, wd[0]);
  qgemm_tiles<32, 32>(d, x, y, p, int(tid), bid, ws, xs);
}

// conv_silu: grid (ceil(C/256), ceil(rows/CONV_ROWS)), threadgroup 256, a
// thread per channel and block of CONV_ROWS rows: the causal depthwise
// conv of width K (at most 16, so CONV_ROWS >= K-1) over [state; x], SiLU.
// A block's window starts in x, or for the first block in the state; the
// first block also advances the state to the last K-1 inputs once it has
// read it (no other block reads it).
#define CONV_ROWS 32
static inline float conv_in(device const float* x, device const float* state, int i, int c, int C, int K) {
  return i >= 0 ? x[ulong(i) * ulong(C) + ulong(c)] : state[ulong(i + K - 1) * ulong(C) + ulong(c)];
}
kernel void conv_silu(device const float* x [[buffer(0)]], device float* state [[buffer(1)]],
                      device const float* w [[buffer(2)]], device float* out [[buffer(3)]],
                      constant ConvParams& p [[buffer(4)]], uint2 tid [[thread_position_in_threadgroup]],
                      uint2 bid [[threadgroup_position_in_grid]], uint2 ntid [[threads_per_threadgroup]]) {
  const int C = p.C, K = p.K, rows = p.rows;
  const int c = int(bid.x * ntid.x + tid.x);
  if (c >= C) return;
  const int r0 = int(bid.y) * CONV_ROWS, r1 = min(rows, r0 + CONV_ROWS);
  float wk[16], win[16];
  for (int j = 0; j < K; j++) wk[j] = w[ulong(c) * ulong(K) + ulong(j)];
  for (int j = 0; j < K - 1; j++) win[j] = conv_in(x, state, r0 - (K - 1) + j, c, C, K);
  for (int r = r0; r < r1; r++) {
    const float xv = x[ulong(r) * ulong(C) + ulong(c)];
    float s = wk[K - 1] * xv;
    for (int j = 0; j < K - 1; j++) s += wk[j] * win[j];
    out[ulong(r) * ulong(C) + ulong(c)] = fsilu(s);
    for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
    if (K > 1) win[K - 2] = xv;
  }
  if (r0 == 0) {
    // row rows-(K-1)+j of the input; where that is still in the state
    // (rows < K-1) it is a later row of it than j, not yet overwritten
    for (int j = 0; j < K - 1; j++) state[ulong(j) * ulong(C) + ulong(c)] = conv_in(x, state, rows - (K - 1) + j, c, C, K);
  }
}

// softplus(x) = log(1 + e^x): x itself past 20, a series where e^x is
// small (dsoftplus of rowmath.h, in float32).
static inline float softplus_acc(float x) {
  if (x > 20.f) return x;
  const float e = exp_acc(x);
  if (e < 1e-3f) return e * (1.f - e * (0.5f - e * (1.f / 3.f)));
  return log(1.f + e);
}

// delta_rule: the gated delta rule token by token; a simdgroup owns row a
// of value head j's state (rows are independent given q, k, beta and g),
// its Dk (at most 256) columns in registers, 8 per lane. Grid
// ceil(Hv·Dv/8), threadgroup 256. Each simdgroup computes its head's norms
// and gates itself (in float32: ops.cu's are float64).
#define DR_PER 8
kernel void delta_rule(device const float* qkv [[buffer(0)]], device const float* bb [[buffer(1)]],
                       device const float* aa [[buffer(2)]], device const float* aLog [[buffer(3)]],
                       device const float* dtBias [[buffer(4)]], device float* state [[buffer(5)]],
                       device float* out [[buffer(6)]], constant DeltaParams& p [[buffer(7)]],
                       uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                       uint ntid [[threads_per_threadgroup]]) {
  const int lane = int(tid) & 31;
  const int task = int(bid) * int(ntid >> 5) + int(tid >> 5);
  const int Hk = p.Hk, Dk = p.Dk, Hv = p.Hv, Dv = p.Dv;
  if (task >= Hv * Dv) return;
  const int j = task / Dv, a = task % Dv, kh = j / (Hv / Hk);
  const int width = 2 * Hk * Dk + Hv * Dv;
  device float* srow = state + (ulong(j) * ulong(Dv) + ulong(a)) * ulong(Dk);
  float s[DR_PER];
  for (int i = 0; i < DR_PER; i++) {
    const int c = lane + 32 * i;
    s[i] = c < Dk ? srow[c] : 0.f;
  }
  const float decay = exp_acc(aLog[j]);
  const float qscale = 1.f / sqrt(float(Dk));
  for (int r = 0; r < p.rows; r++) {
    device const float* row = qkv + ulong(r) * ulong(width);
    float q[DR_PER], k[DR_PER], qs = 0.f, ks = 0.f;
    for (int i = 0; i < DR_PER; i++) {
      const int c = lane + 32 * i;
      q[i] = c < Dk ? row[kh * Dk + c] : 0.f;
      k[i] = c < Dk ? row[(Hk + kh) * Dk + c] : 0.f;
      qs += q[i] * q[i];
      ks += k[i] * k[i];
    }
    qs = warp_sum(qs), ks = warp_sum(ks);
    const float qinv = qscale / sqrt(qs + 1e-6f), kinv = 1.f / sqrt(ks + 1e-6f);
    const float v = row[2 * Hk * Dk + j * Dv + a];
    const float beta = 1.f / (1.f + exp_acc(-bb[ulong(r) * ulong(Hv) + ulong(j)]));
    const float g = exp_acc(-decay * softplus_acc(aa[ulong(r) * ulong(Hv) + ulong(j)] + dtBias[j]));
    float sk = 0.f;
    for (int i = 0; i < DR_PER; i++) {
      k[i] *= kinv, q[i] *= qinv;
      s[i] *= g;
      sk += s[i] * k[i];
    }
    sk = warp_sum(sk);
    const float dlt = beta * (v - sk);
    float o = 0.f;
    for (int i = 0; i < DR_PER; i++) {
      s[i] += dlt * k[i];
      o += s[i] * q[i];
    }
    o = warp_sum(o);
    if (lane == 0) out[(ulong(r) * ulong(Hv) + ulong(j)) * ulong(Dv) + ulong(a)] = o;
  }
  for (int i = 0; i < DR_PER; i++) {
    const int c = lane + 32 * i;
    if (c < Dk) srow[c] = s[i];
  }
}

// gated_rmsnorm: a simdgroup per (row, head) of dim values, threadgroup
// 256: x/rms(x)·w·silu(z).
kernel void gated_rmsnorm(device const float* x [[buffer(0)]], device const float* z [[buffer(1)]],
                          device const float* w [[buffer(2)]], device float* out [[buffer(3)]],
                          constant GatedNormParams& p [[buffer(4)]], uint tid [[thread_position_in_threadgroup]],
                          uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  const int lane = int(tid) & 31;
  const int task = int(bid) * int(ntid >> 5) + int(tid >> 5);
  if (task >= p.count) return;
  const ulong base = ulong(task) * ulong(p.dim);
  float ss = 0.f;
  for (int i = lane; i < p.dim; i += 32) ss += x[base + i] * x[base + i];
  ss = warp_sum(ss);
  const float inv = 1.f / sqrt(ss / p.dim + p.eps);
  for (int i = lane; i < p.dim; i += 32) out[base + i] = x[base + i] * inv * w[i] * fsilu(z[base + i]);
}

static inline void kv_put(device float* p, float v) { *p = v; }
static inline void kv_put(device ushort* p, float v) { *p = f32_to_bf16(v); }
static inline float kv_get(device const float* p) { return *p; }
static inline float kv_get(device const ushort* p) { return bf16_to_f32(*p); }

// qk_prep_rows: grid (QH+KVH, rows), threadgroup 32·ceil(D/32) (D at most
// QKR_MAX_D). Threadgroup (h, r) norms head h of row r (a query head, or
// key head h-QH), rotates it at position *pos + r, and writes the query,
// or the key and value into the caches at that row (no write at or past
// maxPos). invFreq holds rot/2 (hi, lo) pairs (rope.h), where ops.cu
// takes float64 inverse frequencies.
#define QKR_MAX_D 1024
template <typename T>
static inline void qk_prep_rows(device const float* qg, device const float* k, device const float* v,
                                device const float* qn, device const float* kn, device float* q, device T* kc,
                                device T* vc, device const int* pos, device const float* invFreq,
                                constant QKPrepRowsParams& p, int d, int nt, uint2 bid, threadgroup float* xn,
                                threadgroup float* red) {
  const int h = int(bid.x), r = int(bid.y), D = p.D, QH = p.QH, KVH = p.KVH;
  const bool isQ = h < QH;
  const int g = h - QH;
  float x = 0.f;
  if (d < D) x = isQ ? qg[(ulong(r) * ulong(QH) + ulong(h)) * 2 * ulong(D) + ulong(d)] : k[(ulong(r) * ulong(KVH) + ulong(g)) * ulong(D) + ulong(d)];
  const float ss = block_sum(x * x, red, d, nt);
  const float y = d < D ? x * (1.f / sqrt(ss / D + p.eps)) * (isQ ? qn[d] : kn[d]) : 0.f;
  if (d < D) xn[d] = y;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (d >= D) return;
  float o = y;
  const int at = *pos + r, hr = p.rot / 2;
  if (d < p.rot) {
    const int i = d < hr ? d : d - hr;
    float sn, cs;
    rope_sincos(at, invFreq[2 * i], invFreq[2 * i + 1], sn, cs);
    const float x1 = xn[i], x2 = xn[i + hr];
    o = d < hr ? x1 * cs - x2 * sn : x1 * sn + x2 * cs;
  }
  if (isQ) {
    q[(ulong(r) * ulong(QH) + ulong(h)) * ulong(D) + ulong(d)] = o;
  } else if (at < p.maxPos) {
    const ulong row = (ulong(at) * ulong(KVH) + ulong(g)) * ulong(D) + ulong(d);
    kv_put(kc + row, o);
    kv_put(vc + row, v[(ulong(r) * ulong(KVH) + ulong(g)) * ulong(D) + ulong(d)]);
  }
}

kernel void qk_prep_rows_f32(device const float* qg [[buffer(0)]], device const float* k [[buffer(1)]],
                             device const float* v [[buffer(2)]], device const float* qn [[buffer(3)]],
                             device const float* kn [[buffer(4)]], device float* q [[buffer(5)]],
                             device float* kc [[buffer(6)]], device float* vc [[buffer(7)]],
                             device const int* pos [[buffer(8)]], device const float* invFreq [[buffer(9)]],
                             constant QKPrepRowsParams& p [[buffer(10)]], uint tid [[thread_position_in_threadgroup]],
                             uint ntid [[threads_per_threadgroup]], uint2 bid [[threadgroup_position_in_grid]]) {
  threadgroup float xn[QKR_MAX_D];
  threadgroup float red[32];
  qk_prep_rows<float>(qg, k, v, qn, kn, q, kc, vc, pos, invFreq, p, int(tid), int(ntid), bid, xn, red);
}
kernel void qk_prep_rows_bf16(device const float* qg [[buffer(0)]], device const float* k [[buffer(1)]],
                              device const float* v [[buffer(2)]], device const float* qn [[buffer(3)]],
                              device const float* kn [[buffer(4)]], device float* q [[buffer(5)]],
                              device ushort* kc [[buffer(6)]], device ushort* vc [[buffer(7)]],
                              device const int* pos [[buffer(8)]], device const float* invFreq [[buffer(9)]],
                              constant QKPrepRowsParams& p [[buffer(10)]], uint tid [[thread_position_in_threadgroup]],
                              uint ntid [[threads_per_threadgroup]], uint2 bid [[threadgroup_position_in_grid]]) {
  threadgroup float xn[QKR_MAX_D];
  threadgroup float red[32];
  qk_prep_rows<ushort>(qg, k, v, qn, kn, q, kc, vc, pos, invFreq, p, int(tid), int(ntid), bid, xn, red);
}

// attn_rows: a simdgroup per (row, query head), grid ceil(rows·QH/8),
// threadgroup 256: causal attention over cache rows 0..*pos+row with an
// online softmax in float32 (scores in log2 units, exp2), the head's D (at
// most 32·J) values J per lane, then times sigmoid of the gate that
// follows the query in qg.
template <typename T, int J>
static inline void attn_rows(device const float* q, device const float* qg, device const T* kc, device const T* vc,
                             device const int* pos, device float* out, constant AttnRowsParams& p, uint tid, uint bid,
                             uint ntid) {
  const int lane = int(tid) & 31;
  const int task = int(bid) * int(ntid >> 5) + int(tid >> 5);
  const int QH = p.QH, KVH = p.KVH, D = p.D;
  if (task >= p.rows * QH) return;
  const int r = task / QH, h = task % QH, kv = h / (QH / KVH);
  const int n = *pos + r + 1;
  const float scale = 1.4426950408889634f / sqrt(float(D));
  float qv[J], acc[J];
  for (int i = 0; i < J; i++) {
    const int c = lane + 32 * i;
    qv[i] = c < D ? q[(ulong(r) * ulong(QH) + ulong(h)) * ulong(D) + ulong(c)] * scale : 0.f;
    acc[i] = 0.f;
  }
  float m = -f32_inf(), l = 0.f;
  const ulong stride = ulong(KVH) * ulong(D);
  for (int s = 0; s < n; s++) {
    device const T* kr = kc + ulong(s) * stride + ulong(kv * D);
    device const T* vr = vc + ulong(s) * stride + ulong(kv * D);
    float dot = 0.f;
    for (int i = 0; i < J; i++) {
      const int c = lane + 32 * i;
      if (c < D) dot += qv[i] * kv_get(kr + c);
    }
    dot = warp_sum(dot);
    const float mn = fmax(m, dot);
    const float c = exp2(m - mn), e = exp2(dot - mn);
    l = l * c + e;
    for (int i = 0; i < J; i++) {
      const int cc = lane + 32 * i;
      acc[i] = acc[i] * c + (cc < D ? e * kv_get(vr + cc) : 0.f);
    }
    m = mn;
  }
  for (int i = 0; i < J; i++) {
    const int c = lane + 32 * i;
    if (c < D) {
      const float gate = qg[(ulong(r) * ulong(QH) + ulong(h)) * 2 * ulong(D) + ulong(D + c)];
      out[(ulong(r) * ulong(QH) + ulong(h)) * ulong(D) + ulong(c)] = acc[i] / l * fsigmoid(gate);
    }
  }
}

// The entries, one per cache type and J (written out: metal2cu reads the
// kernels from the source as written).
kernel void attn_rows_f32_j2(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                             device const float* kc [[buffer(2)]], device const float* vc [[buffer(3)]],
                             device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                             constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                             uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<float, 2>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_f32_j4(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                             device const float* kc [[buffer(2)]], device const float* vc [[buffer(3)]],
                             device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                             constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                             uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<float, 4>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_f32_j8(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                             device const float* kc [[buffer(2)]], device const float* vc [[buffer(3)]],
                             device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                             constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                             uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<float, 8>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_f32_j16(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                              device const float* kc [[buffer(2)]], device const float* vc [[buffer(3)]],
                              device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                              constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                              uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<float, 16>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_bf16_j2(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                              device const ushort* kc [[buffer(2)]], device const ushort* vc [[buffer(3)]],
                              device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                              constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                              uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<ushort, 2>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_bf16_j4(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                              device const ushort* kc [[buffer(2)]], device const ushort* vc [[buffer(3)]],
                              device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                              constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                              uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<ushort, 4>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_bf16_j8(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                              device const ushort* kc [[buffer(2)]], device const ushort* vc [[buffer(3)]],
                              device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                              constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                              uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<ushort, 8>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}
kernel void attn_rows_bf16_j16(device const float* q [[buffer(0)]], device const float* qg [[buffer(1)]],
                               device const ushort* kc [[buffer(2)]], device const ushort* vc [[buffer(3)]],
                               device const int* pos [[buffer(4)]], device float* out [[buffer(5)]],
                               constant AttnRowsParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                               uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  attn_rows<ushort, 16>(q, qg, kc, vc, pos, out, p, tid, bid, ntid);
}

// route_select_rows (ops.cu's route_select; route.metal's route_select is
// the one-token kernel): a simdgroup per row of router logits [rows, E]
// (grid rows, threadgroup 32, E at most ROUTE_ROWS_MAX_E): the topK largest
// logits (the lower id first on ties; NaN never chosen first), their
// softmax probabilities over all E, renormalised over the chosen when
// p.normalize. The softmax is float32 (exp_acc), where ops.cu's is float64.
#define ROUTE_ROWS_MAX_E 4096
kernel void route_select_rows(device const float* logits [[buffer(0)]], device int* ids [[buffer(1)]],
                              device float* wts [[buffer(2)]], constant RouteRowsParams& p [[buffer(3)]],
                              uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]]) {
  threadgroup uchar taken[ROUTE_ROWS_MAX_E];
  const int lane = int(tid), r = int(bid), E = p.E, topK = p.topK;
  device const float* l = logits + ulong(r) * ulong(E);
  float m = -f32_inf();
  for (int e = lane; e < E; e += 32) {
    taken[e] = 0;
    if (!is_nan(l[e])) m = fmax(m, l[e]);
  }
  m = simd_max(m);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32)
    if (!is_nan(l[e])) sum += exp_acc(l[e] - m);
  sum = warp_sum(sum);
  simdgroup_barrier(mem_flags::mem_threadgroup);
  float chosen = 0.f;
  for (int k = 0; k < topK; k++) {
    // best key: the logit's order, then the lower id
    ulong best = 0;
    for (int e = lane; e < E; e += 32) {
      if (taken[e] != 0) continue;
      const float v = l[e];
      const uint bits = as_type<uint>(v + 0.f);
      const uint ord = is_nan(v) ? 0u : bits ^ (uint(int(bits) >> 31) | 0x80000000u);
      const ulong key = ulong(ord) << 32 | ulong(0xffffffffu - uint(e));
      best = key > best ? key : best;
    }
    best = warp_max_u64(best);
    const int e = best == 0 ? 0 : int(0xffffffffu - uint(best));  // 0: nothing but NaN left
    const float pr = exp_acc(l[e] - m) / sum;
    if (lane == 0) {
      taken[e] = 1;
      ids[ulong(r) * ulong(topK) + ulong(k)] = e;
      wts[ulong(r) * ulong(topK) + ulong(k)] = pr;
    }
    chosen += pr;
    simdgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (p.normalize != 0) {
    simdgroup_barrier(mem_flags::mem_device);
    for (int k = lane; k < topK; k += 32) {
      const int e = ids[ulong(r) * ulong(topK) + ulong(k)];
      wts[ulong(r) * ulong(topK) + ulong(k)] = exp_acc(l[e] - m) / sum / chosen;
    }
  }
}

// experts_gate_up: a simdgroup per task, grid ceil(tasks/8), threadgroup
// 256. Per row t of x there are topK·inter routed tasks (slot k, row i of
// expert ids[t,k]'s gate and up), sinter shared-expert tasks and one for
// the shared expert gate's logit: h[t] = [silu(g)·u per slot and row |
// shared], logit[t]. An expert id outside the stack gives NaN. shapes is
// ops.cu's descriptor table: gate, up, shared gate, shared up, shared
// expert gate, down, shared down.
kernel void experts_gate_up(device const uint* gw [[buffer(0)]], device const ushort* gs [[buffer(1)]],
                            device const ushort* gb [[buffer(2)]], device const uint* uw [[buffer(3)]],
                            device const ushort* us [[buffer(4)]], device const ushort* ub [[buffer(5)]],
                            device const uint* sgw [[buffer(6)]], device const ushort* sgs [[buffer(7)]],
                            device const ushort* sgb [[buffer(8)]], device const uint* suw [[buffer(9)]],
                            device const ushort* sus [[buffer(10)]], device const ushort* sub [[buffer(11)]],
                            device const uint* segw [[buffer(12)]], device const ushort* segs [[buffer(13)]],
                            device const ushort* segb [[buffer(14)]], constant QShape* shapes [[buffer(15)]],
                            device const int* ids [[buffer(16)]], device const float* x [[buffer(17)]],
                            device float* h [[buffer(18)]], device float* logit [[buffer(19)]],
                            constant ExpertsParams& p [[buffer(20)]], uint tid [[thread_position_in_threadgroup]],
                            uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  const int lane = int(tid) & 31;
  const long task = long(bid) * long(ntid >> 5) + long(tid >> 5);
  const int topK = p.topK, inter = p.inter, sinter = p.sinter;
  const int per = topK * inter + sinter + 1;
  if (task >= long(p.rows) * per) return;
  const int t = int(task / per), u = int(task % per);
  const QMat gate = qmat(gw, gs, gb, shapes[0]);
  device const float* xr = x + ulong(t) * ulong(gate.cols);
  const ulong hb = ulong(t) * ulong(topK * inter + sinter);
  if (u < topK * inter) {
    const int k = u / inter, i = u % inter;
    const int e = ids[ulong(t) * ulong(topK) + ulong(k)];
    if (e < 0 || long(e + 1) * inter > gate.rows) {
      if (lane == 0) h[hb + u] = f32_nan();
      return;
    }
    const float g = qrow_dot(gate, ulong(e) * ulong(inter) + ulong(i), xr, lane);
    const QMat up = qmat(uw, us, ub, shapes[1]);
    const float v = qrow_dot(up, ulong(e) * ulong(inter) + ulong(i), xr, lane);
    if (lane == 0) h[hb + u] = fsilu(g) * v;
  } else if (u < topK * inter + sinter) {
    const int i = u - topK * inter;
    const QMat sgate = qmat(sgw, sgs, sgb, shapes[2]), sup = qmat(suw, sus, sub, shapes[3]);
    const float g = qrow_dot(sgate, ulong(i), xr, lane);
    const float v = qrow_dot(sup, ulong(i), xr, lane);
    if (lane == 0) h[hb + u] = fsilu(g) * v;
  } else {
    const QMat seg = qmat(segw, segs, segb, shapes[4]);
    const float s = qrow_dot(seg, 0, xr, lane);
    if (lane == 0) logit[t] = s;
  }
}

// experts_down: a simdgroup per (row t, output d), grid ceil(rows·dim/8),
// threadgroup 256: Σ_k wts[t,k]·down_{ids[t,k]}[d]·h[t,k] +
// sigmoid(logit[t])·sdown[d]·h[t,shared]. shapes is experts_gate_up's
// table (down at 5, shared down at 6).
kernel void experts_down(device const uint* dw [[buffer(0)]], device const ushort* ds [[buffer(1)]],
                         device const ushort* db [[buffer(2)]], device const uint* sdw [[buffer(3)]],
                         device const ushort* sds [[buffer(4)]], device const ushort* sdb [[buffer(5)]],
                         constant QShape* shapes [[buffer(6)]], device const int* ids [[buffer(7)]],
                         device const float* wts [[buffer(8)]], device const float* h [[buffer(9)]],
                         device const float* logit [[buffer(10)]], device float* out [[buffer(11)]],
                         constant ExpertsParams& p [[buffer(12)]], uint tid [[thread_position_in_threadgroup]],
                         uint bid [[threadgroup_position_in_grid]], uint ntid [[threads_per_threadgroup]]) {
  const int lane = int(tid) & 31;
  const long task = long(bid) * long(ntid >> 5) + long(tid >> 5);
  const int dim = p.dim, topK = p.topK, inter = p.inter, sinter = p.sinter;
  if (task >= long(p.rows) * dim) return;
  const int t = int(task / dim), d = int(task % dim);
  const QMat down = qmat(dw, ds, db, shapes[5]), sdown = qmat(sdw, sds, sdb, shapes[6]);
  device const float* ht = h + ulong(t) * ulong(topK * inter + sinter);
  float acc = 0.f;
  for (int k = 0; k < topK; k++) {
    const int e = ids[ulong(t) * ulong(topK) + ulong(k)];
    if (e < 0 || long(e + 1) * dim > down.rows) {
      acc = f32_nan();
      break;
    }
    acc += wts[ulong(t) * ulong(topK) + ulong(k)] * qrow_dot(down, ulong(e) * ulong(dim) + ulong(d), ht + k * inter, lane);
  }
  acc += fsigmoid(logit[t]) * qrow_dot(sdown, ulong(d), ht + topK * inter, lane);
  if (lane == 0) out[task] = acc;
}

// advance: one thread, *pos += p.by.
kernel void advance(device int* pos [[buffer(0)]], constant AdvanceParams& p [[buffer(1)]]) { *pos += p.by; }

// convert: dst[i] = src[i] between float types (0 f32, 1 bf16, 2 f16),
// rounding to nearest even as backend.Round does; grid ceil(n/256),
// threadgroup 256. The 16-bit conversions are integer code (the same bits
// on every GPU; f16 subnormals kept).
static inline float f16_to_f32(ushort h) {
  const uint sign = uint(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = float(m) * 5.9604644775390625e-8f;  // m·2^-24, exact
    return as_type<float>(as_type<uint>(v) | sign);
  }
  if (e == 31) return as_type<float>(sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0u));
  return as_type<float>(sign | ((e + 112u) << 23) | (m << 13));
}
static inline ushort f32_to_f16(float f) {
  const uint u = as_type<uint>(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return ushort(sign | 0x7e00u);           // NaN
  if (a >= 0x477ff000u) return ushort(sign | 0x7c00u);          // rounds to inf
  if (a < 0x38800000u) {                                       // below 2^-14: a subnormal or 0
    const float v = rint(as_type<float>(a) * 16777216.f);      // |f|·2^24, exact, rounded to even
    return ushort(sign | uint(v));                             // 1024 is the smallest normal
  }
  const uint r = a + 0xfffu + ((a >> 13) & 1u);
  return ushort(sign | ((r >> 13) - 0x1c000u));
}
static inline float load_as_f32(device const uchar* p, ulong i, int t) {
  if (t == 0) return ((device const float*)p)[i];
  const ushort b = ((device const ushort*)p)[i];
  return t == 1 ? bf16_to_f32(b) : f16_to_f32(b);
}
static inline void store_from_f32(device uchar* p, ulong i, int t, float v) {
  if (t == 0)
    ((device float*)p)[i] = v;
  else
    ((device ushort*)p)[i] = t == 1 ? f32_to_bf16(v) : f32_to_f16(v);
}
kernel void convert(device const uchar* src [[buffer(0)]], device uchar* dst [[buffer(1)]],
                    constant ConvertParams& p [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i < p.n) store_from_f32(dst, ulong(i), p.to, load_as_f32(src, ulong(i), p.from));
}
