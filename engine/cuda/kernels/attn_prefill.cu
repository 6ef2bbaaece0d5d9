// attn_prefill.cu: causal gated attention of a prefill chunk (spec 2.4)
// with GQA on the tensor cores, flash style (the scores never leave the
// chip), the position read on the device.
//
//   flash_attn_<kv>_d<D>: row t of the chunk sits at position p+t (p =
//     *pos) and attends to cache rows 0..p+t. Block (b, g) takes KV head g
//     and 64 "query rows": 64/G tokens times the G query heads of g (row
//     m = token·G + head), so each K and V tile is read once for all of
//     them. Per 64-key tile: S = Q·Kᵀ on mma.sync m16n8k16 (bf16 operands,
//     float32 accumulation), the online softmax in float32 (scores in log2
//     units, ex2), then O += P·V with P rounded to bf16 in registers (the
//     accumulator fragment of S is the A fragment of P·V) and V read with
//     ldmatrix.trans. The output is O/l times sigmoid of the gate that
//     follows the query in qg.
//
// Q is float32 [rows][QH][D], rounded to bf16 into shared memory; KV rows
// are [pos][KVH][D] in float32 (rounded to bf16 going in) or bf16. Key
// rows past the block's last position are zero in shared memory (a cache
// holds anything there, NaN included) and masked. A row at a position at
// or past maxPos (the cache's rows) gets NaN: the cache does not hold it.
//
// 4 warps, each 16 query rows; shared memory: the Q tile and one K and one
// V tile, 64 rows of D bf16 each (3·64·2D bytes: 96 KiB at D=256, two
// blocks per multiprocessor). Rows of 16-byte chunks, chunk c of row r
// stored at c ^ (r & 7), so that ldmatrix and the tile stores hit distinct
// banks. Blocks run the longest (last) tokens first.
#include "device.h"

#if defined(__NVCC__)
#define FA_BID_Y() blockIdx.y
#define FA_NCTAID_X() gridDim.x
#else
#define FA_BID_Y() __nvvm_read_ptx_sreg_ctaid_y()
#define FA_NCTAID_X() __nvvm_read_ptx_sreg_nctaid_x()
#endif

#define FA_BM 64  // query rows (token, head) per block
#define FA_BN 64  // keys per tile
#define FA_THREADS 128

struct __attribute__((aligned(16))) fa_f4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) fa_f2 {
  float x, y;
};

