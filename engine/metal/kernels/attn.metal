// attn.metal: gated attention of one decoded token (spec 2.4) with GQA, the
// position read on the device: the sibling of engine/cuda/kernels/attn.cu.
//
//   qk_prep_<kv>: q/k RMSNorm (weights as stored), RoPE on the first rot
//     dims in pairs (i, i+rot/2) at position p = *pos, and the KV write at
//     row p (none when p >= maxPos). Apple GPUs have no float64, so where
//     the CUDA kernel evaluates the angle in float64, this one takes each
//     inverse frequency as two floats (hi, lo: hi = float32(f), lo =
//     float32(f - hi), made on the host in float64), forms p·(hi+lo) as a
//     float pair with fma, reduces it by pi/2 in three parts and evaluates
//     sine and cosine on |r| <= pi/4 by series: about 1e-7 absolute at any
//     position. It relies on safe math (fma kept, nothing reassociated).
//   attn_split_<kv>: flash-decoding. Threadgroup (g, s) takes KV head g and
//     the s-th chunk of the n = p+1 cache rows, and all 8 query heads of g,
//     so each K and V row is read once for all of them; it leaves the
//     chunk's softmax state (max, sum in log2 units, unnormalised output per
//     head) in partials.
//   attn_combine: per query head, the chunks' states merged, the output
//     times sigmoid(gate).
//
// The number of chunks adapts to n on the device (ceil(n/minChunk), at most
// maxSplits). Head dim 256, 8 query heads per KV head; KV rows
// [pos][KVH][256] in float32 or bf16 (ushort). The CUDA kernel merges its
// eight simdgroups' states through 64 KiB of shared memory; Metal has 32
// KiB, so this one merges one head at a time through 8 KiB.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"
#include "rope.h"

#define ATT_D 256
#define ATT_G 8
#define ATT_SIMDGROUPS 8
#define ATT_TILE 4

static inline void kv_store(device float* p, float v) { *p = v; }
static inline void kv_store(device ushort* p, float v) { *p = f32_to_bf16(v); }

// kv_row loads a lane's 8 values of a cache row as floats.
static inline void kv_row(device const float* p, thread float* o) {
  for (int e = 0; e < 8; e++) o[e] = p[e];
}
static inline void kv_row(device const ushort* p, thread float* o) {
  for (int e = 0; e < 8; e++) o[e] = bf16_to_f32(p[e]);
}

// qk_prep: QH+KVH threadgroups of ATT_D threads: threadgroup h < QH
// prepares query head h into q; QH+g key head g into kc and value head g
// into vc at row *pos. invFreq holds rot/2 (hi, lo) pairs.
template <typename T>
static inline void qk_prep(device const float* qg, device const float* k, device const float* v,
                           device const float* qn, device const float* kn, device float* q, device T* kc, device T* vc,
                           device const int* pos, device const float* invFreq, constant QKPrepParams& p, uint tid,
                           uint bid, threadgroup float* xn, threadgroup float* red) {
  const int d = int(tid), lane = d & 31, warp = d >> 5, h = int(bid);
  const bool isQ = h < p.QH;
  const int g = h - p.QH;
  const float x = isQ ? qg[ulong(h) * 2 * ATT_D + ulong(d)] : k[g * ATT_D + d];
  const float ss = warp_sum(x * x);
  if (lane == 0) red[warp] = ss;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float tot = 0.f;
  for (int w = 0; w < ATT_D / 32; w++) tot += red[w];
  const float y = x * (1.f / sqrt(tot / ATT_D + p.eps)) * (isQ ? qn[d] : kn[d]);
  xn[d] = y;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float r = y;
  const int at = *pos, hr = p.rot / 2;  // (half is a type in MSL)
  if (d < p.rot) {
    const int i = d < hr ? d : d - hr;
    float sn, cs;
    rope_sincos(at, invFreq[2 * i], invFreq[2 * i + 1], sn, cs);
    const float x1 = xn[i], x2 = xn[i + hr];
    r = d < hr ? x1 * cs - x2 * sn : x1 * sn + x2 * cs;
  }
  if (isQ) {
    q[h * ATT_D + d] = r;
  } else if (at < p.maxPos) {
    const ulong row = (ulong(at) * ulong(p.KVH) + ulong(g)) * ATT_D + ulong(d);
    kv_store(kc + row, r);
    kv_store(vc + row, v[g * ATT_D + d]);
  }
}

