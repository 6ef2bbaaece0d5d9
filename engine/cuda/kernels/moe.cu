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
#include "route.h"

#define MOE_TOPK 8
#define MOE_UP_WARPS 8
#define MOE_DOWN_WARPS 8

// fexp is e^x through ex2.approx (2 ulp): the activations' exponentials.
static __device__ __forceinline__ float fexp(float x) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}
static __device__ __forceinline__ float silu(float x) { return x / (1.f + fexp(-x)); }
static __device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + fexp(-x)); }

// moe_gate_up_tasks does tasks t0 .. t1-1 (of the (MOE_TOPK+1)*I row pairs
// and, as task (MOE_TOPK+1)*I, the shared expert's gate row), this warp
// being warp gwarp of nwarps, x staged in q.
template <int M, int R, int SB>
static __device__ __forceinline__ void moe_gate_up_tasks(
    const u32* __restrict__ gw, const u16* __restrict__ gs, const u16* __restrict__ gb,     // routed gate stack
    const u32* __restrict__ uw, const u16* __restrict__ us, const u16* __restrict__ ub,     // routed up stack
    const u32* __restrict__ sgw, const u16* __restrict__ sgs, const u16* __restrict__ sgb,  // shared gate
    const u32* __restrict__ suw, const u16* __restrict__ sus, const u16* __restrict__ sub,  // shared up
    const u32* __restrict__ ew, const u16* __restrict__ es, const u16* __restrict__ eb,     // 8-bit gate row
    const int* ids, const QView& q, float* __restrict__ h, float* __restrict__ logit, int I, int H, int team, int t0,
    int t1, int gwarp, int nwarps) {
  const int groups = H / 64;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int sub_ = lane / team, tl = lane % team;
  const int perWarp = (32 / team) * R;
  // Tasks: a (gate, up) row pair for each of the (MOE_TOPK+1)*I outputs,
  // then the shared expert's gate row as the last task.
  const int rowTasks = (MOE_TOPK + 1) * I;
  const long long wpr = H / 8;
  const int first = t0 + gwarp * perWarp;

  for (int base = first; base < t1; base += nwarps * perWarp) {
    const u32 *pg[R], *pu[R];
    const u16 *psg[R], *pbg[R], *psu[R], *pbu[R];
    long long srow[R];  // row index into the scale arrays
    bool gate8[R];
#pragma unroll
    for (int j = 0; j < R; j++) {
      int t = base + sub_ * R + j;
      t = t < t1 ? t : t1 - 1;
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
      if (tl == 0 && t < t1 && t < rowTasks) h[t] = silu(ag[j]) * au[j];
      if (tl == 0 && t < t1 && t == rowTasks) logit[0] = ag[j];
    }
  }
}


// moe_gate_up_shared_prefetch asks L2 for the shared expert's rows among
// the tasks of this warp (moe_gate_up_tasks' order over all the tasks):
// they do not depend on the router, so moe_gate_up asks for them before
// its wait, while the router's last block selects.
template <int R, int SB>
static __device__ __forceinline__ void moe_gate_up_shared_prefetch(
    const u32* __restrict__ sgw, const u16* __restrict__ sgs, const u32* __restrict__ suw,
    const u16* __restrict__ sus, const u32* __restrict__ ew, int I, int H, int team) {
  const int groups = H / 64, lane = PETAL_TID_X() & 31;
  const int sub_ = lane / team, tl = lane % team, perWarp = (32 / team) * R;
  const int rowTasks = (MOE_TOPK + 1) * I, t1 = rowTasks + 1;
  const int nwarps = PETAL_NCTAID_X() * MOE_UP_WARPS;
  const int gwarp = PETAL_BID_X() * MOE_UP_WARPS + (PETAL_TID_X() >> 5);
  const long long wpr = H / 8;
  // the first of this warp's steps that reaches the shared expert's tasks
  int base = gwarp * perWarp;
  if (base < MOE_TOPK * I) base += (MOE_TOPK * I - base) / (nwarps * perWarp) * (nwarps * perWarp);
  for (; base < t1; base += nwarps * perWarp) {
#pragma unroll
    for (int j = 0; j < R; j++) {
      const int t = base + sub_ * R + j;
      if (t < MOE_TOPK * I || t >= t1) continue;
      if (t == rowTasks) {  // the shared expert's 8-bit gate row
        for (int g = tl; g < groups; g += team) prefetch_l2(ew + g * 16);
        continue;
      }
      const long long r = t - MOE_TOPK * I;
      for (int g = tl; g < groups; g += team) {
        prefetch_l2(sgw + r * wpr + g * 8);
        prefetch_l2(suw + r * wpr + g * 8);
      }
      if (SB && tl == 0) {
        prefetch_l2(sgs + 2 * r * groups);
        prefetch_l2(sus + 2 * r * groups);
      }
    }
  }
}