static __device__ __forceinline__ u32 fa_smem(const void* p) {
  u32 a;
  asm("{.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;}" : "=r"(a) : "l"(p));
  return a;
}
static __device__ __forceinline__ void fa_ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
static __device__ __forceinline__ void fa_ldsm_x4_t(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
static __device__ __forceinline__ void fa_mma(float* c, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// fa_pack rounds (lo, hi) to bf16, nearest even; lo in the low half.
static __device__ __forceinline__ u32 fa_pack(float lo, float hi) {
  u32 d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
static __device__ __forceinline__ void fa_st16(u32 addr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
static __device__ __forceinline__ float fa_ex2(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
static __device__ __forceinline__ float fa_quad_max(float v) {
  v = __builtin_fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return __builtin_fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
static __device__ __forceinline__ float fa_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// fa_chunk8 is 8 consecutive elements as four bf16x2 words.
static __device__ __forceinline__ void fa_chunk8(const float* p, u32* w) {
  const fa_f4 a = *(const fa_f4*)p, b = *(const fa_f4*)(p + 4);
  w[0] = fa_pack(a.x, a.y);
  w[1] = fa_pack(a.z, a.w);
  w[2] = fa_pack(b.x, b.y);
  w[3] = fa_pack(b.z, b.w);
}
static __device__ __forceinline__ void fa_chunk8(const u16* p, u32* w) {
  const u32x4 v = *(const u32x4*)p;
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
}

// fa_load_kv copies keys k0..k0+63 of KV head g (rows past kend as zeros)
// into a tile as bf16.
template <typename T, int D>
static __device__ __forceinline__ void fa_load_kv(u32 tile, const T* __restrict__ cache, long long stride, int g,
                                                  int k0, int kend, int tid) {
  constexpr int CH = D / 8;  // 16-byte chunks a row
#pragma unroll 4
  for (int j = 0; j < FA_BN * CH / FA_THREADS; j++) {
    const int id = tid + j * FA_THREADS, r = id / CH, c = id % CH, key = k0 + r;
    u32 w[4] = {0u, 0u, 0u, 0u};
    if (key < kend) fa_chunk8(cache + (long long)key * stride + (long long)g * D + c * 8, w);
    fa_st16(tile + r * (2 * D) + ((c ^ (r & 7)) << 4), w[0], w[1], w[2], w[3]);
  }
}

// fa_load_q writes the Q tile of BM query rows as bf16: row m is token
// tok0 + m/G, query head g·G + m%G (zeros past the chunk's rows).
template <int BM, int THREADS, int D>
static __device__ __forceinline__ void fa_load_q(u32 sq, const float* __restrict__ q, int tid, int tok0, int rows,
                                                 int G, int g, int QH) {
  constexpr int CH = D / 8, ROWB = 2 * D;
#pragma unroll 4
  for (int j = 0; j < BM * CH / THREADS; j++) {
    const int id = tid + j * THREADS, m = id / CH, c = id % CH, t = tok0 + m / G, h = g * G + m % G;
    u32 w[4] = {0u, 0u, 0u, 0u};
    if (t < rows) fa_chunk8(q + ((long long)t * QH + h) * D + c * 8, w);
    fa_st16(sq + m * ROWB + ((c ^ (m & 7)) << 4), w[0], w[1], w[2], w[3]);
  }
}

// FaRows is a thread's share of its warp's 16 query rows (rows g8 and
// g8+8 of the fragments): the output accumulators, the running maxima and
// sums of the online softmax, and the last key each row sees.
template <int D>
struct FaRows {
  float o[D / 8][4];
  float mx0, mx1, l0, l1;
  int lim0, lim1;
};

// fa_probs takes the scores of keys k0 .. k0+8·NT-1 (s: NT n8 tiles of the
// mma accumulator layout, this thread's rows g8 and g8+8) into the rows'
// online softmax: scaled to log2 units and masked past each row's last key
// (first: the block's first row's position), the running maxima and sums
// updated; s holds the probabilities after, and c0, c1 the factors the
// rows' outputs are to be rescaled by (fa_rescale).
template <int D, int NT>
static __device__ __forceinline__ void fa_probs(float (*s)[4], int lane, int k0, int first, FaRows<D>& st, float& c0,
                                                float& c1) {
  constexpr int BN = 8 * NT;
  const int c4 = lane & 3;
  const float scale = 1.4426950408889634f / __builtin_sqrtf((float)D);  // log2 units
  // Scores in log2 units, masked past each row's last key.
  const bool edge = k0 + BN - 1 > first;  // some key here is past some row's last
  float t0 = -__builtin_inff(), t1 = -__builtin_inff();
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int key = k0 + nt * 8 + 2 * c4 + (j & 1);
      float v = s[nt][j] * scale;
      if (edge && key > (j < 2 ? st.lim0 : st.lim1)) v = -__builtin_inff();
      s[nt][j] = v;
    }
    t0 = __builtin_fmaxf(t0, __builtin_fmaxf(s[nt][0], s[nt][1]));
    t1 = __builtin_fmaxf(t1, __builtin_fmaxf(s[nt][2], s[nt][3]));
  }
  // Key 0 is in every row's range and in the first tile, so the maxima
  // are finite from the first tile on.
  const float n0 = __builtin_fmaxf(st.mx0, fa_quad_max(t0)), n1 = __builtin_fmaxf(st.mx1, fa_quad_max(t1));
  c0 = fa_ex2(st.mx0 - n0);
  c1 = fa_ex2(st.mx1 - n1);
  st.mx0 = n0;
  st.mx1 = n1;
  float r0 = 0.f, r1 = 0.f;
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    s[nt][0] = fa_ex2(s[nt][0] - n0);
    s[nt][1] = fa_ex2(s[nt][1] - n0);
    s[nt][2] = fa_ex2(s[nt][2] - n1);
    s[nt][3] = fa_ex2(s[nt][3] - n1);
    r0 += s[nt][0] + s[nt][1];
    r1 += s[nt][2] + s[nt][3];
  }
  st.l0 = st.l0 * c0 + r0;  // this thread's share; the quad's are summed at the end
  st.l1 = st.l1 * c1 + r1;
}

// fa_rescale multiplies the rows' outputs by fa_probs' factors.
template <int D>
static __device__ __forceinline__ void fa_rescale(FaRows<D>& st, float c0, float c1) {
#pragma unroll
  for (int i = 0; i < D / 8; i++) {
    st.o[i][0] *= c0;
    st.o[i][1] *= c0;
    st.o[i][2] *= c1;
    st.o[i][3] *= c1;
  }
}

// fa_softmax is fa_probs and the outputs rescaled at once.
template <int D, int NT>
static __device__ __forceinline__ void fa_softmax(float (*s)[4], int lane, int k0, int first, FaRows<D>& st) {
  float c0, c1;
  fa_probs<D, NT>(s, lane, k0, first, st, c0, c1);
  fa_rescale<D>(st, c0, c1);
}

// fa_tile takes keys k0 .. k0+BN-1 (the K tile at sk, the V tile at sv) into
// the rows' state: S = Q·Kᵀ, fa_softmax, O += P·V with P rounded to bf16 in registers (the accumulator fragment
// of S is the A fragment of P·V) and V read with ldmatrix.trans.
template <int D, int BN>
static __device__ __forceinline__ void fa_tile(u32 sq, u32 sk, u32 sv, int warp, int lane, int k0, int first,
                                               FaRows<D>& st) {
  constexpr int ROWB = 2 * D, NT = BN / 8, DT = D / 8;
  float s[NT][4];
#pragma unroll
  for (int i = 0; i < NT; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    u32 a[4];
    {
      const int r = warp * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
      fa_ldsm_x4(sq + r * ROWB + ((ch ^ (r & 7)) << 4), a[0], a[1], a[2], a[3]);
    }
#pragma unroll
    for (int np = 0; np < NT / 2; np++) {
      const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3), ch = ks * 2 + ((lane >> 3) & 1);
      u32 b0, b1, b2, b3;
      fa_ldsm_x4(sk + r * ROWB + ((ch ^ (r & 7)) << 4), b0, b1, b2, b3);
      fa_mma(s[2 * np], a, b0, b1);
      fa_mma(s[2 * np + 1], a, b2, b3);
    }
  }

  fa_softmax<D, NT>(s, lane, k0, first, st);

  // O += P·V: P's A fragment for keys 16kk.. is S's tiles 2kk and 2kk+1.
#pragma unroll
  for (int kk = 0; kk < BN / 16; kk++) {
    u32 pa[4];
    pa[0] = fa_pack(s[2 * kk][0], s[2 * kk][1]);
    pa[1] = fa_pack(s[2 * kk][2], s[2 * kk][3]);
    pa[2] = fa_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[3] = fa_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    const int r = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int dp = 0; dp < DT / 2; dp++) {
      const int ch = dp * 2 + (lane >> 4);
      u32 b0, b1, b2, b3;
      fa_ldsm_x4_t(sv + r * ROWB + ((ch ^ (r & 7)) << 4), b0, b1, b2, b3);
      fa_mma(st.o[2 * dp], pa, b0, b1);
      fa_mma(st.o[2 * dp + 1], pa, b2, b3);
    }
  }
}

// fa_store writes the rows' outputs: O/l times sigmoid(gate); fragment
// element j of o[dt] is row g8 (+8 for j >= 2), column dt·8 + 2·c4 + (j & 1).
// A row at a position the cache does not hold gets NaN.
template <int D>
static __device__ __forceinline__ void fa_store(FaRows<D>& st, int warp, int lane, int G, int g, int tok0,
                                                int rows, int p0, int maxPos, int QH, const float* __restrict__ qg,
                                                float* __restrict__ out) {
  constexpr int DT = D / 8;
  const int g8 = lane >> 2, c4 = lane & 3;
  const int m0 = warp * 16 + g8, m1 = m0 + 8;
  const float l0 = fa_quad_sum(st.l0), l1 = fa_quad_sum(st.l1);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int m = half ? m1 : m0, t = tok0 + m / G, h = g * G + m % G;
    if (t >= rows) continue;
    const bool held = p0 >= 0 && p0 + t < maxPos;
    const float inv = held ? 1.f / (half ? l1 : l0) : __uint_as_float(0x7fc00000u);
    const float* gate = qg + ((long long)t * QH + h) * 2 * D + D;
    float* y = out + ((long long)t * QH + h) * D;
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
      const int d = dt * 8 + 2 * c4;
      const fa_f2 gt = *(const fa_f2*)(gate + d);
      fa_f2 v;
      v.x = st.o[dt][2 * half] * inv / (1.f + fa_ex2(-gt.x * 1.4426950408889634f));
      v.y = st.o[dt][2 * half + 1] * inv / (1.f + fa_ex2(-gt.y * 1.4426950408889634f));
      *(fa_f2*)(y + d) = v;
    }
  }
}

