// gdn_layer.cu: the start of a Gated DeltaNet layer for one decoded token
// in one launch (gdnlayer=cluster): the input add-and-norm, the four input
// projections (qkv, z, b, a) and the step after them (gdn.cu's: conv and
// SiLU, q/k norms, gates, the delta rule, the gated norm), where today two
// kernels do it (qmv_group_norm, then gdn_step). A module of its own, built
// on gdn.cu (GDN_CL_MODULE leaves that file's entry points out), so that
// gdn.ptx, gdn_cl.ptx, qmv.ptx and their machine code stay as they are.
// Measured slower than the two kernels (docs/bench/cuda/2026-12-07-gl1):
// the GPU holds 15 of its 16 clusters at once.
//
// One thread-block cluster of GL_BLOCKS blocks a key head. Everything the
// step of a key head needs comes from its own projection rows: q and k of
// the key head, and v, z, b and a of its value heads (2·128 + 4·128 + 4
// rows at two value heads a key head). The cluster computes the q, k, v and
// z rows, each block a share (three steps of two rows a warp at the 35B
// shape), into its own shared memory; after the cluster barrier every block
// reads what its part of the step needs from the others' shared memory
// (distributed shared memory): no grid-wide wait stands between the
// projections and the step, and the step's inputs never go through device
// memory. The b and a rows of a block's value head (which would have taken
// a fourth step) are computed by two of its own warps after the barrier,
// while the others run the conv.
//
// Block rank r of the cluster then owns 128/(GL_BLOCKS/ratio) rows of the
// state of value head r / (GL_BLOCKS/ratio) of its key head, as
// gdn_step_s4_cl's block does, and every block recomputes the key head's q
// and k (conv, SiLU, L2 norm). The arithmetic is that of qmv_group_norm
// and gdn_step_s4_cl, step by step and in the same order, so the outputs
// are theirs bit for bit.
//
// Before the wait for the kernel before (the last layer's moe_down): the
// block's projection rows asked of L2, and its state rows, its conv
// state and conv weights copied into shared memory (cp.async through L2:
// the state and conv state were written by this layer's launch for the
// token before, which completed before the kernel before this one began).
// The norm's sum h + delta is written back, with the normed row, by the
// block that takes the last ticket once every block has read h, as
// qmv_group_norm does.
//
// The out forms (gdnlayer=out, gdn_layer_out_*) go on to the layer's
// output projection (outproj.h): a cluster's gated outputs (its key head's
// two value heads, 256 of out_proj's 4096 columns) never leave it, its
// blocks computing their partial products for an eighth of the rows each,
// the last cluster to finish an eighth summing it: one launch fewer a
// layer, the output's sums in another order than the mat-vec's (not its
// bits: float32's rounding).
#define GDN_CL_MODULE
#include "gdn.cu"
#include "outproj.h"

#define GL_BLOCKS 8  // a cluster: one key head
#define GL_WARPS 16  // 512 threads: every block's share of the rows in about three steps
#define GL_R 2       // projection rows a lane at once (qmv_group_norm's R)

// GDNLayerArgs are the layer's operands, passed by value (read from the
// kernel's parameters): the four projections (4-bit, interleaved
// scale/bias words) and their outputs; the input norm (h += delta, the
// normed row to xout, a ticket counter that wraps by itself); the step's
// weights, conv state and state (gdn.cu's), and its output.
struct GDNLayerArgs {
  const u32* w[4];  // qkv, z, b, a
  const u32* sb[4];
  float* y[4];
  float* h;
  const float* delta;
  const float* normw;
  float* xout;
  u32* counter;
  const float* convW;
  float* convState;
  const float* aLog;
  const float* dtBias;
  const float* gnormW;
  float* state;
  float* out;
  OutProj o;   // the out forms' output projection, the partials [hk][rows]
  float eps;   // the input norm's
  float geps;  // the gated norm's
  int hk, hv, cols, team;
};

// gl_rows is the projection rows a cluster computes together at ratio
// value heads a key head: q and k of the key head, then v and z of its
// value heads.
static __device__ __forceinline__ int gl_rows(int ratio) { return 2 * GDN_D + 2 * ratio * GDN_D; }

// gl_row is the matrix (0 qkv, 1 z) and row of the cluster's projection row
// li for key head kh.
static __device__ __forceinline__ void gl_row(int li, int kh, int Hk, int ratio, int& m, long long& r) {
  constexpr int D = GDN_D;
  const int v0 = 2 * D, z0 = v0 + ratio * D;
  if (li < z0) {
    m = 0;
    r = li < D ? kh * D + li : li < v0 ? (Hk + kh) * D + li - D : 2 * Hk * D + kh * ratio * D + li - v0;
  } else {
    m = 1, r = kh * ratio * D + li - z0;
  }
}