kernel void qk_prep_f32(device const float* qg [[buffer(0)]], device const float* k [[buffer(1)]],
                        device const float* v [[buffer(2)]], device const float* qn [[buffer(3)]],
                        device const float* kn [[buffer(4)]], device float* q [[buffer(5)]],
                        device float* kc [[buffer(6)]], device float* vc [[buffer(7)]],
                        device const int* pos [[buffer(8)]], device const float* invFreq [[buffer(9)]],
                        constant QKPrepParams& p [[buffer(10)]], uint tid [[thread_position_in_threadgroup]],
                        uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float xn[ATT_D];
  threadgroup float red[ATT_D / 32];
  qk_prep<float>(qg, k, v, qn, kn, q, kc, vc, pos, invFreq, p, tid, bid, xn, red);
}
kernel void qk_prep_bf16(device const float* qg [[buffer(0)]], device const float* k [[buffer(1)]],
                         device const float* v [[buffer(2)]], device const float* qn [[buffer(3)]],
                         device const float* kn [[buffer(4)]], device float* q [[buffer(5)]],
                         device ushort* kc [[buffer(6)]], device ushort* vc [[buffer(7)]],
                         device const int* pos [[buffer(8)]], device const float* invFreq [[buffer(9)]],
                         constant QKPrepParams& p [[buffer(10)]], uint tid [[thread_position_in_threadgroup]],
                         uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float xn[ATT_D];
  threadgroup float red[ATT_D / 32];
  qk_prep<ushort>(qg, k, v, qn, kn, q, kc, vc, pos, invFreq, p, tid, bid, xn, red);
}

static inline void att_chunks(int n, int maxSplits, int minChunk, thread int& nsp, thread int& chunk) {
  nsp = (n + minChunk - 1) / minChunk;
  nsp = nsp < maxSplits ? nsp : maxSplits;
  chunk = (n + nsp - 1) / nsp;
}