template <int M, int R, int SB>
static __device__ __forceinline__ void moe_gate_up(
    const u32* __restrict__ gw, const u16* __restrict__ gs, const u16* __restrict__ gb,
    const u32* __restrict__ uw, const u16* __restrict__ us, const u16* __restrict__ ub,
    const u32* __restrict__ sgw, const u16* __restrict__ sgs, const u16* __restrict__ sgb,
    const u32* __restrict__ suw, const u16* __restrict__ sus, const u16* __restrict__ sub,
    const u32* __restrict__ ew, const u16* __restrict__ es, const u16* __restrict__ eb,
    const int* __restrict__ ids, const float* __restrict__ x, float* __restrict__ h, float* __restrict__ logit,
    int I, int H, int team) {
  // (no prefetch_l2 of the first rows here: reading the ids before x is
  // staged made this kernel 0.4 us slower, run l2pre1)
  // PETAL_MARK's points (clock builds): 0 start, 1 x copied, 2 x staged,
  // 3 the tasks done.
  PETAL_MARK(0);
  qstage_raw(x, H / 64);
  PETAL_MARK(1);
  const QView q = qstage_layout<M>(H / 64);
  PETAL_MARK(2);
  moe_gate_up_tasks<M, R, SB>(gw, gs, gb, uw, us, ub, sgw, sgs, sgb, suw, sus, sub, ew, es, eb, ids, q, h, logit, I, H,
                              team, 0, (MOE_TOPK + 1) * I + 1, PETAL_BID_X() * MOE_UP_WARPS + (PETAL_TID_X() >> 5),
                              PETAL_NCTAID_X() * MOE_UP_WARPS);
  PETAL_MARK(3);
}

// moe_down_prefetch asks L2 for the nine down rows (MOE_TOPK routed, the
// shared expert's) of output row r: they depend on the router's ids, not
// on h, so they are asked for before h is staged.
static __device__ __forceinline__ void moe_down_prefetch(const u32* __restrict__ dw, const u32* __restrict__ sdw,
                                                         const int* eid, int r, int H, int I, int team) {
  const int tl = (PETAL_TID_X() & 31) % team, gpr = I / 64;
  const long long wpr = I / 8;
#pragma unroll
  for (int k = 0; k <= MOE_TOPK; k++) {
    const long long row = k < MOE_TOPK ? (long long)eid[k] * H + r : r;
    for (int g = tl; g < gpr; g += team) prefetch_l2((k < MOE_TOPK ? dw : sdw) + row * wpr + g * 8);
  }
}

// ld_cg_i and ld_cg_f read a word through L2 only (ld.global.cg), not L1:
// one written by another block of this launch (moe_layer), or by the
// router before moe_down's wait, on another multiprocessor.
static __device__ __forceinline__ int ld_cg_i(const int* p) {
  int v;
  asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}