// fa_rows starts a thread's rows: nothing summed, and the last key of each
// row (its position, or the block's last key read).
template <int D>
static __device__ __forceinline__ void fa_rows(FaRows<D>& st, int warp, int lane, int G, int first, int kend) {
  const int m0 = warp * 16 + (lane >> 2), m1 = m0 + 8;
  st.lim0 = first + m0 / G;
  st.lim1 = first + m1 / G;
  if (st.lim0 > kend - 1) st.lim0 = kend - 1;
  if (st.lim1 > kend - 1) st.lim1 = kend - 1;
#pragma unroll
  for (int i = 0; i < D / 8; i++) st.o[i][0] = st.o[i][1] = st.o[i][2] = st.o[i][3] = 0.f;
  st.mx0 = st.mx1 = -__builtin_inff();
  st.l0 = st.l1 = 0.f;
}

// FaBlock is a flash block's share of the chunk: KV head g and its G query
// heads, TPB tokens from tok0 (the longest blocks first: the grid's last
// block takes the first tokens), the chunk's first position p0, the cache
// rows' stride, and keys 0 .. kend-1 to read (at most maxPos).
struct FaBlock {
  int G, TPB, g, tok0, p0, kend;
  long long stride;
};

template <int BM, int D>
static __device__ __forceinline__ FaBlock fa_block(const int* __restrict__ pos, int rows, int QH, int KVH, int maxPos) {
  FaBlock b;
  b.G = QH / KVH;  // query heads per KV head
  b.TPB = BM / b.G;
  b.g = FA_BID_Y();
  b.tok0 = (FA_NCTAID_X() - 1 - PETAL_BID_X()) * b.TPB;
  b.p0 = *pos;
  b.stride = (long long)KVH * D;
  const int tokEnd = b.tok0 + b.TPB < rows ? b.tok0 + b.TPB : rows;
  b.kend = b.p0 + tokEnd < maxPos ? b.p0 + tokEnd : maxPos;
  return b;
}

