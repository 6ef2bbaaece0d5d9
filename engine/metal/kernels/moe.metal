// moe.metal: the MoE block of one decoded token (spec 2.8) in two
// dispatches, the router's choice read on the device (ids and weights of the
// top MOE_TOPK experts, from route.metal): the sibling of
// engine/cuda/kernels/moe.cu in its exact float32 kind.
//
//   moe_gate_up: h[slot][r] = silu(gate_e[r]·x) * (up_e[r]·x) for the routed
//     slots (e = ids[slot]) and, as slot MOE_TOPK, the shared expert; and
//     logit = shared_expert_gate·x (an 8-bit row, float32).
//   moe_down: out[r] = resid[r] + sum over slots of w_slot * (down_e[r]·h[slot]),
//     w the routing weights and, for the shared expert, sigmoid(logit).
//
// Weights are MLX affine 4-bit in groups of 64 (qgroup.h), an expert stack
// one matrix of experts·rows rows. out may be resid (the residual add in
// place). A team of p.team lanes shares a task (a row pair, or a row).
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"

#define MOE_TOPK 8
#define MOE_UP_SIMDGROUPS 8
#define MOE_DOWN_SIMDGROUPS 4

static inline float msilu(float x) { return x / (1.f + exp(-x)); }
static inline float msigmoid(float x) { return 1.f / (1.f + exp(-x)); }

template <int SB>
static inline void moe_gate_up(device const uint* gw, device const ushort* gs, device const ushort* gb,
                               device const uint* uw, device const ushort* us, device const ushort* ub,
                               device const uint* sgw, device const ushort* sgs, device const ushort* sgb,
                               device const uint* suw, device const ushort* sus, device const ushort* sub,
                               device const uint* ew, device const ushort* es, device const ushort* eb,
                               device const int* ids, device const float* x, device float* h, device float* logit,
                               constant MoeUpParams& p, uint tid, uint bid, uint nbid) {
  const int groups = p.H / 64;
  const int lane = tid & 31, warp = tid >> 5;
  const int team = p.team, sub_ = lane / team, tl = lane % team;
  const int perWarp = 32 / team;
  // Tasks: a (gate, up) row pair for each of the (MOE_TOPK+1)*I outputs,
  // then the shared expert's gate row as the last task.
  const int rowTasks = (MOE_TOPK + 1) * p.I, tasks = rowTasks + 1;
  const ulong wpr = ulong(p.H / 8);
  const int nwarps = int(nbid) * MOE_UP_SIMDGROUPS;
  for (int base = (int(bid) * MOE_UP_SIMDGROUPS + warp) * perWarp; base < tasks; base += nwarps * perWarp) {
    int t = base + sub_;
    t = t < tasks ? t : tasks - 1;
    const int slot = t / p.I;
    int r = t - slot * p.I;
    const bool gate8 = t == rowTasks;
    device const uint* pg;
    device const uint* pu;
    device const ushort* psg;
    device const ushort* pbg;
    device const ushort* psu;
    device const ushort* pbu;
    ulong srow;  // row index into the scale arrays
    if (slot < MOE_TOPK) {
      const ulong row = ulong(ids[slot]) * ulong(p.I) + ulong(r);
      pg = gw + row * wpr, pu = uw + row * wpr;
      psg = gs, pbg = gb, psu = us, pbu = ub;
      srow = row * ulong(groups);
    } else {
      r = gate8 ? 0 : r;
      pg = sgw + ulong(r) * wpr, pu = suw + ulong(r) * wpr;
      psg = sgs, pbg = sgb, psu = sus, pbu = sub;
      srow = ulong(r) * ulong(groups);
    }
    float ag = 0.f, au = 0.f;
    for (int g = tl; g < groups; g += team) {
      device const float* xg = x + 64 * g;
      if (gate8) {
        // The shared expert's gate: an 8-bit row, 4 codes a word (byte k
        // of word i is element 4i+k), w = s*q + b in float32.
        device const uint* pe = ew + g * 16;
        const float s = bf16_to_f32(es[g]), b = bf16_to_f32(eb[g]);
        float a = 0.f;
        for (int k = 0; k < 64; k++) a += (s * float((pe[k >> 2] >> (8 * (k & 3))) & 0xFFu) + b) * xg[k];
        ag += a;
        continue;
      }
      float s1, b1, s2, b2;
      load_sb<SB>(psg, pbg, srow + ulong(g), s1, b1);
      load_sb<SB>(psu, pbu, srow + ulong(g), s2, b2);
      const float cs = group_sum(xg);
      ag += s1 * qdot_f32(pg + g * 8, xg) + b1 * cs;
      au += s2 * qdot_f32(pu + g * 8, xg) + b2 * cs;
    }
    for (int off = team >> 1; off > 0; off >>= 1) {
      ag += simd_shuffle_xor(ag, ushort(off));
      au += simd_shuffle_xor(au, ushort(off));
    }
    const int tt = base + sub_;
    if (tl == 0 && tt < rowTasks) h[tt] = msilu(ag) * au;
    if (tl == 0 && tt == rowTasks) logit[0] = ag;
  }
}