// gl_owner is the block of a cluster of NB blocks whose warps compute
// projection row li, at rpw rows a warp and step (gl_project's order: a
// step's rows warp by warp, the cluster's warps rank by rank).
template <int NB>
static __device__ __forceinline__ u32 gl_owner(int li, int rpw) {
  return (u32)((li % (NB * GL_WARPS * rpw)) / rpw / GL_WARPS);
}

// GLRows is where one warp's share of a cluster's projection rows lies:
// the key head, the rows and their width, the warp's place in the cluster
// (wc) and in the steps (rpw rows a warp, stride a step), its team.
struct GLRows {
  int kh, hk, rows, ng, wc, rpw, stride, team, sub, tl;
  long long wpr;
};

// gl_prefetch asks L2 for the warp's projection rows (codes and scale/bias
// words), before the launch's wait.
template <int RATIO>
static __device__ __forceinline__ void gl_prefetch(const GDNLayerArgs& a, const GLRows& p) {
  for (int base = p.wc * p.rpw; base < p.rows; base += p.stride) {
#pragma unroll
    for (int jj = 0; jj < GL_R; jj++) {
      const int li0 = base + p.sub * GL_R + jj, li = li0 < p.rows ? li0 : p.rows - 1;
      int m;
      long long r;
      gl_row(li, p.kh, p.hk, RATIO, m, r);
      const u32* w = m == 0 ? a.w[0] : a.w[1];
      const u32* sb = m == 0 ? a.sb[0] : a.sb[1];
      for (int g = p.tl; g < p.ng; g += p.team) prefetch_l2(w + r * p.wpr + g * 8);
      if (p.tl == 0) prefetch_l2(sb + r * p.ng);
    }
  }
}

// gl_project computes the warp's projection rows against the staged x
// into yl (shared memory, at their index) and y: qmv's arithmetic and
// order a row, so the sums are qmv_group_norm's bit for bit.
template <int M, int RATIO>
static __device__ __forceinline__ void gl_project(const GDNLayerArgs& a, const GLRows& p, const QView& q, float* yl) {
  for (int base = p.wc * p.rpw; base < p.rows; base += p.stride) {
    const u32* rw[GL_R];
    const u32* rsb[GL_R];
    float* ry[GL_R];
#pragma unroll
    for (int jj = 0; jj < GL_R; jj++) {
      const int li0 = base + p.sub * GL_R + jj, li = li0 < p.rows ? li0 : p.rows - 1;  // a real row; only the store is skipped
      int m;
      long long r;
      gl_row(li, p.kh, p.hk, RATIO, m, r);
      rw[jj] = (m == 0 ? a.w[0] : a.w[1]) + r * p.wpr;
      rsb[jj] = (m == 0 ? a.sb[0] : a.sb[1]) + r * p.ng;
      ry[jj] = (m == 0 ? a.y[0] : a.y[1]) + r;
    }
    float acc[GL_R];
#pragma unroll
    for (int jj = 0; jj < GL_R; jj++) acc[jj] = 0.f;
    for (int g = p.tl; g < p.ng; g += p.team) {
      u32x4 w0[GL_R], w1[GL_R];
      float s[GL_R], b[GL_R];
#pragma unroll
      for (int jj = 0; jj < GL_R; jj++) {
        w0[jj] = ld_stream_16(rw[jj] + g * 8);
        w1[jj] = ld_stream_16(rw[jj] + g * 8 + 4);
        load_sb<1>((const u16*)rsb[jj], nullptr, g, s[jj], b[jj]);
      }
      const float gs = q.gsum[g];
#pragma unroll
      for (int jj = 0; jj < GL_R; jj++) acc[jj] += s[jj] * qdot<M>(w0[jj], w1[jj], q.xs, p.ng, g, q.gd) + b[jj] * gs;
    }
#pragma unroll
    for (int jj = 0; jj < GL_R; jj++) {
      for (int off = p.team >> 1; off > 0; off >>= 1) acc[jj] += __shfl_xor_sync(0xffffffffu, acc[jj], off);
      const int li = base + p.sub * GL_R + jj;
      if (p.tl == 0 && li < p.rows) yl[li] = acc[jj], *ry[jj] = acc[jj];
    }
  }
}