template <typename T, int D>
static __device__ __forceinline__ void flash_attn(const float* __restrict__ q, const float* __restrict__ qg,
                                                  const T* __restrict__ kc, const T* __restrict__ vc,
                                                  const int* __restrict__ pos, float* __restrict__ out, int rows,
                                                  int QH, int KVH, int maxPos) {
  constexpr int ROWB = 2 * D;
  extern __shared__ __attribute__((aligned(128))) unsigned char fa_sm[];
  const u32 sq = fa_smem(fa_sm), sk = sq + FA_BM * ROWB, sv = sk + FA_BN * ROWB;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const FaBlock fb = fa_block<FA_BM, D>(pos, rows, QH, KVH, maxPos);
  const int G = fb.G, g = fb.g, tok0 = fb.tok0, p0 = fb.p0, kend = fb.kend;
  const long long stride = fb.stride;

  fa_load_q<FA_BM, FA_THREADS, D>(sq, q, tid, tok0, rows, G, g, QH);
  FaRows<D> st;
  fa_rows<D>(st, warp, lane, G, p0 + tok0, kend);
  for (int k0 = 0; k0 < kend; k0 += FA_BN) {
    __syncthreads();  // every warp is done with the last tiles (and the Q tile is written)
    fa_load_kv<T, D>(sk, kc, stride, g, k0, kend, tid);
    fa_load_kv<T, D>(sv, vc, stride, g, k0, kend, tid);
    __syncthreads();
    fa_tile<D, FA_BN>(sq, sk, sv, warp, lane, k0, p0 + tok0, st);
  }
  fa_store<D>(st, warp, lane, G, g, tok0, rows, p0, maxPos, QH, qg, out);
}

#define FLASH_ATTN(NAME, T, D)                                                                                     \
  extern "C" __global__ void __launch_bounds__(FA_THREADS) NAME(const float* q, const float* qg, const T* kc,     \
                                                                const T* vc, const int* pos, float* out, int rows, \
                                                                int QH, int KVH, int maxPos) { pdl_begin();        \
    flash_attn<T, D>(q, qg, kc, vc, pos, out, rows, QH, KVH, maxPos);                                             \
  }
#ifndef FA_WG_MODULE  // attn_prefill_wg.cu's module has its own entry points
FLASH_ATTN(flash_attn_f32_d128, float, 128)
FLASH_ATTN(flash_attn_f32_d256, float, 256)
FLASH_ATTN(flash_attn_bf16_d128, u16, 128)
FLASH_ATTN(flash_attn_bf16_d256, u16, 256)
#endif

