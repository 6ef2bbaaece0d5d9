// attn_shadow.cu: the bf16 shadow of a float32 KV cache (kvshadow=on): a
// copy of the cache's rows rounded to bf16 (cvt.rn, as kv_to_bf16 and a
// bf16 cache round them), kept beside it so that decode's attention reads
// half the bytes with attn.cu's bf16 kernels. In a module of its own so
// that attn.ptx, whose machine code is built in, stays as it was.
//
//   qk_prep_f32_shadow: attn.cu's qk_prep_f32, then the row it wrote
//     (read back by the thread that wrote it) into the shadows.
//   kv_shadow_rows: rows *from .. *from+rows-1 (at most maxPos) of both
//     caches into their shadows; from null means row 0 (the whole cache,
//     after the host wrote it). attn_prefill.cu's kv_to_bf16 with a first
//     row: that one always starts at row 0, and changing it would make
//     attn_prefill's built-in cubin stale; once this is measured the two
//     can become one.
#define ATTN_SHADOW_MODULE
#include "attn.cu"

extern "C" __global__ void __launch_bounds__(ATT_D)
    qk_prep_f32_shadow(const float* qg, const float* k, const float* v, const float* qn, const float* kn, float* q,
                       float* kc, float* vc, const int* pos, int maxPos, const double* invFreq, int QH, int KVH,
                       int rot, float eps, u16* ks, u16* vs) {
  pdl_begin();
  qk_prep<float>(qg, k, v, qn, kn, q, kc, vc, pos, maxPos, invFreq, QH, KVH, rot, eps);
  const int h = PETAL_BID_X(), d = PETAL_TID_X(), p = *pos;
  if (h >= QH && p < maxPos) {
    const long long row = ((long long)p * KVH + (h - QH)) * ATT_D + d;
    ks[row] = f32_to_bf16(kc[row]);
    vs[row] = f32_to_bf16(vc[row]);
  }
}

// kv_shadow_rows: any grid of 256 threads; width floats a row, a multiple
// of 4.
extern "C" __global__ void __launch_bounds__(256)
    kv_shadow_rows(const float* __restrict__ kc, const float* __restrict__ vc, const int* __restrict__ from,
                   u16* __restrict__ ks, u16* __restrict__ vs, int rows, int maxPos, int width) {
  pdl_begin();
  const int r0 = from ? *from : 0;
  const int r1 = r0 + rows < maxPos ? r0 + rows : maxPos;
  if (r1 <= r0) return;
  const long long first = (long long)r0 * width / 4, n = (long long)(r1 - r0) * width / 4;  // 4 floats a step
  const long long step = (long long)PETAL_NCTAID_X() * 256;
  for (long long i = (long long)PETAL_BID_X() * 256 + PETAL_TID_X(); i < 2 * n; i += step) {
    const bool isV = i >= n;
    const long long j = first + (isV ? i - n : i);
    const float4v x = *(const float4v*)((isV ? vc : kc) + 4 * j);
    const u32 lo = (u32)f32_to_bf16(x.x) | (u32)f32_to_bf16(x.y) << 16;
    const u32 hi = (u32)f32_to_bf16(x.z) | (u32)f32_to_bf16(x.w) << 16;
    *(u32x2a*)((isV ? vs : ks) + 4 * j) = u32x2a{lo, hi};
  }
}