// gl_gate_row is b's (isA: a's) projection row of value head j, the
// warp's whole (qmv's arithmetic); gl_gate_prefetch asks L2 for it.
template <int M>
static __device__ __forceinline__ float gl_gate_row(const GDNLayerArgs& a, const GLRows& p, const QView& q, int j, bool isA) {
  const u32* rw = (isA ? a.w[3] : a.w[2]) + j * p.wpr;
  const u32* rsb = (isA ? a.sb[3] : a.sb[2]) + j * p.ng;
  float acc = 0.f;
  for (int g = p.tl; g < p.ng; g += p.team) {
    const u32x4 w0 = ld_stream_16(rw + g * 8), w1 = ld_stream_16(rw + g * 8 + 4);
    float s, b;
    load_sb<1>((const u16*)rsb, nullptr, g, s, b);
    const float gs = q.gsum[g];
    acc += s * qdot<M>(w0, w1, q.xs, p.ng, g, q.gd) + b * gs;
  }
  for (int off = p.team >> 1; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  return acc;
}
static __device__ __forceinline__ void gl_gate_prefetch(const GDNLayerArgs& a, const GLRows& p, int j, bool isA) {
  for (int g = p.tl; g < p.ng; g += p.team) prefetch_l2((isA ? a.w[3] : a.w[2]) + j * p.wpr + g * 8);
  if (p.tl == 0) prefetch_l2((isA ? a.sb[3] : a.sb[2]) + j * p.ng);
}

// gdn_layer: the grid hk clusters of GL_BLOCKS blocks of GL_WARPS*32
// threads; RPW = value heads a key head = state rows a warp (R = 16·RPW
// rows a block: 128/R blocks a value head); gdnLayerShared (gdn_layer.go)
// bytes of dynamic shared memory.
template <int M, int RPW, bool OUT>
static __device__ __forceinline__ void gdn_layer(const GDNLayerArgs& a) {
  extern __shared__ u32 smem[];
  constexpr int D = GDN_D, R = GL_WARPS * RPW, PER_HEAD = D / R, CH = 2 * D + R;
  static_assert(PER_HEAD * R == D && GL_BLOCKS == PER_HEAD * RPW, "a cluster is one key head's value heads");
  __shared__ __attribute__((aligned(16))) float qk[2 * D];
  __shared__ float vs[R], os[R], gout[OUT ? R : 1];
  __shared__ float red[GL_WARPS];
  __shared__ float gates[2], gba[2];
  __shared__ float part;
  __shared__ int last;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int ng = a.cols / 64, Hk = a.hk, C = (2 * Hk + a.hv) * D;
  const u32 rank = cluster_rank();
  const int kh = PETAL_BID_X() / GL_BLOCKS, hl = rank / PER_HEAD, slice = rank % PER_HEAD;
  const int j = kh * RPW + hl;  // the value head of this block's state rows
  const int Rc = gl_rows(RPW);
  const int team = a.team, sub = lane / team, tl = lane % team, rpw = (32 / team) * GL_R;
  const int wc = rank * GL_WARPS + warp, stride = GL_BLOCKS * GL_WARPS * rpw;
  const long long wpr = a.cols / 8;
  const GLRows rows{kh, Hk, Rc, ng, wc, rpw, stride, team, sub, tl, wpr};

  // Dynamic shared memory: the staging (qstage's), h + delta (keep), the
  // cluster's projection rows this block computes (yl, at their index),
  // the state rows, conv weights and conv state of this block's channels
  // (q and k of the key head, then the block's v), each from a 16-byte
  // boundary.
  char* dyn = (char*)smem;
  // (the staging's room: x's groups, or the out forms' ngo if more)
  int at = (QSTAGE_BYTES(M, ng > RPW * D / 64 ? ng : RPW * D / 64) + 15) & ~15;
  float* keep = (float*)(dyn + at);
  at += (4 * a.cols + 15) & ~15;
  float* yl = (float*)(dyn + at);
  at += (4 * Rc + 15) & ~15;
  float* Ss = (float*)(dyn + at);
  at += 4 * R * D;
  float* cw = (float*)(dyn + at);
  at += 16 * CH;
  float* cs = (float*)(dyn + at);  // [3][CH]

  // chan is this block's conv channel c (c < CH) in the layer's channels.
  auto chan = [&](int c) { return c < D ? kh * D + c : c < 2 * D ? (Hk + kh) * D + c - D : (2 * Hk + j) * D + slice * R + c - 2 * D; };

  // PETAL_MARK's points (clock builds): 0 start, 1 waited, 2 x staged, 3
  // the rows done, 4 the cluster met, 5 the delta rule done, 6 the end.
  PETAL_MARK(0);
  gl_prefetch<RPW>(a, rows);
  if (OUT) out_proj_prefetch<RPW * D>(a.o, kh, rank * (a.o.rows / OP_BLOCKS), (rank + 1) * (a.o.rows / OP_BLOCKS));
  if (warp >= GL_WARPS - 2) gl_gate_prefetch(a, rows, j, warp == GL_WARPS - 1);  // this block's b and a rows (below)
  {
    const float* S0 = a.state + ((long long)j * D + slice * R) * D;
    for (int i = tid; i < R * D / 4; i += PETAL_NTID_X()) cp_async16(smem_u32(Ss + 4 * i), S0 + 4 * i, true);
    for (int c = tid; c < CH; c += PETAL_NTID_X()) cp_async16(smem_u32(cw + 4 * c), a.convW + 4 * (long long)chan(c), true);
    // the conv state in runs of four channels (q, k and the block's v are
    // runs of 128, 128 and R)
    for (int i = tid; i < 3 * CH / 4; i += PETAL_NTID_X()) {
      const int row = i / (CH / 4), c = 4 * (i % (CH / 4));
      cp_async16(smem_u32(cs + row * CH + c), a.convState + (long long)row * C + chan(c), true);
    }
    cp_commit();
  }
  pdl_begin();
  PETAL_MARK(1);
  // The gates' constants and the gated norm's weight, with the norm's
  // first loads.
  const float gl = a.aLog[j], gd = a.dtBias[j];
  const float nw = tid < R ? a.gnormW[slice * R + tid] : 0.f;

  qstage_raw<true>(nullptr, ng, QNormIn{a.h, a.delta, a.normw, a.eps, keep});
  const QView q = qstage_layout<M>(ng);
  PETAL_MARK(2);
  // The norm's ticket, once this block has read h (as qmv_group_norm).
  u32 ticket = 0;
  if (tid == 0) {
    fence_gpu();
    ticket = ticket_inc(a.counter, PETAL_NCTAID_X() - 1);
  }

  // The projections: the rows this block's warps own into yl and y.
  gl_project<M, RPW>(a, rows, q, yl);
  PETAL_MARK(3);
  cp_wait<0>();
  cluster_sync();  // every block's rows in its shared memory, seen by the cluster; the copies landed
  PETAL_MARK(4);

  // The step's inputs from the cluster: q and k's projections (threads
  // 0-255, one channel each), this block's v (the next R threads) and z.
  auto proj = [&](int li) { return ld_cluster_f32(cluster_addr(yl + li, gl_owner<GL_BLOCKS>(li, rpw))); };
  const int v0 = 2 * D, z0 = v0 + RPW * D;
  float xt = 0.f, zv = 0.f;
  if (tid < 2 * D) xt = proj(tid);
  else if (tid < CH) xt = proj(v0 + hl * D + slice * R + tid - 2 * D);
  if (tid < R) zv = proj(z0 + hl * D + slice * R + tid);
  // The value head's b and a rows, by the last two warps (no conv work),
  // qmv's arithmetic; the first block of the head writes them out.
  if (warp >= GL_WARPS - 2) {
    const bool isA = warp == GL_WARPS - 1;
    const float acc = gl_gate_row<M>(a, rows, q, j, isA);
    if (lane == 0) {
      gba[isA] = acc;
      if (slice == 0) (isA ? a.y[3] : a.y[2])[j] = acc;
    }
  }
  // The conv and SiLU of the channel (gdn_step's arithmetic).
  float c = 0.f;
  if (tid < CH) {
    const f32x4 w = *(const f32x4*)(cw + 4 * tid);
    const float s0 = cs[tid], s1 = cs[CH + tid], s2 = cs[2 * CH + tid];
    c = gsilu(w.x * s0 + w.y * s1 + w.z * s2 + w.w * xt);
    // Shift the conv state: the block's own v channels, and an eighth of
    // the key head's q and k channels a block (every block's copy of the
    // old state landed before the cluster barrier above).
    if (tid >= 2 * D || tid / (2 * D / GL_BLOCKS) == (int)rank) {
      const long long ch = chan(tid);
      a.convState[ch] = s1, a.convState[C + ch] = s2, a.convState[2 * C + ch] = xt;
    }
  }
  if (tid >= 2 * D && tid < CH) vs[tid - 2 * D] = c;
  const float ss = warp_sum(c * c);
  if (lane == 0 && warp < 8) red[warp] = ss;
  __syncthreads();
  if (tid == 0) {
    gates[0] = gsigmoid(gba[0]);
    gates[1] = gexp(-gexp(gl) * gsoftplus(gba[1] + gd));
  }
  if (tid < 2 * D) {
    const float sq = red[0] + red[1] + red[2] + red[3], sk = red[4] + red[5] + red[6] + red[7];
    const float scale = tid < D ? 1.f / (__builtin_sqrtf(sq + 1e-6f) * __builtin_sqrtf((float)D))
                                : 1.f / __builtin_sqrtf(sk + 1e-6f);
    qk[tid] = c * scale;
  }
  __syncthreads();

  // The delta rule on this warp's RPW rows (gdn_step's): S = g*S;
  // m = S·k; d = beta*(v - m); S += d⊗k; o = S·q.
  const float beta = gates[0], g = gates[1];
  const f32x4 k4 = *(const f32x4*)(qk + D + 4 * lane);
  const f32x4 q4 = *(const f32x4*)(qk + 4 * lane);
  float* S0 = a.state + ((long long)j * D + slice * R + warp * RPW) * D + 4 * lane;
  f32x4 S[RPW];
  float m[RPW];
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    S[i] = *(const f32x4*)(Ss + (warp * RPW + i) * D + 4 * lane);
    S[i].x *= g, S[i].y *= g, S[i].z *= g, S[i].w *= g;
    m[i] = dot4(S[i], k4);
  }
  warp_sums<RPW>(m);
  float o[RPW];
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const float d = beta * (vs[warp * RPW + i] - m[i]);
    S[i].x += d * k4.x, S[i].y += d * k4.y, S[i].z += d * k4.z, S[i].w += d * k4.w;
    st4(S0 + i * D, S[i]);
    o[i] = dot4(S[i], q4);
  }
  warp_sums<RPW>(o);