// ---- flash_wide_<kv>_d<D>: 128 query rows a block, the key tiles pipelined ----
//
// The kernels above read a K and a V tile between two barriers and wait for
// them; at long context a block spends most of its time there, and each
// tile serves 64 query rows. Here a block takes 128 query rows (8 warps) and
// FW_BN keys a tile in two buffers: the next tile's copies (cp.async) are
// in flight while this one's products run. A bf16 cache is copied into the
// tile as it is; a float32 one into a staging area, rounded to bf16 into the
// tile by the whole block once it has landed. The same products, softmax
// and epilogue as flash_attn, in the same order for a row: the results
// differ from flash_attn's only where FW_BN splits the keys differently
// (the running maximum and the rescaling by tile).
//
// Shared memory: the Q tile (128 rows of D bf16), two K and two V tiles of
// FW_BN rows, and for a float32 cache the staging of one K and one V tile
// in float32: 128 KiB (bf16) or 192 KiB (float32) at D = 256, one block a
// multiprocessor.
#define FW_BM 128
#define FW_BN 32
#define FW_THREADS 256

// fw_issue queues the copies of keys k0..k0+FW_BN-1 (zeros past kend) of
// KV head g: bf16 rows straight into the swizzled tiles tk and tv, float32
// rows into the staging area st (K then V, rows of 4·D bytes).
template <typename T, int D>
static __device__ __forceinline__ void fw_issue(const T* __restrict__ kc, const T* __restrict__ vc, long long stride,
                                                int g, int k0, int kend, u32 tk, u32 tv, u32 st, int tid) {
  constexpr int CH = D * (int)sizeof(T) / 16;  // 16-byte chunks of a cache row
#pragma unroll
  for (int j = 0; j < 2 * FW_BN * CH / FW_THREADS; j++) {
    const int id = tid + j * FW_THREADS, kv = id / (FW_BN * CH), r = (id / CH) % FW_BN, c = id % CH, key = k0 + r;
    const bool v = key < kend;
    const T* src = (kv ? vc : kc) + (v ? (long long)key * stride + (long long)g * D : 0) + c * (16 / (int)sizeof(T));
    u32 dst;
    if (sizeof(T) == 2)
      dst = (kv ? tv : tk) + r * (2 * D) + ((c ^ (r & 7)) << 4);
    else
      dst = st + (kv * FW_BN + r) * (4 * D) + c * 16;
    cp_async16(dst, src, v);
  }
  cp_commit();
}

// fw_round rounds the staged float32 K and V tiles to bf16 into tk and tv.
template <int D>
static __device__ __forceinline__ void fw_round(const unsigned char* st, u32 tk, u32 tv, int tid) {
  constexpr int CH = D / 8;  // 16-byte bf16 chunks a row: 8 floats
#pragma unroll 4
  for (int j = 0; j < 2 * FW_BN * CH / FW_THREADS; j++) {
    const int id = tid + j * FW_THREADS, kv = id / (FW_BN * CH), r = (id / CH) % FW_BN, c = id % CH;
    u32 w[4];
    fa_chunk8((const float*)(st + (kv * FW_BN + r) * (4 * D)) + c * 8, w);
    fa_st16((kv ? tv : tk) + r * (2 * D) + ((c ^ (r & 7)) << 4), w[0], w[1], w[2], w[3]);
  }
}

