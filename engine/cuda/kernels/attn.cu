// attn.cu: gated attention of one decoded token (spec 2.4) with GQA, the
// position read on the device:
//
//   qk_prep_<kv>: q/k RMSNorm (weights as stored), RoPE on the first rot
//     dims in pairs (i, i+rot/2) at position p = *pos, and the KV write at
//     row p. The angle p·inv_freq[i] (inv_freq from the host, in float64)
//     is reduced and its sine and cosine evaluated in float64 on the device,
//     rounded to float32 once: exact at any position.
//   attn_split_<kv>: flash-decoding. Block (g, s) takes KV head g and the
//     s-th chunk of the n = p+1 cache rows, and every query head of g (8):
//     each K and V row is read once for all of them. It leaves the chunk's
//     softmax state (max, sum, unnormalised output per head) in partials.
//   attn_combine: per query head, the chunks' states merged, the output
//     times sigmoid(gate).
//
// The number of chunks adapts to n on the device (ceil(n/minChunk), at
// most maxSplits), so that one captured graph serves every position.
// Head dim 256, 8 query heads per KV head; KV rows [pos][KVH][256] in
// float32 or bf16.
#include "qgroup.h"
#include "rope.h"

#define ATT_D 256
#define ATT_G 8
#define ATT_WARPS 8
#define ATT_TILE 4

static __device__ __forceinline__ float aexp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
static __device__ __forceinline__ u16 f32_to_bf16(float f) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}

// selp picks a or b by c in a register select (a select of two array
// elements written in C may become a select of their addresses, which puts
// the array in local memory).
static __device__ __forceinline__ float selp(bool c, float a, float b) {
  float r;
  asm("{.reg .pred p;\n\tsetp.ne.s32 p, %3, 0;\n\tselp.f32 %0, %1, %2, p;}" : "=f"(r) : "f"(a), "f"(b), "r"((int)c));
  return r;
}

template <typename T>
static __device__ __forceinline__ void kv_store(T* p, float v);
template <>
__device__ __forceinline__ void kv_store<float>(float* p, float v) { *p = v; }
template <>
__device__ __forceinline__ void kv_store<u16>(u16* p, float v) { *p = f32_to_bf16(v); }

// qk_prep: QH+KVH blocks of ATT_D threads: block h < QH prepares query head
// h into q; block QH+g key head g into kc and value head g into vc at row
// *pos (no cache write when *pos >= maxPos).
template <typename T>
static __device__ __forceinline__ void qk_prep(const float* __restrict__ qg, const float* __restrict__ k,
                                               const float* __restrict__ v, const float* __restrict__ qn,
                                               const float* __restrict__ kn, float* __restrict__ q, T* kc, T* vc,
                                               const int* __restrict__ pos, int maxPos,
                                               const double* __restrict__ invFreq, int QH, int KVH, int rot, float eps) {
  __shared__ float xn[ATT_D];
  __shared__ float red[ATT_D / 32];
  const int d = PETAL_TID_X(), lane = d & 31, warp = d >> 5, h = PETAL_BID_X();
  const bool isQ = h < QH;
  const int g = h - QH;
  const float x = isQ ? qg[(long long)h * 2 * ATT_D + d] : k[g * ATT_D + d];
  const float ss = warp_sum(x * x);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  float tot = 0.f;
#pragma unroll
  for (int w = 0; w < ATT_D / 32; w++) tot += red[w];
  const float y = x * (1.f / __builtin_sqrtf(tot / ATT_D + eps)) * (isQ ? qn[d] : kn[d]);
  xn[d] = y;
  __syncthreads();
  float r = y;
  const int p = *pos, half = rot / 2;
  if (d < rot) {
    const int i = d < half ? d : d - half;
    double sd, cd;
    sincos_exact((double)p * invFreq[i], sd, cd);
    const float sn = (float)sd, cs = (float)cd;
    const float x1 = xn[i], x2 = xn[i + half];
    r = d < half ? x1 * cs - x2 * sn : x1 * sn + x2 * cs;
  }
  if (isQ) {
    q[h * ATT_D + d] = r;
  } else if (p < maxPos) {
    const long long row = ((long long)p * KVH + g) * ATT_D + d;
    kv_store<T>(kc + row, r);
    kv_store<T>(vc + row, v[g * ATT_D + d]);
  }
}

// kv_row loads a lane's 8 values (dims 8*lane..) of a cache row as floats.
static __device__ __forceinline__ void kv_row(const u16* p, float (&o)[8]) {
  const u32x4 w = ld_stream_16(p);
  const u32 ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; i++) o[2 * i] = __uint_as_float(ws[i] << 16), o[2 * i + 1] = __uint_as_float(ws[i] & 0xffff0000u);
}
static __device__ __forceinline__ void kv_row(const float* p, float (&o)[8]) {
  const u32x4 a = ld_stream_16(p), b = ld_stream_16(p + 4);
  o[0] = __uint_as_float(a.x), o[1] = __uint_as_float(a.y), o[2] = __uint_as_float(a.z), o[3] = __uint_as_float(a.w);
  o[4] = __uint_as_float(b.x), o[5] = __uint_as_float(b.y), o[6] = __uint_as_float(b.z), o[7] = __uint_as_float(b.w);
}