static __device__ __forceinline__ float ld_cg_f(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

// moe_down_prefetch_lines asks L2 for the nine down rows of output row r
// as moe_down_prefetch does, and their scale/bias words, a 128-byte line
// at a time.
template <int SB>
static __device__ __forceinline__ void moe_down_prefetch_lines(const u32* __restrict__ dw, const u16* __restrict__ ds,
                                                               const u32* __restrict__ sdw,
                                                               const u16* __restrict__ sds, const int* eid, int r,
                                                               int H, int I, int team) {
  const int tl = (PETAL_TID_X() & 31) % team, gpr = I / 64;
  const long long wpr = I / 8;
#pragma unroll
  for (int k = 0; k <= MOE_TOPK; k++) {
    const long long row = k < MOE_TOPK ? (long long)eid[k] * H + r : r;
    for (long long w = tl * 32; w < wpr; w += team * 32) prefetch_l2((k < MOE_TOPK ? dw : sdw) + row * wpr + w);
    if (SB && tl == 0) prefetch_l2((k < MOE_TOPK ? ds : sds) + 2 * row * gpr);
  }
}

// moe_down_rows writes out[r] = resid[r] + sum over slots of coef*(down·h)
// for the rows of this warp, warp gwarp of nwarps, h staged in q, eid the
// routed experts and coef their weights and (last) the shared expert's.
template <int M, int SB>
static __device__ __forceinline__ void moe_down_rows(
    const u32* __restrict__ dw, const u16* __restrict__ ds, const u16* __restrict__ db,     // routed down stack
    const u32* __restrict__ sdw, const u16* __restrict__ sds, const u16* __restrict__ sdb,  // shared down
    const int* eid, const float* coef, const QView& q, const float* resid, float* out, int H, int I, int team, int gwarp,
    int nwarps) {
  const int gpr = I / 64, groups = (MOE_TOPK + 1) * gpr;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int sub_ = lane / team, tl = lane % team;
  const int perWarp = 32 / team;
  const long long wpr = I / 8;
  const int first = gwarp * perWarp;
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

template <int M, int SB>
static __device__ __forceinline__ void moe_down(
    const u32* __restrict__ dw, const u16* __restrict__ ds, const u16* __restrict__ db,     // routed down stack
    const u32* __restrict__ sdw, const u16* __restrict__ sds, const u16* __restrict__ sdb,  // shared down
    const int* __restrict__ ids, const float* __restrict__ wts, const float* __restrict__ logit,
    const float* __restrict__ h, const float* resid, float* out, int H, int I, int team) {
  // PETAL_MARK's points (clock builds): 8 start, 9 the routing read and
  // the first rows asked for, 10 h copied, 11 h staged, 12 the rows done.
  PETAL_MARK(8);
  // Launched while moe_gate_up runs (it lets this kernel launch right
  // after its own wait, so the router that wrote ids and wts has completed
  // by then): the choice is read through L2 and every down row this warp
  // will take asked of L2 before the wait for moe_gate_up, so that the
  // rows stream in while it runs. h and the shared gate's logit come from
  // moe_gate_up and are read after the wait; nothing is stored before it.
  int eid[MOE_TOPK];
  float coef[MOE_TOPK + 1];
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) eid[k] = ld_cg_i(ids + k), coef[k] = ld_cg_f(wts + k);
  const int lane = PETAL_TID_X() & 31, warp = PETAL_TID_X() >> 5;
  const int perWarp = 32 / team, nwarps = PETAL_NCTAID_X() * MOE_DOWN_WARPS;
  const int first = (PETAL_BID_X() * MOE_DOWN_WARPS + warp) * perWarp + lane / team;
  for (int r = first; r < H; r += nwarps * perWarp) moe_down_prefetch_lines<SB>(dw, ds, sdw, sds, eid, r, H, I, team);
  pdl_begin();
  pdl_trigger();  // the next layer's first projections stream their rows in beside this kernel
  coef[MOE_TOPK] = sigmoid(logit[0]);
  PETAL_MARK(9);
  qstage_raw(h, (MOE_TOPK + 1) * (I / 64));
  PETAL_MARK(10);
  const QView q = qstage_layout<M>((MOE_TOPK + 1) * (I / 64));
  PETAL_MARK(11);
  moe_down_rows<M, SB>(dw, ds, db, sdw, sds, sdb, eid, coef, q, resid, out, H, I, team,
                       PETAL_BID_X() * MOE_DOWN_WARPS + warp, PETAL_NCTAID_X() * MOE_DOWN_WARPS);
  PETAL_MARK(12);
}

// Entry points moe_gate_up_<kind>[_sb] and moe_down_<kind>[_sb]. Launch
// gate_up with MOE_UP_WARPS*32 threads and QSTAGE_BYTES(kind, H/64) bytes of
// shared memory, down with MOE_DOWN_WARPS*32 threads and
// QSTAGE_BYTES(kind, (MOE_TOPK+1)*I/64); x and h 16-byte aligned. gate_up
// takes one (gate, up) row pair per lane (R = 1). gate_up lets down launch
// right after its wait, and down asks L2 for its rows before its own wait
// (moe_down). down lets the next kernel (the next layer's qmv_group_norm)
// launch right after its wait: that one's blocks then stream their rows
// into L2 before their wait, which paid 0.6 us a layer more than placing
// them as down's blocks retire (pdltrig2).
#define MOE_UP(M, R, SB, NAME)                                                                               \
  extern "C" __global__ void __launch_bounds__(MOE_UP_WARPS * 32, 2)                                         \
      NAME(const u32* gw, const u16* gs, const u16* gb, const u32* uw, const u16* us, const u16* ub,          \
           const u32* sgw, const u16* sgs, const u16* sgb, const u32* suw, const u16* sus, const u16* sub,    \
           const u32* ew, const u16* es, const u16* eb, const int* ids, const float* x, float* h,             \
           float* logit, int I, int H, int team) {                                                           \
    moe_gate_up_shared_prefetch<R, SB>(sgw, sgs, suw, sus, ew, I, H, team);                                  \
    pdl_begin();                                                                                             \
    pdl_trigger();                                                                                           \
    moe_gate_up<M, R, SB>(gw, gs, gb, uw, us, ub, sgw, sgs, sgb, suw, sus, sub, ew, es, eb, ids, x, h, logit, \
                          I, H, team);                                                                       \
  }
#define MOE_DOWN(M, SB, NAME)                                                                                  \
  extern "C" __global__ void __launch_bounds__(MOE_DOWN_WARPS * 32, 16 / MOE_DOWN_WARPS)                                       \
      NAME(const u32* dw, const u16* ds, const u16* db, const u32* sdw, const u16* sds, const u16* sdb,         \
           const int* ids, const float* wts, const float* logit, const float* h, const float* resid, float* out, \
           int H, int I, int team) {                                                                           \
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

// ---------------------------------------------------------------------------
// moe_layer: a decoded token's whole MoE block in one launch: the
// post-attention add-and-norm, the router and its top-k, the experts'
// gate/up and down, with two grid-wide barriers between the three phases
// instead of three kernels (route_norm, moe_gate_up, moe_down). The grid is
// at most what the GPU holds at once (every block waits for every other at
// a barrier), and every block stages the normed x itself.
//
//   phase 1: blocks 0 .. routerBlocks-1 compute the router's logits and, in
//            the last of them to finish (a ticket), the top-k and their
//            weights; the other blocks meanwhile do the shared expert's
//            gate/up rows and its gate's logit, which need no routing.
//   phase 2: every block asks L2 for its first down rows (the ids are known
//            now) and does the routed experts' gate/up rows; block 0 writes
//            the norm's outputs (h += delta, the normed x), every block
//            having read h in phase 1.
//   phase 3: every block stages the activations and does the down rows.
//
// The results are bit for bit those of the three kernels: the same norm
// (qstage's, add_rmsnorm's order), the same per-row sums in the same order.

// MoELayerArgs are moe_layer's operands, passed by value.
struct MoELayerArgs {
  float* h;             // the residual stream, h += delta once every block has read it
  const float* delta;   // may be null
  const float* normw;   // the norm's weight
  float* xout;          // the normed row (the AddRMSNorm's output)
  const u32* rw;        // the router: 4- or 8-bit codes, bf16 scales and biases
  const u16* rs;
  const u16* rb;
  float* logits;        // [experts] scratch
  int* ids;             // [MOE_TOPK] out
  float* wts;           // [MOE_TOPK] out
  u32* ticket;          // the router's ticket, a u32 that wraps by itself
  u32* bar;             // the grid barrier: arrivals, generation (two u32, zero at first)
  const u32* gw; const u16* gs; const u16* gb;     // routed gate stack
  const u32* uw; const u16* us; const u16* ub;     // routed up stack
  const u32* sgw; const u16* sgs; const u16* sgb;  // shared gate
  const u32* suw; const u16* sus; const u16* sub;  // shared up
  const u32* ew; const u16* es; const u16* eb;     // the shared expert's 8-bit gate row
  const u32* dw; const u16* ds; const u16* db;     // routed down stack
  const u32* sdw; const u16* sds; const u16* sdb;  // shared down
  float* act;           // [(MOE_TOPK+1)·inter] scratch: the SwiGLU activations
  float* slogit;        // [1] scratch: the shared expert gate's logit
  const float* resid;   // added to the output (may be out)
  float* out;           // [hidden]
  float eps;
  int experts, hidden, inter, normalize, upTeam, downTeam, routerBlocks;
};


template <int M, int SB, int BITS>
static __device__ __forceinline__ void moe_layer(const MoELayerArgs& a) {
  const int tid = PETAL_TID_X(), warp = tid >> 5, bid = PETAL_BID_X(), nb = PETAL_NCTAID_X();
  const int H = a.hidden, I = a.inter, RB = a.routerBlocks;
  const int routed = MOE_TOPK * I;
  // PETAL_MARK's points (clock builds): 0 start, 1 x copied and normed, 2 x
  // staged, 3 phase 1 done, 4 barrier 1 passed, 5 phase 2 done, 6 barrier 2
  // passed, 7 the activations copied, 8 staged, 9 the end; 10 and 11 the
  // last router block's ticket and its selection done.
  PETAL_MARK(0);
  if (bid < RB) route_prefetch<BITS>(a.rw, a.experts, H, bid);
  qstage_raw<true>(nullptr, H / 64, QNormIn{a.h, a.delta, a.normw, a.eps});
  PETAL_MARK(1);
  const QView q = qstage_layout<M>(H / 64);
  PETAL_MARK(2);

  // phase 1: the router | the shared expert
  if (bid < RB) {
    __shared__ int last;
    route_logits<BITS, 64>(a.rw, a.rs, a.rb, q.raw, a.logits, a.experts, H, bid, RB);
    fence_gpu();
    __syncthreads();
    if (tid == 0) last = ticket_inc(a.ticket, RB - 1) == (u32)(RB - 1);
    __syncthreads();
    if (last) {
      PETAL_MARK(10);
      fence_gpu();
      // ls and ks past the staged x (qstage's bytes)
      float* ls = (float*)((char*)q.raw + QSTAGE_BYTES(M, H / 64));
      route_select(a.logits, ls, (int*)(ls + a.experts), a.ids, a.wts, a.experts, MOE_TOPK, a.normalize);
      PETAL_MARK(11);
    }
  } else {
    moe_gate_up_tasks<M, 1, SB>(a.gw, a.gs, a.gb, a.uw, a.us, a.ub, a.sgw, a.sgs, a.sgb, a.suw, a.sus, a.sub, a.ew, a.es,
                                a.eb, a.ids, q, a.act, a.slogit, I, H, a.upTeam, routed, routed + I + 1,
                                warp * (nb - RB) + bid - RB, (nb - RB) * MOE_UP_WARPS);
  }
  PETAL_MARK(3);
  grid_sync(a.bar, nb);
  PETAL_MARK(4);

  // phase 2: the routed experts' gate/up
  int eid[MOE_TOPK];
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) eid[k] = ld_cg_i(a.ids + k);
  {
    const int r = (warp * nb + bid) * (32 / a.downTeam) + (tid & 31) / a.downTeam;
    if (r < H) moe_down_prefetch(a.dw, a.sdw, eid, r, H, I, a.downTeam);
  }
  if (bid == 0) {
    for (int i = tid; i < H; i += PETAL_NTID_X()) {
      if (a.delta) a.h[i] += a.delta[i];
      a.xout[i] = q.raw[i];
    }
  }
  moe_gate_up_tasks<M, 1, SB>(a.gw, a.gs, a.gb, a.uw, a.us, a.ub, a.sgw, a.sgs, a.sgb, a.suw, a.sus, a.sub, a.ew, a.es,
                              a.eb, a.ids, q, a.act, a.slogit, I, H, a.upTeam, 0, routed, warp * nb + bid,
                              nb * MOE_UP_WARPS);
  PETAL_MARK(5);
  grid_sync(a.bar, nb);
  PETAL_MARK(6);

  // phase 3: the down projections, the routing weights, the residual
  float coef[MOE_TOPK + 1];
#pragma unroll
  for (int k = 0; k < MOE_TOPK; k++) coef[k] = ld_cg_f(a.wts + k);
  coef[MOE_TOPK] = sigmoid(ld_cg_f(a.slogit));
  qstage_raw(a.act, (MOE_TOPK + 1) * (I / 64));
  PETAL_MARK(7);
  const QView hq = qstage_layout<M>((MOE_TOPK + 1) * (I / 64));
  PETAL_MARK(8);
  moe_down_rows<M, SB>(a.dw, a.ds, a.db, a.sdw, a.sds, a.sdb, eid, coef, hq, a.resid, a.out, H, I, a.downTeam,
                       warp * nb + bid, nb * MOE_UP_WARPS);
#ifdef PETAL_CLOCK
  __syncthreads();
  PETAL_MARK(9);
#endif
}

// (Warps take their rows interleaved across the blocks, warp w of block b
// being warp w·blocks + b, so that a phase with fewer rows than warps still
// spreads them over every multiprocessor.)
//
// Entry points moe_layer_<kind>_sb_r8: MOE_UP_WARPS*32 threads, a grid
// of more than routerBlocks blocks that the GPU holds at once, and
// max(QSTAGE_BYTES(kind, hidden/64) + 8·experts, QSTAGE_BYTES(kind,
// (MOE_TOPK+1)·inter/64)) bytes of shared memory.
#define MOE_LAYER(M, BITS, NAME)                                                              \
  extern "C" __global__ void __launch_bounds__(MOE_UP_WARPS * 32, 2) NAME(const MoELayerArgs a) { \
    pdl_wait();                                                                               \
    moe_layer<M, 1, BITS>(a);                                                                 \
  }
// (only the kinds of qmv=exact and qmv=fast with an 8-bit router, the
// family's: each entry point is some 250 KB of PTX for the driver to
// compile at load)
MOE_LAYER(QM_I8X3, 8, moe_layer_i8x3_sb_r8)
MOE_LAYER(QM_I8X2, 8, moe_layer_i8x2_sb_r8)