template <int SB>
static inline void moe_down(device const uint* dw, device const ushort* ds, device const ushort* db,
                            device const uint* sdw, device const ushort* sds, device const ushort* sdb,
                            device const int* ids, device const float* wts, device const float* logit,
                            device const float* h, device const float* resid, device float* out,
                            constant MoeDownParams& p, uint tid, uint bid, uint nbid) {
  const int gpr = p.I / 64;
  int eid[MOE_TOPK];
  float coef[MOE_TOPK + 1];
  for (int k = 0; k < MOE_TOPK; k++) eid[k] = ids[k], coef[k] = wts[k];
  coef[MOE_TOPK] = msigmoid(logit[0]);

  const int lane = tid & 31, warp = tid >> 5;
  const int team = p.team, sub_ = lane / team, tl = lane % team;
  const int perWarp = 32 / team;
  const ulong wpr = ulong(p.I / 8);
  const int nwarps = int(nbid) * MOE_DOWN_SIMDGROUPS;
  for (int base = (int(bid) * MOE_DOWN_SIMDGROUPS + warp) * perWarp; base < p.H; base += nwarps * perWarp) {
    int r = base + sub_;
    r = r < p.H ? r : p.H - 1;
    float acc = 0.f;
    for (int g = tl; g < gpr; g += team) {
      for (int k = 0; k <= MOE_TOPK; k++) {
        const ulong row = k < MOE_TOPK ? ulong(eid[k]) * ulong(p.H) + ulong(r) : ulong(r);
        device const uint* pw = (k < MOE_TOPK ? dw : sdw) + row * wpr + ulong(g * 8);
        float s, b;
        load_sb<SB>(k < MOE_TOPK ? ds : sds, k < MOE_TOPK ? db : sdb, row * ulong(gpr) + ulong(g), s, b);
        device const float* hg = h + 64 * (k * gpr + g);
        acc += coef[k] * (s * qdot_f32(pw, hg) + b * group_sum(hg));
      }
    }
    for (int off = team >> 1; off > 0; off >>= 1) acc += simd_shuffle_xor(acc, ushort(off));
    if (tl == 0 && base + sub_ < p.H) out[r] = resid[r] + acc;
  }
}

