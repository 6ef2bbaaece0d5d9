// qk_rows.cu: a prompt chunk's query and key preparation (ops.cu's
// qk_prep_rows: each head's RMSNorm, RoPE on its first ROT values, the
// keys and values into the caches) with a warp a row, not a block of 256
// threads a (head, row): ops.cu's launch is (QH + KVH) x rows blocks, 73,728
// at 4096 tokens of the 35B model, each a load, a block-wide sum behind
// two barriers and a store, about three times the time its bytes take
// (docs/bench/cuda, prof3: 1.7 % of prefill at 4K). Here a warp takes
// every head of its row, lane l the values l + 32u (u < 8), the row's
// sines and cosines computed once, and the sums are block_sum's: each
// group of 32 values' warp_sum, added in order from 0, so the same bits as
// qk_prep_rows. The f32 cache's bf16 shadow (kvshadow=on) is written from
// the same registers, kv_shadow_rows' launch saved. Heads of 256 values
// with ROT = 64 (the Qwen3.5 / 3.6 models'); other shapes take ops.cu's.
// qkrows=warp; a module of its own so that ops.ptx and its machine code
// stay as they are.
#include "rope.h"
#include "rowmath.h"

#define QR_D 256
#define QR_ROT 64
#define QR_WARPS 8

// qk_rows: grid ceil(rows / QR_WARPS), block 32·QR_WARPS; warp w of block
// b prepares row b·QR_WARPS + w at position *pos + row. ks and vs (SHADOW)
// are the bf16 shadows of a float32 cache.
template <typename T, bool SHADOW>
static __device__ __forceinline__ void qk_rows(const float* __restrict__ qg, const float* __restrict__ k,
                                               const float* __restrict__ v, const float* __restrict__ qn,
                                               const float* __restrict__ kn, float* __restrict__ q, T* kc, T* vc,
                                               const int* __restrict__ pos, int maxPos,
                                               const double* __restrict__ invFreq, int QH, int KVH, int rows,
                                               float eps, u16* ks, u16* vs) {
  constexpr int U = QR_D / 32, HALF = QR_ROT / 2;
  static_assert(HALF == 32, "a value and its rotation partner in the same lane, u and u + 1");
  const int lane = PETAL_TID_X() & 31, r = PETAL_BID_X() * QR_WARPS + (PETAL_TID_X() >> 5);
  if (r >= rows) return;
  const int p = *pos + r;
  double sd, cd;
  sincos_exact((double)p * invFreq[lane], sd, cd);  // i = lane: values lane and lane + 32
  const float sn = (float)sd, cs = (float)cd;
  for (int h = 0; h < QH + KVH; h++) {
    const bool isQ = h < QH;
    const int g = h - QH;
    const float* src = isQ ? qg + ((long long)r * QH + h) * 2 * QR_D : k + ((long long)r * KVH + g) * QR_D;
    const float* w = isQ ? qn : kn;
    float x[U];
#pragma unroll
    for (int u = 0; u < U; u++) x[u] = src[lane + 32 * u];
    float ss = 0.f;  // block_sum's order: warp u's sum, then 0 + s_0 + s_1 + ...
#pragma unroll
    for (int u = 0; u < U; u++) ss += warp_sum(x[u] * x[u]);
    // lane 0's sum for every lane, as block_sum hands each warp's lane 0 on:
    // the lanes' sums may differ in the last place (the first step of
    // warp_sum fuses a lane's own square into its add, each lane a
    // different one)
    ss = __nvvm_shfl_sync_idx_f32(0xffffffffu, ss, 0, 0x1f);
    const float inv = 1.f / __builtin_sqrtf(ss / QR_D + eps);
    float y[U];
#pragma unroll
    for (int u = 0; u < U; u++) y[u] = x[u] * inv * w[lane + 32 * u];
    const float x1 = y[0], x2 = y[1];
    y[0] = x1 * cs - x2 * sn;
    y[1] = x1 * sn + x2 * cs;
    if (isQ) {
      float* dst = q + ((long long)r * QH + h) * QR_D;
#pragma unroll
      for (int u = 0; u < U; u++) dst[lane + 32 * u] = y[u];
    } else if (p < maxPos) {
      const long long at = ((long long)p * KVH + g) * QR_D;
      const float* vr = v + ((long long)r * KVH + g) * QR_D;
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int d = lane + 32 * u;
        const float vv = vr[d];
        kv_put<T>(kc + at + d, y[u]);
        kv_put<T>(vc + at + d, vv);
        if (SHADOW) {
          kv_put<u16>(ks + at + d, y[u]);
          kv_put<u16>(vs + at + d, vv);
        }
      }
    }
  }
}

#define QK_ROWS(NAME, T, SHADOW)                                                                                   \
  extern "C" __global__ void __launch_bounds__(32 * QR_WARPS)                                                     \
      NAME(const float* qg, const float* k, const float* v, const float* qn, const float* kn, float* q, T* kc,     \
           T* vc, const int* pos, int maxPos, const double* invFreq, int QH, int KVH, int rows, float eps, u16* ks, \
           u16* vs) {                                                                                             \
    pdl_begin();                                                                                                  \
    qk_rows<T, SHADOW>(qg, k, v, qn, kn, q, kc, vc, pos, maxPos, invFreq, QH, KVH, rows, eps, ks, vs);            \
  }
QK_ROWS(qk_rows_f32, float, false)
QK_ROWS(qk_rows_bf16, u16, false)
QK_ROWS(qk_rows_f32_shadow, float, true)