// attn_split: KVH*maxSplits threadgroups of ATT_SIMDGROUPS*32 threads.
// Partials: po [KVH][maxSplits][8][256], pml [KVH][maxSplits][8][2].
template <typename T>
static inline void attn_split(device const float* q, device const T* kc, device const T* vc, device const int* pos,
                              device float* po, device float* pml, constant AttnSplitParams& p, uint tid, uint bid,
                              threadgroup float* pw, threadgroup float* so, threadgroup float* sml) {
  const int lane = tid & 31, warp = tid >> 5;
  const int g = int(bid) / p.maxSplits, sp = int(bid) % p.maxSplits;
  const int n = *pos + 1;
  int nsp, chunk;
  att_chunks(n, p.maxSplits, p.minChunk, nsp, chunk);
  if (sp >= nsp) return;
  const int begin = sp * chunk, end = begin + chunk < n ? begin + chunk : n;

  // This lane's 8 dims of the group's 8 queries, scaled by log2(e)/16.
  float qr[ATT_G][8], o[ATT_G][8];
  for (int h = 0; h < ATT_G; h++)
    for (int e = 0; e < 8; e++) {
      qr[h][e] = q[(g * ATT_G + h) * ATT_D + 8 * lane + e] * (1.4426950408889634f / 16.f);
      o[h][e] = 0.f;
    }
  float mh = -1e30f, lh = 0.f;  // of head lane&7
  const ulong rowStride = ulong(p.KVH) * ATT_D;
  device const T* kb = kc + g * ATT_D + 8 * lane;
  device const T* vb = vc + g * ATT_D + 8 * lane;
  const int pwb = warp * (ATT_TILE * ATT_G + ATT_G);  // this simdgroup's slice of pw

  for (int t0 = begin + warp * ATT_TILE; t0 < end; t0 += ATT_SIMDGROUPS * ATT_TILE) {
    float kr[ATT_TILE][8], vr[ATT_TILE][8];
    for (int r = 0; r < ATT_TILE; r++) {
      const int row = t0 + r < end ? t0 + r : end - 1;
      kv_row(kb + ulong(row) * rowStride, kr[r]);
      kv_row(vb + ulong(row) * rowStride, vr[r]);
    }
    // Partial scores of (row, head) = j = 8*row + head; a reduce-scatter
    // across the simdgroup leaves score j on lane j.
    float sc[32];
    for (int r = 0; r < ATT_TILE; r++)
      for (int h = 0; h < ATT_G; h++) {
        float a = 0.f;
        for (int e = 0; e < 8; e++) a += qr[h][e] * kr[r][e];
        sc[8 * r + h] = a;
      }
    for (int m = 16; m > 0; m >>= 1) {
      const bool up = (lane & m) != 0;
      for (int i = 0; i < m; i++) {
        const float send = up ? sc[i] : sc[i + m], keep = up ? sc[i + m] : sc[i];
        sc[i] = keep + simd_shuffle_xor(send, ushort(m));
      }
    }
    const float s = t0 + (lane >> 3) < end ? sc[0] : -1e30f;
    float mt = fmax(s, simd_shuffle_xor(s, ushort(8)));
    mt = fmax(mt, simd_shuffle_xor(mt, ushort(16)));
    const float mNew = fmax(mh, mt);
    const float corr = exp2(mh - mNew), pe = exp2(s - mNew);
    float ps = pe + simd_shuffle_xor(pe, ushort(8));
    ps += simd_shuffle_xor(ps, ushort(16));
    lh = lh * corr + ps;
    mh = mNew;
    pw[pwb + lane] = pe;
    if (lane < ATT_G) pw[pwb + ATT_TILE * ATT_G + lane] = corr;
    simdgroup_barrier(mem_flags::mem_threadgroup);
    float pr[ATT_TILE * ATT_G + ATT_G];
    for (int i = 0; i < ATT_TILE * ATT_G + ATT_G; i++) pr[i] = pw[pwb + i];
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (int h = 0; h < ATT_G; h++) {
      const float cf = pr[ATT_TILE * ATT_G + h];
      for (int e = 0; e < 8; e++) {
        float a = o[h][e] * cf;
        for (int r = 0; r < ATT_TILE; r++) a += pr[8 * r + h] * vr[r][e];
        o[h][e] = a;
      }
    }
  }

  // Merge the simdgroups' states one head at a time: so holds o [warp][256]
  // of the head, sml (m, l) [warp][head].
  if (lane < ATT_G) {
    sml[(warp * ATT_G + lane) * 2] = mh;
    sml[(warp * ATT_G + lane) * 2 + 1] = lh;
  }
  const ulong part = ulong(g) * ulong(p.maxSplits) + ulong(sp);
  for (int h = 0; h < ATT_G; h++) {
    for (int e = 0; e < 8; e++) so[warp * ATT_D + 8 * lane + e] = o[h][e];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float M = -1e30f;
    for (int w = 0; w < ATT_SIMDGROUPS; w++) M = fmax(M, sml[(w * ATT_G + h) * 2]);
    float acc = 0.f, L = 0.f;
    for (int w = 0; w < ATT_SIMDGROUPS; w++) {
      const float f = exp2(sml[(w * ATT_G + h) * 2] - M);
      acc += so[w * ATT_D + int(tid)] * f;
      L += sml[(w * ATT_G + h) * 2 + 1] * f;
    }
    po[(part * ATT_G + ulong(h)) * ATT_D + ulong(tid)] = acc;
    if (tid == 0) {
      pml[(part * ATT_G + ulong(h)) * 2] = M;
      pml[(part * ATT_G + ulong(h)) * 2 + 1] = L;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}

kernel void attn_split_f32(device const float* q [[buffer(0)]], device const float* kc [[buffer(1)]],
                           device const float* vc [[buffer(2)]], device const int* pos [[buffer(3)]],
                           device float* po [[buffer(4)]], device float* pml [[buffer(5)]],
                           constant AttnSplitParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                           uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float pw[ATT_SIMDGROUPS * (ATT_TILE * ATT_G + ATT_G)];
  threadgroup float so[ATT_SIMDGROUPS * ATT_D];
  threadgroup float sml[ATT_SIMDGROUPS * ATT_G * 2];
  attn_split<float>(q, kc, vc, pos, po, pml, p, tid, bid, pw, so, sml);
}
kernel void attn_split_bf16(device const float* q [[buffer(0)]], device const ushort* kc [[buffer(1)]],
                            device const ushort* vc [[buffer(2)]], device const int* pos [[buffer(3)]],
                            device float* po [[buffer(4)]], device float* pml [[buffer(5)]],
                            constant AttnSplitParams& p [[buffer(6)]], uint tid [[thread_position_in_threadgroup]],
                            uint bid [[threadgroup_position_in_grid]]) {
  threadgroup float pw[ATT_SIMDGROUPS * (ATT_TILE * ATT_G + ATT_G)];
  threadgroup float so[ATT_SIMDGROUPS * ATT_D];
  threadgroup float sml[ATT_SIMDGROUPS * ATT_G * 2];
  attn_split<ushort>(q, kc, vc, pos, po, pml, p, tid, bid, pw, so, sml);
}

// attn_combine: QH threadgroups of ATT_D threads; out[h][d] = merged o / l
// times sigmoid(gate), the gate of head h at qg[h*512 + 256 + d].
kernel void attn_combine(device const float* po [[buffer(0)]], device const float* pml [[buffer(1)]],
                         device const float* qg [[buffer(2)]], device const int* pos [[buffer(3)]],
                         device float* out [[buffer(4)]], constant AttnCombineParams& p [[buffer(5)]],
                         uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]]) {
  const int d = int(tid), h = int(bid);
  const int g = h / ATT_G, hi = h % ATT_G;
  int nsp, chunk;
  att_chunks(*pos + 1, p.maxSplits, p.minChunk, nsp, chunk);
  device const float* ml = pml + (ulong(g) * ulong(p.maxSplits) * ATT_G + ulong(hi)) * 2;
  float M = -1e30f;
  for (int s = 0; s < nsp; s++) M = fmax(M, ml[s * ATT_G * 2]);
  float acc = 0.f, L = 0.f;
  for (int s = 0; s < nsp; s++) {
    const float f = exp2(ml[s * ATT_G * 2] - M);
    L += ml[s * ATT_G * 2 + 1] * f;
    acc += po[((ulong(g) * ulong(p.maxSplits) + ulong(s)) * ATT_G + ulong(hi)) * ATT_D + ulong(d)] * f;
  }
  const float gate = qg[ulong(h) * 2 * ATT_D + ATT_D + ulong(d)];
  out[h * ATT_D + d] = acc / L / (1.f + exp2(-gate * 1.4426950408889634f));
}