#pragma unroll
  for (int i = 0; i < RPW; i++)
    if (lane == i) os[warp * RPW + i] = o[i];
  PETAL_MARK(5);
  pdl_trigger();  // the state is written; the gated norm and the norm's write-back are left

  // The gated norm of the value head over its PER_HEAD blocks: this
  // block's sum of squares in gdn_step_s4_cl's order (eight warps of R/8
  // rows, then a tree of the eight), the blocks' sums in rank order.
  __syncthreads();
  if (tid < 8) {
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < R / 8; i++) sq += os[tid * (R / 8) + i] * os[tid * (R / 8) + i];
    red[tid] = sq;
  }
  __syncthreads();
  if (tid == 0) {
    part = ((red[0] + red[1]) + (red[2] + red[3])) + ((red[4] + red[5]) + (red[6] + red[7]));
    last = ticket == PETAL_NCTAID_X() - 1;
  }
  cluster_sync();
  if (tid < R) {
    float tot = 0.f;
    for (int r = 0; r < PER_HEAD; r++) tot += ld_cluster_f32(cluster_addr(&part, hl * PER_HEAD + r));
    const float inv = 1.f / __builtin_sqrtf(tot / D + a.geps);
    const float gv = os[tid] * inv * nw * gsilu(zv);
    a.out[(long long)j * D + slice * R + tid] = gv;
    if (OUT) gout[tid] = gv;
  }
  if (!OUT) cluster_arrive();  // done with the others' shared memory
  // The norm's sum and normed row, by the block with the last ticket.
  if (last) {
    fence_gpu();
    for (int i = tid; i < a.cols; i += PETAL_NTID_X()) {
      if (a.delta) a.h[i] = keep[i];
      a.xout[i] = q.raw[i];
    }
  }
  PETAL_MARK(6);
  if (OUT) out_proj_partial<M, RPW * D, GL_WARPS>(a.o, gout, kh, a.hk, rank);
  cluster_wait();
}

// Entry points gdn_layer_<kind>_v<ratio>: the kinds of qmv=exact and
// qmv=fast, two value heads a key head (every model of the family).
#ifndef GDN_LAYER_NB_MODULE  // gdn_layer_nb.cu takes the functions, not the entry points
#define GDN_LAYER(M, RPW, OUT, NAME)                                                              \
  extern "C" __global__ void __launch_bounds__(GL_WARPS * 32, 1) NAME(const GDNLayerArgs a) { \
    gdn_layer<M, RPW, OUT>(a);                                                                    \
  }
GDN_LAYER(QM_I8X3, 2, false, gdn_layer_i8x3_v2)
GDN_LAYER(QM_I8X2, 2, false, gdn_layer_i8x2_v2)
// Entry points gdn_layer_out_<kind>_v2: the out forms (gdnlayer=out), with
// the layer's output projection; its rows a multiple of GL_BLOCKS.
GDN_LAYER(QM_I8X3, 2, true, gdn_layer_out_i8x3_v2)
GDN_LAYER(QM_I8X2, 2, true, gdn_layer_out_i8x2_v2)
#endif  // GDN_LAYER_NB_MODULE