static __device__ __forceinline__ void att_chunks(int n, int maxSplits, int minChunk, int& nsp, int& chunk) {
  nsp = (n + minChunk - 1) / minChunk;
  nsp = nsp < maxSplits ? nsp : maxSplits;
  chunk = (n + nsp - 1) / nsp;
}

// attn_split: KVH*maxSplits blocks of ATT_WARPS*32 threads, ATT_SPLIT_SMEM
// bytes of dynamic shared memory. Partials: po [KVH][maxSplits][8][256],
// pml [KVH][maxSplits][8][2] (max and sum, in log2 units).
#define ATT_SPLIT_SMEM (ATT_WARPS * ATT_G * ATT_D * 4 + ATT_WARPS * ATT_G * 2 * 4)
template <typename T>
static __device__ __forceinline__ void attn_split(const float* __restrict__ q, const T* __restrict__ kc,
                                                  const T* __restrict__ vc, const int* __restrict__ pos,
                                                  float* __restrict__ po, float* __restrict__ pml, int KVH,
                                                  int maxSplits, int minChunk) {
  extern __shared__ float asmem[];
  __shared__ __attribute__((aligned(16))) float pw[ATT_WARPS][ATT_TILE * ATT_G + ATT_G];
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = PETAL_BID_X() / maxSplits, sp = PETAL_BID_X() % maxSplits;
  const int n = *pos + 1;
  int nsp, chunk;
  att_chunks(n, maxSplits, minChunk, nsp, chunk);
  if (sp >= nsp) return;
  const int begin = sp * chunk, end = begin + chunk < n ? begin + chunk : n;

  // This lane's 8 dims of the group's 8 queries, scaled by log2(e)/16.
  float qr[ATT_G][8];
#pragma unroll
  for (int h = 0; h < ATT_G; h++)
#pragma unroll
    for (int e = 0; e < 8; e++) qr[h][e] = q[(g * ATT_G + h) * ATT_D + 8 * lane + e] * (1.4426950408889634f / 16.f);
  float o[ATT_G][8];
#pragma unroll
  for (int h = 0; h < ATT_G; h++)
#pragma unroll
    for (int e = 0; e < 8; e++) o[h][e] = 0.f;
  float mh = -1e30f, lh = 0.f;  // of head lane&7
  const long long rowStride = (long long)KVH * ATT_D;
  const T* kb = kc + g * ATT_D + 8 * lane;
  const T* vb = vc + g * ATT_D + 8 * lane;

  for (int t0 = begin + warp * ATT_TILE; t0 < end; t0 += ATT_WARPS * ATT_TILE) {
    float kr[ATT_TILE][8], vr[ATT_TILE][8];
#pragma unroll
    for (int r = 0; r < ATT_TILE; r++) {
      const int row = t0 + r < end ? t0 + r : end - 1;
      kv_row(kb + row * rowStride, kr[r]);
      kv_row(vb + row * rowStride, vr[r]);
    }
    // Partial scores of (row, head) = j = 8*row + head; a reduce-scatter
    // across the warp leaves score j on lane j.
    float sc[32];
#pragma unroll
    for (int r = 0; r < ATT_TILE; r++)
#pragma unroll
      for (int h = 0; h < ATT_G; h++) {
        float a = 0.f;
#pragma unroll
        for (int e = 0; e < 8; e++) a += qr[h][e] * kr[r][e];
        sc[8 * r + h] = a;
      }
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) {
      const bool up = lane & m;
#pragma unroll
      for (int i = 0; i < m; i++) {
        const float send = selp(up, sc[i], sc[i + m]), keep = selp(up, sc[i + m], sc[i]);
        sc[i] = keep + __shfl_xor_sync(0xffffffffu, send, m);
      }
    }
    const float s = t0 + (lane >> 3) < end ? sc[0] : -1e30f;
    float mt = __builtin_fmaxf(s, __shfl_xor_sync(0xffffffffu, s, 8));
    mt = __builtin_fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 16));
    const float mNew = __builtin_fmaxf(mh, mt);
    const float corr = aexp2(mh - mNew), p = aexp2(s - mNew);
    float ps = p + __shfl_xor_sync(0xffffffffu, p, 8);
    ps += __shfl_xor_sync(0xffffffffu, ps, 16);
    lh = lh * corr + ps;
    mh = mNew;
    pw[warp][lane] = p;
    if (lane < ATT_G) pw[warp][ATT_TILE * ATT_G + lane] = corr;
    __syncwarp();
    float pr[ATT_TILE * ATT_G + ATT_G];
#pragma unroll
    for (int i = 0; i < ATT_TILE * ATT_G + ATT_G; i += 4) {
      const u32x4a v4 = *(const u32x4a*)&pw[warp][i];
      pr[i] = __uint_as_float(v4.x), pr[i + 1] = __uint_as_float(v4.y), pr[i + 2] = __uint_as_float(v4.z),
      pr[i + 3] = __uint_as_float(v4.w);
    }
    __syncwarp();