template <typename T, int D>
static __device__ __forceinline__ void flash_wide(const float* __restrict__ q, const float* __restrict__ qg,
                                                  const T* __restrict__ kc, const T* __restrict__ vc,
                                                  const int* __restrict__ pos, float* __restrict__ out, int rows,
                                                  int QH, int KVH, int maxPos) {
  constexpr int ROWB = 2 * D, TILE = FW_BN * ROWB;
  constexpr bool F32 = sizeof(T) == 4;
  extern __shared__ __attribute__((aligned(128))) unsigned char fa_sm[];
  const u32 sq = fa_smem(fa_sm), tiles = sq + FW_BM * ROWB, stg = tiles + 4 * TILE;
  const unsigned char* stgp = fa_sm + FW_BM * ROWB + 4 * TILE;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const FaBlock fb = fa_block<FW_BM, D>(pos, rows, QH, KVH, maxPos);
  const int G = fb.G, g = fb.g, tok0 = fb.tok0, p0 = fb.p0, kend = fb.kend;
  const long long stride = fb.stride;
  // tile buffer b: K at tiles + 2b·TILE, V after it
  auto tk = [&](int b) __attribute__((always_inline)) { return tiles + (2 * b) * TILE; };
  auto tv = [&](int b) __attribute__((always_inline)) { return tiles + (2 * b + 1) * TILE; };

  // The first tile's copies go out before the Q tile is written.
  fw_issue<T, D>(kc, vc, stride, g, 0, kend, tk(0), tv(0), stg, tid);
  fa_load_q<FW_BM, FW_THREADS, D>(sq, q, tid, tok0, rows, G, g, QH);
  cp_wait<0>();
  __syncthreads();
  if (F32) {
    fw_round<D>(stgp, tk(0), tv(0), tid);
    __syncthreads();
  }

  FaRows<D> st;
  fa_rows<D>(st, warp, lane, G, p0 + tok0, kend);
  for (int k0 = 0, b = 0; k0 < kend; k0 += FW_BN, b ^= 1) {
    // The next tile's copies: into the buffer every warp finished with at
    // the barrier that ended the last iteration.
    if (k0 + FW_BN < kend) fw_issue<T, D>(kc, vc, stride, g, k0 + FW_BN, kend, tk(b ^ 1), tv(b ^ 1), stg, tid);
    fa_tile<D, FW_BN>(sq, tk(b), tv(b), warp, lane, k0, p0 + tok0, st);
    // The next tile has landed (a float32 one is rounded into its buffer)
    // and every warp is done with this one.
    cp_wait<0>();
    __syncthreads();
    if (F32 && k0 + FW_BN < kend) {
      fw_round<D>(stgp, tk(b ^ 1), tv(b ^ 1), tid);
      __syncthreads();
    }
  }
  fa_store<D>(st, warp, lane, G, g, tok0, rows, p0, maxPos, QH, qg, out);
}

#define FLASH_WIDE(NAME, T, D)                                                                                     \
  extern "C" __global__ void __launch_bounds__(FW_THREADS, 1) NAME(const float* q, const float* qg, const T* kc,  \
                                                                   const T* vc, const int* pos, float* out,      \
                                                                   int rows, int QH, int KVH, int maxPos) {      \
    pdl_begin();                                                                                                  \
    flash_wide<T, D>(q, qg, kc, vc, pos, out, rows, QH, KVH, maxPos);                                            \
  }
#ifndef FA_WG_MODULE
FLASH_WIDE(flash_wide_f32_d128, float, 128)
FLASH_WIDE(flash_wide_f32_d256, float, 256)
FLASH_WIDE(flash_wide_bf16_d128, u16, 128)
FLASH_WIDE(flash_wide_bf16_d256, u16, 256)
#endif

#ifndef FA_WG_MODULE
// ---- kv_to_bf16: a float32 cache's rows as bf16, once a chunk ----
//
// The flash kernels over a float32 cache round each K and V tile to bf16
// in every block that reads it, through a staging area and a barrier more
// (at long context 30 % slower than over a bf16 cache). This copies rows
// 0 .. min(*pos + rows, maxPos) - 1 of both caches (width floats a row) to
// bf16 once, rounded as those kernels round them (fa_chunk8), so that the
// bf16 kernels over the copy give the float32 kernels' outputs bit for bit.
// Any grid; 256 threads; width a multiple of 8.
extern "C" __global__ void __launch_bounds__(256) kv_to_bf16(const float* __restrict__ kc, const float* __restrict__ vc,
                                                            const int* __restrict__ pos, u16* __restrict__ kb,
                                                            u16* __restrict__ vb, int rows, int maxPos, int width) {
  pdl_begin();
  int n = *pos + rows;
  if (n > maxPos) n = maxPos;
  const long long chunks = n > 0 ? (long long)n * width / 8 : 0;  // 8 elements a chunk, per cache
  const long long step = (long long)FA_NCTAID_X() * 256;
  for (long long i = (long long)PETAL_BID_X() * 256 + PETAL_TID_X(); i < 2 * chunks; i += step) {
    const bool v = i >= chunks;
    const long long j = v ? i - chunks : i;
    u32 w[4];
    fa_chunk8((v ? vc : kc) + j * 8, w);
    struct __attribute__((aligned(16))) {
      u32 x, y, z, w;
    } o = {w[0], w[1], w[2], w[3]};
    *(decltype(o)*)((v ? vb : kb) + j * 8) = o;
  }
}
#endif  // FA_WG_MODULE
