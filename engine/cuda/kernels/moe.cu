// moe.cu: the MoE block of one decoded token (spec 2.8) in two launches,
// with the router's choice read on the device (ids and weights of the top
// MOE_TOPK experts, written there by the router), so that the step can be
// captured once in a graph and replayed.
//
//   moe_gate_up: h[slot][r] = silu(gate_e[r]·x) * (up_e[r]·x) for the routed
//     slots (e = ids[slot]) and, as slot MOE_TOPK, the shared expert; and
//     logit = shared_expert_gate·x (an 8-bit row, float32).
//   moe_down: out[r] = resid[r] + sum over slots of w_slot * (down_e[r]·h[slot]),
//     w the routing weights and, for the shared expert, sigmoid(logit).
//
// Weights are MLX affine 4-bit in groups of 64 (qgroup.h), expert stacks as
// one matrix of experts·rows rows. out may be resid (the residual add in place).
#include "qgroup.h"

#define MOE_TOPK 8
#define MOE_UP_WARPS 8
#define MOE_DOWN_WARPS 4

// fexp is e^x through ex2.approx (2 ulp): the activations' exponentials.
static __device__ __forceinline__ float fexp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
static __device__ __forceinline__ float silu(float x) { return x / (1.f + fexp(-x)); }
static __device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + fexp(-x)); }

template <int M, int R, int SB>
static __device__ __forceinline__ void moe_gate_up(
    const u32* __restrict__ gw, const u16* __restrict__ gs, const u16* __restrict__ gb,     // routed gate stack
    const u32* __restrict__ uw, const u16* __restrict__ us, const u16* __restrict__ ub,     // routed up stack
    const u32* __restrict__ sgw, const u16* __restrict__ sgs, const u16* __restrict__ sgb,  // shared gate
    const u32* __restrict__ suw, const u16* __restrict__ sus, const u16* __restrict__ sub,  // shared up
    const u32* __restrict__ ew, const u16* __restrict__ es, const u16* __restrict__ eb,     // 8-bit gate row
    const int* __restrict__ ids, const float* __restrict__ x, float* __restrict__ h, float* __restrict__ logit,
    int I, int H, int team) {
  const int groups = H / 64;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int sub_ = lane / team, tl = lane % team;
  const int perWarp = (32 / team) * R;
  // Tasks: a (gate, up) row pair for each of the (MOE_TOPK+1)*I outputs,
  // then the shared expert's gate row as the last task.
  const int rowTasks = (MOE_TOPK + 1) * I, tasks = rowTasks + 1;
  const long long wpr = H / 8;
  const int nwarps = PETAL_NCTAID_X() * MOE_UP_WARPS;
  const int first = (PETAL_BID_X() * MOE_UP_WARPS + warp) * perWarp;
  // (no prefetch_l2 of the first rows here: reading the ids before x is
  // staged made this kernel 0.4 us slower, run l2pre1)
  const QView q = qstage<M>(x, groups);

  for (int base = first; base < tasks; base += nwarps * perWarp) {
    const u32 *pg[R], *pu[R];
    const u16 *psg[R], *pbg[R], *psu[R], *pbu[R];
    long long srow[R];  // row index into the scale arrays
    bool gate8[R];
#pragma unroll
    for (int j = 0; j < R; j++) {
      int t = base + sub_ * R + j;
      t = t < tasks ? t : tasks - 1;
      int slot = t / I, r = t - slot * I;
      gate8[j] = t == rowTasks;
      if (slot < MOE_TOPK) {
        long long row = (long long)ids[slot] * I + r;
        pg[j] = gw + row * wpr, pu[j] = uw + row * wpr;
        psg[j] = gs, pbg[j] = gb, psu[j] = us, pbu[j] = ub;
        srow[j] = row * groups;
      } else {
        r = gate8[j] ? 0 : r;
        pg[j] = sgw + r * wpr, pu[j] = suw + r * wpr;
        psg[j] = sgs, pbg[j] = sgb, psu[j] = sus, pbu[j] = sub;
        srow[j] = (long long)r * groups;
      }
    }
    float ag[R], au[R];
#pragma unroll
    for (int j = 0; j < R; j++) ag[j] = au[j] = 0.f;
    for (int g = tl; g < groups; g += team) {
#pragma unroll
      for (int j = 0; j < R; j++) {
        if (gate8[j]) {
          // The shared expert's gate: an 8-bit row, 4 codes a word (byte
          // k of word i is element 4i+k), w = s*q + b in float32.
          const u32* p = ew + g * 16;
          u32x4 w[4] = {ld_stream_16(p), ld_stream_16(p + 4), ld_stream_16(p + 8), ld_stream_16(p + 12)};
          const float s = bf16_to_f32(es[g]), b = bf16_to_f32(eb[g]);
          const float* xr = q.raw + 64 * g;
          float a = 0.f;
#pragma unroll
          for (int i = 0; i < 4; i++) {
            const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
            for (int k = 0; k < 16; k++) a += (s * (float)((ws[k >> 2] >> (8 * (k & 3))) & 0xFFu) + b) * xr[16 * i + k];
          }
          ag[j] += a;
          continue;
        }
        const u32x4 g0 = ld_stream_16(pg[j] + g * 8), g1 = ld_stream_16(pg[j] + g * 8 + 4);
        const u32x4 u0 = ld_stream_16(pu[j] + g * 8), u1 = ld_stream_16(pu[j] + g * 8 + 4);
        float s1, b1, s2, b2;
        load_sb<SB>(psg[j], pbg[j], srow[j] + g, s1, b1);
        load_sb<SB>(psu[j], pbu[j], srow[j] + g, s2, b2);
        const float cs = q.gsum[g];
        ag[j] += s1 * qdot<M>(g0, g1, q.xs, groups, g, q.gd) + b1 * cs;
        au[j] += s2 * qdot<M>(u0, u1, q.xs, groups, g, q.gd) + b2 * cs;
      }
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) {
        ag[j] += __shfl_xor_sync(0xffffffffu, ag[j], off);
        au[j] += __shfl_xor_sync(0xffffffffu, au[j], off);
      }
      int t = base + sub_ * R + j;
      if (tl == 0 && t < rowTasks) h[t] = silu(ag[j]) * au[j];
      if (tl == 0 && t == rowTasks) logit[0] = ag[j];
    }
  }
}