// Entry points moe_gate_up_f32[_sb] (MOE_UP_SIMDGROUPS*32 threads) and
// moe_down_f32[_sb] (MOE_DOWN_SIMDGROUPS*32 threads), buffers in moe.cu's
// order.
kernel void moe_gate_up_f32(device const uint* gw [[buffer(0)]], device const ushort* gs [[buffer(1)]],
    device const ushort* gb [[buffer(2)]], device const uint* uw [[buffer(3)]], device const ushort* us [[buffer(4)]],
    device const ushort* ub [[buffer(5)]], device const uint* sgw [[buffer(6)]], device const ushort* sgs [[buffer(7)]],
    device const ushort* sgb [[buffer(8)]], device const uint* suw [[buffer(9)]], device const ushort* sus [[buffer(10)]],
    device const ushort* sub [[buffer(11)]], device const uint* ew [[buffer(12)]], device const ushort* es [[buffer(13)]],
    device const ushort* eb [[buffer(14)]], device const int* ids [[buffer(15)]], device const float* x [[buffer(16)]],
    device float* h [[buffer(17)]], device float* logit [[buffer(18)]], constant MoeUpParams& p [[buffer(19)]],
    uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
    uint nbid [[threadgroups_per_grid]]) {
  moe_gate_up<0>(gw, gs, gb, uw, us, ub, sgw, sgs, sgb, suw, sus, sub, ew, es, eb, ids, x, h, logit, p, tid, bid, nbid);
}
kernel void moe_gate_up_f32_sb(device const uint* gw [[buffer(0)]], device const ushort* gs [[buffer(1)]],
    device const ushort* gb [[buffer(2)]], device const uint* uw [[buffer(3)]], device const ushort* us [[buffer(4)]],
    device const ushort* ub [[buffer(5)]], device const uint* sgw [[buffer(6)]], device const ushort* sgs [[buffer(7)]],
    device const ushort* sgb [[buffer(8)]], device const uint* suw [[buffer(9)]], device const ushort* sus [[buffer(10)]],
    device const ushort* sub [[buffer(11)]], device const uint* ew [[buffer(12)]], device const ushort* es [[buffer(13)]],
    device const ushort* eb [[buffer(14)]], device const int* ids [[buffer(15)]], device const float* x [[buffer(16)]],
    device float* h [[buffer(17)]], device float* logit [[buffer(18)]], constant MoeUpParams& p [[buffer(19)]],
    uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
    uint nbid [[threadgroups_per_grid]]) {
  moe_gate_up<1>(gw, gs, gb, uw, us, ub, sgw, sgs, sgb, suw, sus, sub, ew, es, eb, ids, x, h, logit, p, tid, bid, nbid);
}
kernel void moe_down_f32(device const uint* dw [[buffer(0)]], device const ushort* ds [[buffer(1)]],
    device const ushort* db [[buffer(2)]], device const uint* sdw [[buffer(3)]], device const ushort* sds [[buffer(4)]],
    device const ushort* sdb [[buffer(5)]], device const int* ids [[buffer(6)]], device const float* wts [[buffer(7)]],
    device const float* logit [[buffer(8)]], device const float* h [[buffer(9)]], device const float* resid [[buffer(10)]],
    device float* out [[buffer(11)]], constant MoeDownParams& p [[buffer(12)]],
    uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
    uint nbid [[threadgroups_per_grid]]) {
  moe_down<0>(dw, ds, db, sdw, sds, sdb, ids, wts, logit, h, resid, out, p, tid, bid, nbid);
}
kernel void moe_down_f32_sb(device const uint* dw [[buffer(0)]], device const ushort* ds [[buffer(1)]],
    device const ushort* db [[buffer(2)]], device const uint* sdw [[buffer(3)]], device const ushort* sds [[buffer(4)]],
    device const ushort* sdb [[buffer(5)]], device const int* ids [[buffer(6)]], device const float* wts [[buffer(7)]],
    device const float* logit [[buffer(8)]], device const float* h [[buffer(9)]], device const float* resid [[buffer(10)]],
    device float* out [[buffer(11)]], constant MoeDownParams& p [[buffer(12)]],
    uint tid [[thread_position_in_threadgroup]], uint bid [[threadgroup_position_in_grid]],
    uint nbid [[threadgroups_per_grid]]) {
  moe_down<1>(dw, ds, db, sdw, sds, sdb, ids, wts, logit, h, resid, out, p, tid, bid, nbid);
}
