// moe_split.cu: the experts of one decoded token's MoE block in one launch
// (moe=split) instead of two (moe_gate_up, moe_down), with no boundary and
// no grid-wide wait between the SwiGLU activations and the down
// projection: the down projection is split over the experts' hidden rows.
// A module of its own, built on moe.cu (MOE_LIBRARY leaves that file's
// entry points out), so that moe.ptx and its machine code stay as they are.
//
// Block t takes slot k = t / (I/MS_ROWS) (the MOE_TOPK routed experts, then
// the shared one) and hidden rows r0 = (t mod I/MS_ROWS)·MS_ROWS .. +MS_ROWS
// of it:
//   - its columns r0 .. r0+MS_ROWS of the slot's down matrix (16 bytes of
//     codes and the group's scale/bias word a row, for all H rows) are
//     copied into shared memory as soon as the router's choice is read;
//   - its MS_ROWS gate and up rows against x, as moe_gate_up computes them
//     (the same staging and arithmetic), give h = silu(gate)·up, written to
//     h as moe_gate_up writes it;
//   - the shared expert's blocks each compute its gate's logit (the 8-bit
//     row; block 0 of them writes it) for the coefficient sigmoid(logit);
//     a routed slot's coefficient is its routing weight;
//   - the down columns against those MS_ROWS activations, times the
//     coefficient, are this block's part of every one of the H outputs,
//     summed across the blocks as splitk.h describes (64-bit fixed point,
//     the same bits whatever order blocks arrive in; the last block writes
//     out = resid + the sums and leaves them zero for the next launch).
#define MOE_LIBRARY
#include "moe.cu"
#include "splitk.h"

#define MS_ROWS SK_COLS  // hidden rows a block: 32 gate and 32 up rows, 32 columns of down
#define MS_WARPS 8
#define MS_R 4  // rows a lane's loads cover at once

// MS_SMEM is the dynamic shared memory of a launch: the staged x (padded to
// 16 bytes, MS_STAGE), then the down columns (SK_SHARED), then the MS_ROWS
// activations and the logit's partial sums.
#define MS_STAGE(M, groups) ((QSTAGE_BYTES(M, groups) + 15) / 16 * 16)
#define MS_SMEM(M, H) (MS_STAGE(M, (H) / 64) + SK_SHARED(H) + 4 * MS_ROWS + 4 * MS_WARPS)