template <int M, int SB>
static __device__ __forceinline__ void moe_down(
    const u32* __restrict__ dw, const u16* __restrict__ ds, const u16* __restrict__ db,     // routed down stack
    const u32* __restrict__ sdw, const u16* __restrict__ sds, const u16* __restrict__ sdb,  // shared down
    const int* __restrict__ ids, const float* __restrict__ wts, const float* __restrict__ logit,
    const float* __restrict__ h, const float* resid, float* out, int H, int I, int team) {
  const int gpr = I / 64, groups = (MOE_TOPK + 1) * gpr;
  int eid[MOE_TOPK];
  float coef[MOE_TOPK + 1];
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) eid[k] = ids[k], coef[k] = wts[k];
  coef[MOE_TOPK] = sigmoid(logit[0]);

  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int sub_ = lane / team, tl = lane % team;
  const int perWarp = 32 / team;
  const long long wpr = I / 8;
  const int nwarps = PETAL_NCTAID_X() * MOE_DOWN_WARPS;
  const int first = (PETAL_BID_X() * MOE_DOWN_WARPS + warp) * perWarp;
  // the nine down rows of the warp's first output row asked of L2 before h
  // is staged: they depend on the router's ids, not on h
  if (first + sub_ < H) {
#pragma unroll
    for (int k = 0; k <= MOE_TOPK; k++) {
      const long long row = k < MOE_TOPK ? (long long)eid[k] * H + first + sub_ : first + sub_;
      for (int g = tl; g < gpr; g += team) prefetch_l2((k < MOE_TOPK ? dw : sdw) + row * wpr + g * 8);
    }
  }
  const QView q = qstage<M>(h, groups);

  for (int base = first; base < H; base += nwarps * perWarp) {
    int r = base + sub_;
    r = r < H ? r : H - 1;
    float acc = 0.f;
    for (int g = tl; g < gpr; g += team) {
      u32x4 w0[MOE_TOPK + 1], w1[MOE_TOPK + 1];
      float s[MOE_TOPK + 1], b[MOE_TOPK + 1];
#pragma unroll
      for (int k = 0; k <= MOE_TOPK; k++) {
        long long row = k < MOE_TOPK ? (long long)eid[k] * H + r : r;
        const u32* p = (k < MOE_TOPK ? dw : sdw) + row * wpr + g * 8;
        w0[k] = ld_stream_16(p);
        w1[k] = ld_stream_16(p + 4);
        load_sb<SB>(k < MOE_TOPK ? ds : sds, k < MOE_TOPK ? db : sdb, row * gpr + g, s[k], b[k]);
      }
#pragma unroll
      for (int k = 0; k <= MOE_TOPK; k++) {
        int gg = k * gpr + g;
        acc += coef[k] * (s[k] * qdot<M>(w0[k], w1[k], q.xs, groups, gg, q.gd) + b[k] * q.gsum[gg]);
      }
    }
    for (int off = team >> 1; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (tl == 0 && base + sub_ < H) out[r] = resid[r] + acc;
  }
}