#pragma unroll
    for (int h = 0; h < ATT_G; h++) {
      const float cf = pr[ATT_TILE * ATT_G + h];
#pragma unroll
      for (int e = 0; e < 8; e++) {
        float a = o[h][e] * cf;
#pragma unroll
        for (int r = 0; r < ATT_TILE; r++) a += pr[8 * r + h] * vr[r][e];
        o[h][e] = a;
      }
    }
  }

  // Merge the warps' states: asmem holds o [warp][head][256], then (m, l)
  // [warp][head].
  float* so = asmem;
  float* sml = asmem + ATT_WARPS * ATT_G * ATT_D;
#pragma unroll
  for (int h = 0; h < ATT_G; h++)
#pragma unroll
    for (int e = 0; e < 8; e += 4)
      *(u32x4a*)&so[(warp * ATT_G + h) * ATT_D + 8 * lane + e] =
          u32x4a{__float_as_uint(o[h][e]), __float_as_uint(o[h][e + 1]), __float_as_uint(o[h][e + 2]), __float_as_uint(o[h][e + 3])};
  if (lane < ATT_G) sml[(warp * ATT_G + lane) * 2] = mh, sml[(warp * ATT_G + lane) * 2 + 1] = lh;
  __syncthreads();
  const long long part = (long long)g * maxSplits + sp;
#pragma unroll
  for (int h = 0; h < ATT_G; h++) {
    float M = -1e30f;
#pragma unroll
    for (int w = 0; w < ATT_WARPS; w++) M = __builtin_fmaxf(M, sml[(w * ATT_G + h) * 2]);
    float acc = 0.f, L = 0.f;
#pragma unroll
    for (int w = 0; w < ATT_WARPS; w++) {
      const float f = aexp2(sml[(w * ATT_G + h) * 2] - M);
      acc += so[(w * ATT_G + h) * ATT_D + tid] * f;
      L += sml[(w * ATT_G + h) * 2 + 1] * f;
    }
    po[(part * ATT_G + h) * ATT_D + tid] = acc;
    if (tid == 0) pml[(part * ATT_G + h) * 2] = M, pml[(part * ATT_G + h) * 2 + 1] = L;
  }
}

#ifndef ATTN_SHADOW_MODULE  // attn_shadow.cu takes the functions, not the entry points
// attn_combine: QH blocks of ATT_D threads; out[h][d] = merged o / l times
// sigmoid(gate), the gate of head h at qg[h*512 + 256 + d].
extern "C" __global__ void __launch_bounds__(ATT_D)
    attn_combine(const float* __restrict__ po, const float* __restrict__ pml, const float* __restrict__ qg,
                 const int* __restrict__ pos, float* __restrict__ out, int maxSplits, int minChunk) {
  pdl_begin();
  const int d = PETAL_TID_X(), h = PETAL_BID_X();
  const int g = h / ATT_G, hi = h % ATT_G;
  int nsp, chunk;
  att_chunks(*pos + 1, maxSplits, minChunk, nsp, chunk);
  const float* ml = pml + ((long long)g * maxSplits * ATT_G + hi) * 2;
  float M = -1e30f;
  for (int s = 0; s < nsp; s++) M = __builtin_fmaxf(M, ml[s * ATT_G * 2]);
  float acc = 0.f, L = 0.f;
  for (int s = 0; s < nsp; s++) {
    const float f = aexp2(ml[s * ATT_G * 2] - M);
    L += ml[s * ATT_G * 2 + 1] * f;
    acc += po[(((long long)g * maxSplits + s) * ATT_G + hi) * ATT_D + d] * f;
  }
  const float gate = qg[(long long)h * 2 * ATT_D + ATT_D + d];
  float e;
  asm("ex2.approx.f32 %0, %1;" : "=f"(e) : "f"(-gate * 1.4426950408889634f));
  out[h * ATT_D + d] = acc / L / (1.f + e);
}

#define QK_PREP(T, NAME)                                                                                     \
  extern "C" __global__ void __launch_bounds__(ATT_D)                                                        \
      NAME(const float* qg, const float* k, const float* v, const float* qn, const float* kn, float* q, T* kc, \
           T* vc, const int* pos, int maxPos, const double* invFreq, int QH, int KVH, int rot, float eps) { pdl_begin();  \
    qk_prep<T>(qg, k, v, qn, kn, q, kc, vc, pos, maxPos, invFreq, QH, KVH, rot, eps);                        \
  }
#define ATT_SPLIT(T, NAME)                                                                              \
  extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32, 1)                                       \
      NAME(const float* q, const T* kc, const T* vc, const int* pos, float* po, float* pml, int KVH,    \
           int maxSplits, int minChunk) { pdl_begin();                                                  \
    attn_split<T>(q, kc, vc, pos, po, pml, KVH, maxSplits, minChunk);                                   \
  }
QK_PREP(float, qk_prep_f32)
QK_PREP(u16, qk_prep_bf16)
ATT_SPLIT(float, attn_split_f32)
ATT_SPLIT(u16, attn_split_bf16)
#endif  // ATTN_SHADOW_MODULE
