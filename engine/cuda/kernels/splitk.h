// splitk.h: a decode mat-vec split over its inner dimension across the
// blocks of a launch that computed that dimension's values themselves (a
// value head's gated outputs in gdn_split.cu, a query head's merged dims in
// attn_out_split.cu), so that no kernel boundary stands between them and the
// projection: each block multiplies its SK_COLS values by those columns of
// every row of the matrix (copied into shared memory early: they depend on
// nothing) and adds its part of every output into 64-bit fixed-point sums
// in 2^-32 units with red.add.u64. Integer sums are the same bits in
// whatever order the blocks arrive; the block that finishes last (a
// ticket) writes out = resid + sums and leaves the sums zero. The parts
// are rounded to 2^-32 before they are summed: far below a float's own
// rounding of outputs of order 1e-3 and up. The atomics are slow where many
// blocks add into the same few thousand sums: 13.3 µs for 144 blocks of
// 2048 each on an H100 (docs/bench/cuda/2026-12-07-split1), against 1.5 µs
// to store the same parts.
//
// The values meet the 4-bit codes as qgroup.h's integer kinds meet x: a
// scale d = max|v|/127 and P int8 parts (v ~ d·(p0 + p1/254 + p2/254²)),
// element 8i+j in byte j>>1 of word 2i+(j&1) of its part, the products in
// dp4a with exact int32 sums.
#pragma once
#include "qgroup.h"

#define SK_COLS 32                // columns a block: half a group of 64, 16 bytes of codes a row
#define SK_ONE 4294967296.0f      // 2^32: the sums' unit is 2^-32
#define SK_UNIT 2.3283064365386963e-10f  // 2^-32

// SK_SHARED is the shared memory sk_copy fills for rows rows: 16 bytes of
// codes and the 16 bytes around the row's scale/bias word (16-byte aligned
// at its start).
#define SK_SHARED(rows) (32 * (rows))

// SkQuant is a block's values quantised for its rows: P parts of
// SK_COLS/4 words, their scale d and their sum.
template <int P>
struct SkQuant {
  u32 w[P][SK_COLS / 4];
  float d, sum;
};

// sk_copy starts the copies (cp.async through L2, committed as one group)
// of columns col0 .. col0+SK_COLS of rows 0..rows-1 of a 4-bit matrix
// (words: its codes, wpr u32 a row; sb: its interleaved scale/bias words,
// gpr a row, 16-byte aligned) into codes [rows][4] and sbs [rows][4] in
// shared memory: a row's 16 bytes of codes and the 16 bytes holding its
// scale/bias word (sk_sb picks it). Every thread of the block calls it;
// col0 is a multiple of SK_COLS. The weights are written by no kernel, so
// a kernel may copy them before its wait.
static __device__ __forceinline__ void sk_copy(u32* codes, u32* sbs, const u32* words, const u32* sb, long long wpr,
                                               int gpr, int col0, int rows) {
  for (int r = PETAL_TID_X(); r < rows; r += PETAL_NTID_X()) {
    cp_async16(smem_u32(codes + 4 * r), words + (long long)r * wpr + col0 / 8, true);
    cp_async16(smem_u32(sbs + 4 * r), sb + (((long long)r * gpr + col0 / 64) & ~3LL), true);
  }
  cp_commit();
}

// sk_sb is row r's scale/bias word among the 16 bytes sk_copy copied.
static __device__ __forceinline__ u32 sk_sb(const u32* sbs, int r, int gpr, int col0) {
  return sbs[4 * r + (int)(((long long)r * gpr + col0 / 64) & 3)];
}

// sk_quantise quantises v, lane l's value of warp 0's SK_COLS (the only
// warp that calls it), into q (shared memory).
template <int P>
static __device__ __forceinline__ void sk_quantise(float v, SkQuant<P>* q) {
  const int lane = PETAL_TID_X() & 31;
  const float amax = warp_max(__builtin_fabsf(v)), sum = warp_sum(v);
  float t = v * (amax > 0.f ? 127.f / amax : 0.f);
#pragma unroll
  for (int p = 0; p < P; p++) {
    const float m = add_rn(t, 12582912.f), qv = add_rn(m, -12582912.f);  // rint(t) in m's low bits
    u32 word = (__float_as_uint(m) & 0xFFu) << (8 * ((lane & 7) >> 1));
    word |= (u32)__nvvm_shfl_sync_bfly_i32(0xffffffffu, (int)word, 2, 0x1f);  // the four lanes of a word
    word |= (u32)__nvvm_shfl_sync_bfly_i32(0xffffffffu, (int)word, 4, 0x1f);
    if ((lane & 6) == 0) q->w[p][2 * (lane >> 3) + (lane & 1)] = word;
    t = (t - qv) * 254.f;
  }
  if (lane == 0) q->d = amax / 127.f, q->sum = sum;
}
static_assert(SK_COLS == 32, "sk_quantise: a lane a value");

