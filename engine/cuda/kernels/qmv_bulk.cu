// qmv_bulk.cu: qmv.cu's mat-vecs with the weights brought to shared memory
// by the copy engine (cp.async.bulk, Hopper's TMA without a tensor map)
// instead of loaded by the lanes: each block takes a contiguous run of
// rows, and thread 0 asks for the codes and scale/bias words of its first
// chunks before the kernel waits for the one before it (the weights do not
// depend on it), so device memory is busy from the block's first cycle and
// no lane's loads wait on it step by step. The arithmetic is qmv.cu's (the
// same team of lanes a row, the same groups a lane, the same order of
// sums): the outputs are the same bits.
//
// A chunk is the rows the block's warps take in one step (QMV_WARPS warps,
// 32/team rows a team, R a lane); chunk c of the block's run lives in stage
// c % stages of a ring in shared memory, each stage's mbarrier completing
// when its bytes have landed. Once every warp is done with a stage (a
// barrier), thread 0 asks for the chunk that reuses it.
#include "qmv.h"

// QMV_BULK_STAGES is the most stages a ring has (the launch picks fewer
// where the block's run has fewer chunks, or shared memory is short).
#define QMV_BULK_STAGES 6

// mbarrier and bulk-copy helpers; bar and dst are shared-window addresses
// (smem_u32).
static __device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// mbar_expect arrives on bar (its one expected arrival) and tells it how
// many bytes of bulk copies complete its phase.
static __device__ __forceinline__ void mbar_expect(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ bool mbar_done(u32 bar, u32 parity) {
  u32 ok;
  asm volatile(
      "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// bulk_copy copies bytes (a multiple of 16, both ends 16-byte aligned) from
// device memory to shared memory, completing bytes of bar's phase.
static __device__ __forceinline__ void bulk_copy(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// BulkRing is a block's ring: stage s at base + s*stageBytes holds a
// chunk's codes (row i at i*codeBytes) and then its scale/bias words (row
// i at chunk*codeBytes + i*sbBytes).
struct BulkRing {
  u32 base;  // shared-window address
  u32 stageBytes, codeBytes, sbBytes;
  int chunk;
};

// bulk_issue asks for the block's rows lo..hi-1 (launch rows) into stage s,
// split where they cross from one matrix of the group to the next.
template <bool G>
static __device__ __forceinline__ void bulk_issue(const BulkRing& ring, u32 bar, int s, int lo, int hi,
                                                  const u32* words, const u32* sb, const QMVGroup& grp) {
  const u32 dst = ring.base + s * ring.stageBytes;
  const long long wpr = ring.codeBytes / 4, spr = ring.sbBytes / 4;  // words a row
  mbar_expect(bar, (u32)(hi - lo) * (ring.codeBytes + ring.sbBytes));
  if (G) {
#pragma unroll
    for (int k = 0; k < QMV_GROUP; k++) {
      if (k < grp.n) {
        const int a = lo > grp.start[k] ? lo : grp.start[k];
        const int b = hi < grp.start[k + 1] ? hi : grp.start[k + 1];
        if (a < b) {
          const long long local = a - grp.start[k];
          bulk_copy(dst + (a - lo) * ring.codeBytes, grp.words[k] + local * wpr, (b - a) * ring.codeBytes, bar);
          bulk_copy(dst + ring.chunk * ring.codeBytes + (a - lo) * ring.sbBytes, grp.sb[k] + local * spr,
                    (b - a) * ring.sbBytes, bar);
        }
      }
    }
  } else {
    bulk_copy(dst, words + (long long)lo * wpr, (hi - lo) * ring.codeBytes, bar);
    bulk_copy(dst + ring.chunk * ring.codeBytes, sb + (long long)lo * spr, (hi - lo) * ring.sbBytes, bar);
  }
}

// ld_shared_16 is the 16 bytes at shared-window address a.
static __device__ __forceinline__ u32x4 ld_shared_16(u32 a) {
  u32x4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
static __device__ __forceinline__ u32 ld_shared_u32(u32 a) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}

// qmv_bulk is qmv (qmv.cu) over the ring: the rows first .. first+run-1 of
// the launch for block b = first/run, in chunks; stages of them in flight.
// sb is the interleaved scale/bias words (one u32 a group).
template <int M, int R, bool G, bool N = false>
static __device__ __forceinline__ void qmv_bulk(const u32* __restrict__ words, const u32* __restrict__ sb,
                                                const float* __restrict__ x, float* __restrict__ y, int rows,
                                                int cols, int team, int run, int stages, const QMVGroup& grp,
                                                QMVNorm nrm = QMVNorm{}) {
  extern __shared__ u32 smem[];
  __shared__ __attribute__((aligned(8))) u64 full[QMV_BULK_STAGES];
  const int groups = cols / 64;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int sub = lane / team, tl = lane % team;
  if (G) rows = group_rows(grp);
  const int first = PETAL_BID_X() * run;
  const int last = first + run < rows ? first + run : rows;
  BulkRing ring;
  ring.chunk = QMV_WARPS * (32 / team) * R;
  ring.codeBytes = cols / 2;
  ring.sbBytes = groups * 4;
  ring.stageBytes = ring.chunk * (ring.codeBytes + ring.sbBytes);
  // the ring past the staging (and the norm's keep), 128-byte aligned
  ring.base = (smem_u32(smem) + QSTAGE_BYTES(M, groups) + (N ? 4 * cols : 0) + 127) & ~127u;
  const int chunks = last > first ? (last - first + ring.chunk - 1) / ring.chunk : 0;
  const u32 bars = smem_u32(full);

  // The weights of the first stages asked for before the wait for the
  // kernel before (pdl_begin): they do not depend on it.
  if (tid == 0) {
    for (int s = 0; s < stages; s++) mbar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int c = 0; c < stages && c < chunks; c++) {
      const int lo = first + c * ring.chunk, hi = lo + ring.chunk < last ? lo + ring.chunk : last;
      bulk_issue<G>(ring, bars + 8 * c, c, lo, hi, words, sb, grp);
    }
  }
  pdl_begin();
  if (N) nrm.in.keep = (float*)(smem + QSTAGE_BYTES(M, groups) / 4);  // cols floats past the staging
  qstage_raw<N>(x, groups, nrm.in);
  const QView q = qstage_layout<M>(groups);
  // With the norm, qmv's ticket: the block that takes the last one writes h
  // and the normed row back when it is done, once every block has read h.
  u32 ticket = 0;
  if (N && tid == 0) {
    fence_gpu();
    ticket = ticket_inc(nrm.counter, PETAL_NCTAID_X() - 1);
  }

  // A lane's 16-byte loads of a group go in the order that keeps the eight
  // lanes of a quarter warp on distinct banks: those with bit 2 of their
  // team lane set read the group's second half first.
  const u32 swap = ((tl >> 2) & 1) * 16;
  for (int c = 0; c < chunks; c++) {
    const int s = c % stages;
    while (!mbar_done(bars + 8 * s, (c / stages) & 1)) {
    }
    const u32 stage = ring.base + s * ring.stageBytes;
    float acc[R];
#pragma unroll
    for (int j = 0; j < R; j++) acc[j] = 0.f;
    for (int g = tl; g < groups; g += team) {
      u32x4 w0[R], w1[R];
      float sc[R], bi[R];
#pragma unroll
      for (int j = 0; j < R; j++) {
        const int i = (warp * (32 / team) + sub) * R + j;  // the row in the chunk
        const u32 p = stage + i * ring.codeBytes + g * 32;
        const u32x4 a = ld_shared_16(p + swap), b = ld_shared_16(p + (swap ^ 16));
        w0[j] = swap ? b : a;
        w1[j] = swap ? a : b;
        const u32 v = ld_shared_u32(stage + ring.chunk * ring.codeBytes + i * ring.sbBytes + g * 4);
        sc[j] = __uint_as_float(v << 16);
        bi[j] = __uint_as_float(v & 0xffff0000u);
      }
      const float gs = q.gsum[g];
#pragma unroll
      for (int j = 0; j < R; j++) acc[j] += sc[j] * qdot<M>(w0[j], w1[j], q.xs, groups, g, q.gd) + bi[j] * gs;
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
      const int r = first + c * ring.chunk + (warp * (32 / team) + sub) * R + j;
      if (tl == 0 && r < last) *qrow_at<G>(r, words, (const u16*)sb, y, cols / 8, groups, grp).y = acc[j];
    }
    // every warp done with stage s before thread 0 asks for the chunk that
    // reuses it (its generic reads ordered before the copy's writes)
    __syncthreads();
    if (tid == 0 && c + stages < chunks) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      const int lo = first + (c + stages) * ring.chunk, hi = lo + ring.chunk < last ? lo + ring.chunk : last;
      bulk_issue<G>(ring, bars + 8 * s, s, lo, hi, words, sb, grp);
    }
  }
  if (N) {
    __shared__ int lastBlock;
    if (tid == 0) lastBlock = ticket == PETAL_NCTAID_X() - 1;
    __syncthreads();
    if (!lastBlock) return;
    fence_gpu();
    float* h = (float*)nrm.in.h;
    for (int i = tid; i < cols; i += PETAL_NTID_X()) {
      if (nrm.in.delta) h[i] = nrm.in.keep[i];
      nrm.out[i] = q.raw[i];
    }
  }
}

// Entry points qmv_bulk_<kind>_r<R>: qmv_<kind>_r<R>_sb over the ring, the
// block's run of rows and the ring's stages given; launch with
// QMV_WARPS*32 threads and QSTAGE_BYTES + 128 + stages * stage bytes of
// shared memory (QMVBulk in qmv.go).
#define QMV_BULK(M, R, B, NAME)                                                                             \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                           \
      NAME(const u32* words, const u32* sb, const float* x, float* y, int rows, int cols, int team, int run, \
           int stages) {                                                                                    \
    qmv_bulk<M, R, false>(words, sb, x, y, rows, cols, team, run, stages, QMVGroup{});                      \
  }
QMV_BULK(QM_I8X3, 2, 2, qmv_bulk_i8x3_r2)

// Entry points qmv_group_norm_bulk_<kind>_r2: qmv_group_norm_<kind>_r2
// over the ring, with 4*cols more bytes of shared memory before it (the
// norm's keep).
#define QMV_GROUPED_NORM_BULK(M, R, B, NAME)                                                              \
  extern "C" __global__ void __launch_bounds__(QMV_WARPS * 32, B)                                         \
      NAME(const QMVGroup grp, float* h, const float* delta, const float* w, float eps, float* out,     \
           u32* counter, int cols, int team, int run, int stages) {                                       \
    qmv_bulk<M, R, true, true>(nullptr, nullptr, nullptr, nullptr, 0, cols, team, run, stages, grp,        \
                               QMVNorm{QNormIn{h, delta, w, eps}, out, counter});                        \
  }
QMV_GROUPED_NORM_BULK(QM_I8X3, 2, 2, qmv_group_norm_bulk_i8x3_r2)