// Entry points moe_gate_up_<kind>[_sb] and moe_down_<kind>[_sb]. Launch
// gate_up with MOE_UP_WARPS*32 threads and QSTAGE_BYTES(kind, H/64) bytes of
// shared memory, down with MOE_DOWN_WARPS*32 threads and
// QSTAGE_BYTES(kind, (MOE_TOPK+1)*I/64); x and h 16-byte aligned. gate_up
// takes one (gate, up) row pair per lane (R = 1).
#define MOE_UP(M, R, SB, NAME)                                                                               \
  extern "C" __global__ void __launch_bounds__(MOE_UP_WARPS * 32, 2)                                         \
      NAME(const u32* gw, const u16* gs, const u16* gb, const u32* uw, const u16* us, const u16* ub,          \
           const u32* sgw, const u16* sgs, const u16* sgb, const u32* suw, const u16* sus, const u16* sub,    \
           const u32* ew, const u16* es, const u16* eb, const int* ids, const float* x, float* h,             \
           float* logit, int I, int H, int team) { pdl_begin();                                              \
    moe_gate_up<M, R, SB>(gw, gs, gb, uw, us, ub, sgw, sgs, sgb, suw, sus, sub, ew, es, eb, ids, x, h, logit, \
                          I, H, team);                                                                       \
  }
#define MOE_DOWN(M, SB, NAME)                                                                                  \
  extern "C" __global__ void __launch_bounds__(MOE_DOWN_WARPS * 32, 4)                                         \
      NAME(const u32* dw, const u16* ds, const u16* db, const u32* sdw, const u16* sds, const u16* sdb,         \
           const int* ids, const float* wts, const float* logit, const float* h, const float* resid, float* out, \
           int H, int I, int team) { pdl_begin();                                                              \
    moe_down<M, SB>(dw, ds, db, sdw, sds, sdb, ids, wts, logit, h, resid, out, H, I, team);                    \
  }
MOE_UP(QM_F32, 1, 0, moe_gate_up_f32)
MOE_UP(QM_F32, 1, 1, moe_gate_up_f32_sb)
MOE_UP(QM_I8X2, 1, 1, moe_gate_up_i8x2_sb)
MOE_UP(QM_I8X3, 1, 1, moe_gate_up_i8x3_sb)
MOE_DOWN(QM_F32, 0, moe_down_f32)
MOE_DOWN(QM_F32, 1, moe_down_f32_sb)
MOE_DOWN(QM_I8X2, 1, moe_down_i8x2_sb)
MOE_DOWN(QM_I8X3, 1, moe_down_i8x3_sb)
