// attn_prep.cu: qk_prep folded into the split attention of a decoded token
// (attnprep=on), for the bf16 shadows of a float32 cache that
// attn_split_bf16 reads under kvshadow=on (the default): each block
// prepares its group's queries itself (the first chunk's blocks also write
// them out, as qk_prep does), and the last chunk's block the new K and V
// row, which it writes to the float32 caches and their shadows and takes
// from shared memory. The same bits as qk_prep_f32_shadow then
// attn_split_bf16, one launch fewer a layer. attn_split_prep is attn.cu's
// attn_split with those parts added, in a module of its own so that
// attn.ptx and its built-in machine code stay as they are until this is
// measured (then the two become one, with their cubins remade).
#define ATTN_SHADOW_MODULE
#include "attn.cu"

// kv_rounded is v as kv_row reads it back from a cache of T.
template <typename T>
static __device__ __forceinline__ float kv_rounded(float v);
template <>
__device__ __forceinline__ float kv_rounded<float>(float v) { return v; }
template <>
__device__ __forceinline__ float kv_rounded<u16>(float v) { return __uint_as_float((u32)f32_to_bf16(v) << 16); }

// AttnPrep is what attn_split_prep takes to do qk_prep's work itself: the projections qg, k and v, the norm
// weights, the RoPE table, the queries' output q (written by the first
// chunk's blocks, as qk_prep writes it), the float32 caches kc and vc
// (row *pos written by the last chunk's block, beside the bf16 shadows the
// split reads), the cache's rows, the rotary dims and the norm's epsilon.
struct AttnPrep {
  const float *qg, *k, *v, *qn, *kn;
  const double* invFreq;
  float *q, *kc, *vc;
  int maxPos, rot;
  float eps;
};

// attn_prep_head: warp w's part of qk_prep for one head of ATT_D values at
// x (lane l holds dims l + 32j): the RMS norm with weight nw and RoPE at
// position p, in qk_prep's order of sums (a warp sum of 32 dims, then the
// eight in order) and its rounding, into out[ATT_D]; xn, ATT_D floats of
// shared memory the warp's own.
static __device__ __forceinline__ void attn_prep_head(const float* __restrict__ x, const float* __restrict__ nw,
                                                      const AttnPrep& pr, int p, float* xn, float* out) {
  const int lane = PETAL_TID_X() & 31;
  float xv[ATT_D / 32], tot = 0.f;
#pragma unroll
  for (int j = 0; j < ATT_D / 32; j++) xv[j] = x[32 * j + lane];
#pragma unroll
  for (int j = 0; j < ATT_D / 32; j++) tot += warp_sum(xv[j] * xv[j]);
#pragma unroll
  for (int j = 0; j < ATT_D / 32; j++) {
    const int d = 32 * j + lane;
    xn[d] = xv[j] * (1.f / __builtin_sqrtf(tot / ATT_D + pr.eps)) * nw[d];
  }
  __syncwarp();
  const int half = pr.rot / 2;
#pragma unroll
  for (int j = 0; j < ATT_D / 32; j++) {
    const int d = 32 * j + lane;
    float r = xn[d];
    if (d < pr.rot) {
      const int i = d < half ? d : d - half;
      double sd, cd;
      sincos_exact((double)p * pr.invFreq[i], sd, cd);
      const float sn = (float)sd, cs = (float)cd;
      const float x1 = xn[i], x2 = xn[i + half];
      r = d < half ? x1 * cs - x2 * sn : x1 * sn + x2 * cs;
    }
    out[d] = r;
  }
}

template <typename T>
static __device__ __forceinline__ void attn_split_prep(T* __restrict__ kc, T* __restrict__ vc,
                                                       const int* __restrict__ pos, float* __restrict__ po,
                                                       float* __restrict__ pml, int KVH, int maxSplits, int minChunk,
                                                       const AttnPrep& pr) {
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
  // The new row's K and V as the split reads them (rounded to T), held by
  // the last chunk's block.
  float* const newK = asmem + 2 * ATT_G * ATT_D;
  float* const newV = newK + ATT_D;
  const int p = n - 1;
  const bool holdsNew = sp == nsp - 1 && p < pr.maxPos;
  {
    const int h = g * ATT_G + warp;
    float* const qs = asmem;  // [ATT_G][ATT_D], then each warp's xn [ATT_G][ATT_D]
    attn_prep_head(pr.qg + (long long)h * 2 * ATT_D, pr.qn, pr, p, asmem + (ATT_G + warp) * ATT_D, qs + warp * ATT_D);
    if (sp == 0)
      for (int d = lane; d < ATT_D; d += 32) pr.q[h * ATT_D + d] = qs[warp * ATT_D + d];
    if (holdsNew && warp == 0) {
      __syncwarp();
      attn_prep_head(pr.k + g * ATT_D, pr.kn, pr, p, asmem + ATT_G * ATT_D, newK);
      for (int d = lane; d < ATT_D; d += 32) {
        const long long row = ((long long)p * KVH + g) * ATT_D + d;
        const float kv = newK[d], vv = pr.v[g * ATT_D + d];
        pr.kc[row] = kv;
        pr.vc[row] = vv;
        kv_store<T>(kc + row, kv);
        kv_store<T>(vc + row, vv);
        newK[d] = kv_rounded<T>(kv);
        newV[d] = kv_rounded<T>(vv);
      }
    }
    __syncthreads();
#pragma unroll
    for (int hh = 0; hh < ATT_G; hh++)
#pragma unroll
      for (int e = 0; e < 8; e++) qr[hh][e] = qs[hh * ATT_D + 8 * lane + e] * (1.4426950408889634f / 16.f);
  }
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
      if (holdsNew && row == p)  // the new row, as the cache now holds it
#pragma unroll
        for (int e = 0; e < 8; e++) kr[r][e] = newK[8 * lane + e], vr[r][e] = newV[8 * lane + e];
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
  __syncthreads();  // every warp done with the new row before so overwrites it
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

// attn_split_prep_shadow: attn_split_bf16's grid, block and shared memory;
// q the queries' output, ks and vs the shadows the split reads, kc and vc
// the float32 caches; the rest qk_prep's.
extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32, 1)
    attn_split_prep_shadow(float* q, u16* ks, u16* vs, const int* pos, float* po, float* pml, int KVH, int maxSplits,
                           int minChunk, const float* qg, const float* k, const float* v, const float* qn,
                           const float* kn, const double* invFreq, float* kc, float* vc, int maxPos, int rot,
                           float eps) {
  pdl_begin();
  const AttnPrep pr{qg, k, v, qn, kn, invFreq, q, kc, vc, maxPos, rot, eps};
  attn_split_prep<u16>(ks, vs, pos, po, pml, KVH, maxSplits, minChunk, pr);
}