template <int M>
static __device__ __forceinline__ void moe_split(
    const u32* __restrict__ gw, const u16* __restrict__ gsb, const u32* __restrict__ uw, const u16* __restrict__ usb,
    const u32* __restrict__ dw, const u16* __restrict__ dsb, const u32* __restrict__ sgw, const u16* __restrict__ sgsb,
    const u32* __restrict__ suw, const u16* __restrict__ susb, const u32* __restrict__ sdw,
    const u16* __restrict__ sdsb, const u32* __restrict__ ew, const u16* __restrict__ es, const u16* __restrict__ eb,
    const int* __restrict__ ids, const float* __restrict__ wts, const float* __restrict__ x, float* __restrict__ h,
    float* __restrict__ logit, const float* resid, float* out, unsigned long long* acc, u32* ticket, int I, int H,
    int team) {
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int slices = I / MS_ROWS, slot = PETAL_BID_X() / slices;
  const int r0 = (PETAL_BID_X() - slot * slices) * MS_ROWS;
  const int groups = H / 64, gpr = I / 64;
  const long long wpr = H / 8, dwpr = I / 8;
  const bool shared = slot == MOE_TOPK;
  extern __shared__ u32 smem[];
  u32* dcode = smem + MS_STAGE(M, groups) / 4;  // [H][4], 16-byte aligned
  u32* dsbw = dcode + 4 * H;                    // [H][4]
  float* hs = (float*)(dsbw + 4 * H);           // [MS_ROWS]
  float* lpart = hs + MS_ROWS;                      // [MS_WARPS]

  // rows_to_l2 asks L2 for the block's gate and up rows of expert e (the
  // shared expert's where e < 0) and their scale/bias words, 128-byte lines.
  const int lines = (int)(wpr / 32);
  auto rows_to_l2 = [&](int e) __attribute__((always_inline)) {
    const u32* g = e < 0 ? sgw : gw + (long long)e * I * wpr;
    const u32* u = e < 0 ? suw : uw + (long long)e * I * wpr;
    for (int i = tid; i < 2 * MS_ROWS * lines; i += MS_WARPS * 32) {
      const int row = i / lines, line = i - row * lines;
      prefetch_l2((row < MS_ROWS ? g : u) + (long long)(r0 + row % MS_ROWS) * wpr + 32 * line);
    }
    const u32* gs = (const u32*)(e < 0 ? sgsb : gsb) + (e < 0 ? 0 : (long long)e * I * groups);
    const u32* us = (const u32*)(e < 0 ? susb : usb) + (e < 0 ? 0 : (long long)e * I * groups);
    for (int i = tid; i < 2 * MS_ROWS; i += MS_WARPS * 32)
      prefetch_l2((i < MS_ROWS ? gs : us) + (long long)(r0 + i % MS_ROWS) * groups);
  };

  // The shared expert's rows do not depend on the router: its blocks ask
  // L2 for them (gate and up rows, the down columns, the 8-bit gate row)
  // before the wait, while the router selects.
  if (shared) {
    rows_to_l2(-1);
    for (int r = tid; r < H; r += MS_WARPS * 32) prefetch_l2(sdw + (long long)r * dwpr + r0 / 8);
    for (int i = tid; i < H / 32; i += MS_WARPS * 32) prefetch_l2(ew + 32 * i);
  }
  pdl_begin();
  pdl_trigger();  // the next layer's first projections stream their rows in beside this kernel

  // A routed expert's gate and up rows asked of L2 as soon as the choice is
  // read, and its down columns copied, while x is staged: row r of expert e
  // is row e·H + r of the down stack.
  const int e = shared ? 0 : ids[slot];
  if (!shared) rows_to_l2(e);
  const u32* drow = shared ? sdw : dw + (long long)e * H * dwpr;
  const u32* dsbrow = (const u32*)(shared ? sdsb : dsb) + (shared ? 0 : (long long)e * H * gpr);
  sk_copy(dcode, dsbw, drow, dsbrow, dwpr, gpr, r0, H);

  qstage_raw(x, groups);
  const QView q = qstage_layout<M>(groups);

  // The gate and up rows: a team of lanes a row, MS_R rows a lane at once.
  const u32* gbase = shared ? sgw : gw + (long long)e * I * wpr;
  const u32* ubase = shared ? suw : uw + (long long)e * I * wpr;
  const u32* gsbase = (const u32*)(shared ? sgsb : gsb) + (shared ? 0 : (long long)e * I * groups);
  const u32* usbase = (const u32*)(shared ? susb : usb) + (shared ? 0 : (long long)e * I * groups);
  const int sub_ = lane / team, tl = lane % team, perWarp = (32 / team) * MS_R;
  for (int base = warp * perWarp; base < MS_ROWS; base += MS_WARPS * perWarp) {
    float ag[MS_R], au[MS_R];
    int rr[MS_R];
#pragma unroll
    for (int j = 0; j < MS_R; j++) {
      const int r = base + sub_ * MS_R + j;
      rr[j] = r0 + (r < MS_ROWS ? r : MS_ROWS - 1);  // a real row; only the store is skipped
      ag[j] = au[j] = 0.f;
    }
    for (int g = tl; g < groups; g += team) {
      u32x4 g0[MS_R], g1[MS_R], u0[MS_R], u1[MS_R];
      float sg[MS_R], bg[MS_R], su[MS_R], bu[MS_R];
#pragma unroll
      for (int j = 0; j < MS_R; j++) {
        const u32* pg = gbase + (long long)rr[j] * wpr + g * 8;
        const u32* pu = ubase + (long long)rr[j] * wpr + g * 8;
        g0[j] = ld_stream_16(pg), g1[j] = ld_stream_16(pg + 4);
        u0[j] = ld_stream_16(pu), u1[j] = ld_stream_16(pu + 4);
        load_sb<1>((const u16*)gsbase, nullptr, (long long)rr[j] * groups + g, sg[j], bg[j]);
        load_sb<1>((const u16*)usbase, nullptr, (long long)rr[j] * groups + g, su[j], bu[j]);
      }
      const float cs = q.gsum[g];
#pragma unroll
      for (int j = 0; j < MS_R; j++) {
        ag[j] += sg[j] * qdot<M>(g0[j], g1[j], q.xs, groups, g, q.gd) + bg[j] * cs;
        au[j] += su[j] * qdot<M>(u0[j], u1[j], q.xs, groups, g, q.gd) + bu[j] * cs;
      }
    }
#pragma unroll
    for (int j = 0; j < MS_R; j++) {
      for (int off = team >> 1; off > 0; off >>= 1) {
        ag[j] += __shfl_xor_sync(0xffffffffu, ag[j], off);
        au[j] += __shfl_xor_sync(0xffffffffu, au[j], off);
      }
      const int r = base + sub_ * MS_R + j;
      if (tl == 0 && r < MS_ROWS) {
        const float v = silu(ag[j]) * au[j];
        hs[r] = v;
        h[slot * I + r0 + r] = v;
      }
    }
  }

  // The coefficient: the routing weight, or for the shared expert the
  // sigmoid of its gate's logit (w = s·q + b in float32, an 8-bit row of
  // H/4 words), which each of its blocks computes, a group a lane.
  float coef;
  if (shared) {
    float a = 0.f;
    for (int g = tid; g < groups; g += MS_WARPS * 32) {
      const u32* p = ew + g * 16;
      const u32x4 w[4] = {ld_stream_16(p), ld_stream_16(p + 4), ld_stream_16(p + 8), ld_stream_16(p + 12)};
      const float s = bf16_to_f32(es[g]), b = bf16_to_f32(eb[g]);
      const float* xr = q.raw + 64 * g;
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const u32 ws[4] = {w[i].x, w[i].y, w[i].z, w[i].w};
#pragma unroll
        for (int k = 0; k < 16; k++) a += (s * (float)((ws[k >> 2] >> (8 * (k & 3))) & 0xFFu) + b) * xr[16 * i + k];
      }
    }
    a = warp_sum(a);
    if (lane == 0) lpart[warp] = a;
    __syncthreads();
    float lg = 0.f;
#pragma unroll
    for (int w = 0; w < MS_WARPS; w++) lg += lpart[w];
    if (r0 == 0 && tid == 0) logit[0] = lg;
    coef = sigmoid(lg);
  } else {
    coef = wts[slot];
  }
  __syncthreads();  // hs

  constexpr int P = QStage<M>::parts;
  __shared__ SkQuant<P> hq;
  if (warp == 0) sk_quantise<P>(hs[lane], &hq);
  cp_wait<0>();
  __syncthreads();  // hq, and every thread's copies of the down columns
  sk_rows<P>(dcode, dsbw, gpr, r0, &hq, coef, acc, H);
  sk_finish(acc, ticket, resid, out, H);
}