// sk_red_fixed adds v into *p as 64-bit fixed point (2^-32 units, nearest).
static __device__ __forceinline__ void sk_red_fixed(unsigned long long* p, float v) {
  long long f;
  asm("cvt.rni.s64.f32 %0, %1;" : "=l"(f) : "f"(v * SK_ONE));
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(f) : "memory");
}

// sk_rows adds coef·(row r's SK_COLS columns · the values) into acc[r] for
// the rows of this thread (r = tid, tid + threads, ...), from the copies
// sk_copy made of columns col0.. of a matrix of gpr groups a row (waited
// for and fenced by a barrier before the call) and q.
template <int P>
static __device__ __forceinline__ void sk_rows(const u32* codes, const u32* sbs, int gpr, int col0,
                                               const SkQuant<P>* q, float coef, unsigned long long* acc, int rows) {
  u32 hw[P][SK_COLS / 4];
#pragma unroll
  for (int p = 0; p < P; p++) {
#pragma unroll
    for (int i = 0; i < SK_COLS / 4; i++) hw[p][i] = q->w[p][i];
  }
  const float hd = q->d, hsum = q->sum;
  for (int r = PETAL_TID_X(); r < rows; r += PETAL_NTID_X()) {
    const u32x4a cw = *(const u32x4a*)(codes + 4 * r);
    const u32 sbw = sk_sb(sbs, r, gpr, col0);
    const u32 ws[4] = {cw.x, cw.y, cw.z, cw.w};
    u32 a[P];
#pragma unroll
    for (int p = 0; p < P; p++) a[p] = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const u32 even = ws[i] & 0x0F0F0F0Fu, odd = (ws[i] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
      for (int p = 0; p < P; p++) {
        a[p] = dp4a_us(even, hw[p][2 * i], a[p]);
        a[p] = dp4a_us(odd, hw[p][2 * i + 1], a[p]);
      }
    }
    float d = small_int_to_f32(a[0]);
    if (P > 1) d += small_int_to_f32(a[1]) * (1.f / 254.f);
    if (P > 2) d += small_int_to_f32(a[P - 1]) * (1.f / (254.f * 254.f));
    const float s = __uint_as_float(sbw << 16), b = __uint_as_float(sbw & 0xffff0000u);
    sk_red_fixed(acc + r, coef * (s * hd * d + b * hsum));
  }
}

// sk_sums is this block's copy of the sums where a launch spreads them over
// copies copies (block b adds into copy b mod copies), so that each sum
// takes 1/copies of the blocks' atomics.
static __device__ __forceinline__ unsigned long long* sk_sums(unsigned long long* acc, int rows, int copies) {
  return acc + (long long)(PETAL_BID_X() % copies) * rows;
}

// sk_finish: after this block's sk_rows, the last block of the launch to
// get here (ticket, a u32 that wraps by itself) writes out[r] = resid[r] +
// the sums of row r over the copies (resid may be out; null for none) and
// zeroes them. Every thread of every block calls it.
static __device__ __forceinline__ void sk_finish(unsigned long long* acc, u32* ticket, const float* resid, float* out,
                                                 int rows, int copies) {
  __shared__ int last;
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    fence_gpu();  // the block's additions (the barrier before) before its ticket
    last = ticket_inc(ticket, PETAL_NCTAID_X() - 1) == PETAL_NCTAID_X() - 1;
  }
  __syncthreads();
  if (!last) return;
  fence_gpu();
  for (int r = PETAL_TID_X(); r < rows; r += PETAL_NTID_X()) {
    long long v = 0;
    for (int k = 0; k < copies; k++) {
      long long c;
      asm volatile("atom.relaxed.gpu.global.exch.b64 %0, [%1], 0;" : "=l"(c) : "l"(acc + (long long)k * rows + r) : "memory");
      v += c;  // integer sums: the same bits in any order
    }
    const float f = (float)v * SK_UNIT;
    out[r] = resid ? resid[r] + f : f;
  }
}