// Entry points moe_split_<kind>_sb: MS_WARPS*32 threads, (MOE_TOPK+1)·I/MS_ROWS
// blocks, MS_SMEM(kind, H) bytes of dynamic shared memory; interleaved scales
// and biases (the shared expert gate's 8-bit row: separate); I a multiple of
// MS_ROWS, H of 64; x 16-byte aligned; acc H zeros and ticket a zero u32
// when allocated, left so by every launch.
#define MOE_SPLIT(M, NAME)                                                                                     \
  extern "C" __global__ void __launch_bounds__(MS_WARPS * 32, 2)                                               \
      NAME(const u32* gw, const u16* gsb, const u32* uw, const u16* usb, const u32* dw, const u16* dsb,        \
           const u32* sgw, const u16* sgsb, const u32* suw, const u16* susb, const u32* sdw, const u16* sdsb, \
           const u32* ew, const u16* es, const u16* eb, const int* ids, const float* wts, const float* x,     \
           float* h, float* logit, const float* resid, float* out, unsigned long long* acc, u32* ticket,       \
           int I, int H, int team) {                                                                           \
    moe_split<M>(gw, gsb, uw, usb, dw, dsb, sgw, sgsb, suw, susb, sdw, sdsb, ew, es, eb, ids, wts, x, h, logit, \
                 resid, out, acc, ticket, I, H, team);                                                         \
  }
MOE_SPLIT(QM_I8X3, moe_split_i8x3_sb)
MOE_SPLIT(QM_I8X2, moe_split_i8x2_sb)
