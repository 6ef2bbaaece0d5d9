// gdn_layer_nb.cu: gdn_layer.cu's one launch for a Gated DeltaNet layer's
// input norm, projections and step, in clusters of NB < 8 blocks a key head
// (gdnlayer=cluster6|cluster7), so that all 16 key heads' clusters fit on
// the GPU at once: an H100 holds 15 clusters of 8 multiprocessor-filling
// blocks, and the 16th ran in a second wave (docs/bench/cuda/2026-12-07-gl1);
// a processing cluster of 12-14 multiprocessors holds two of 6 or 7. A
// module of its own (GDN_LAYER_NB_MODULE leaves gdn_layer.cu's entry points
// out), so that gdn_layer.ptx and its machine code stay as they are; the
// projection phase is gdn_layer's, over NB blocks. Written, not yet
// measured on a GPU.
//
// With fewer blocks than a value head's 128 state rows split evenly, the
// state rows are dealt out by warp: row r of the key head's 256 (value head
// r/128) to the cluster's warp r mod NB·16, two or three a warp; a row's
// arithmetic is gdn_step's, row by row. The gated norm of a value head
// needs its 128 outputs' sum of squares in gdn_step_s4_cl's order (four
// parts of 32 rows, each a tree of eight sums of four), so every block
// reads all 256 outputs of the cluster through distributed shared memory
// and sums them so: the outputs are the two kernels' bit for bit.
//
// The out forms (gdnlayer=out6|out7) go on to the output projection as
// gdn_layer_out does (outproj.h's arithmetic): every block has all 256
// outputs and their z by then, so it gates them all itself (the bits it
// and the rows' owners write), stages them, and computes their partial
// products for its share of out_proj's rows (NB shares); the last key
// head's cluster to finish a share sums it.
#define GDN_LAYER_NB_MODULE
#include "gdn_layer.cu"

// gdn_nb_out_proj: the out forms' tail, after the gated norm and the
// norm's write-back (the staging is reused): all SR gated outputs from og,
// z and inv (the same arithmetic as the rows written), staged; this block's
// share of out_proj's rows (NB shares) against the key head's columns into
// the partials; the last key head's cluster to finish the share sums it in
// order (outproj.h's arithmetic a row).
template <int M, int NB>
static __device__ __forceinline__ void gdn_nb_out_proj(const GDNLayerArgs& a, const float* og, const float* zall,
                                                       const float* inv, int kh, u32 rank) {
  extern __shared__ u32 smem[];
  constexpr int D = GDN_D, SR = 2 * D;
  const int per = (a.o.rows + NB - 1) / NB, r0 = rank * per, r1 = r0 + per < a.o.rows ? r0 + per : a.o.rows;
  __syncthreads();  // the write-back's reads of the staging done
  float* raw = (float*)smem;
  for (int r = PETAL_TID_X(); r < SR; r += PETAL_NTID_X()) raw[r] = og[r] * inv[r / D] * a.gnormW[r % D] * gsilu(zall[r]);
  __syncthreads();
  out_proj_share<M, SR, GL_WARPS>(a.o, kh, a.hk, rank, r0, r1);
}

// gdn_layer_nb: the grid hk clusters of NB blocks of GL_WARPS*32 threads,
// two value heads a key head; gdnLayerNBShared (gdn_layer.go) bytes of
// dynamic shared memory.
template <int M, int NB, bool OUT>
static __device__ __forceinline__ void gdn_layer_nb(const GDNLayerArgs& a) {
  extern __shared__ u32 smem[];
  constexpr int D = GDN_D, RATIO = 2, SR = RATIO * D, CW = NB * GL_WARPS;
  constexpr int MAXR = (SR + CW - 1) / CW;  // state rows a warp at most
  constexpr int QK = 2 * D;                 // the q and k channels every block convolves
  __shared__ __attribute__((aligned(16))) float qk[QK];
  __shared__ float oall[SR];  // the outputs of this block's rows, at their row
  __shared__ float og[SR];    // all the cluster's
  __shared__ float zall[OUT ? SR : 1];  // the out forms: all the rows' z
  __shared__ float red[GL_WARPS];
  __shared__ float gates[2 * RATIO], gba[2 * RATIO];  // beta and g of each value head; their b and a
  __shared__ float inv[RATIO];
  __shared__ int last;
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int ng = a.cols / 64, Hk = a.hk, C = (2 * Hk + a.hv) * D;
  const u32 rank = cluster_rank();
  const int kh = PETAL_BID_X() / NB;
  const int Rc = gl_rows(RATIO);
  const int team = a.team, sub = lane / team, tl = lane % team, rpw = (32 / team) * GL_R;
  const int wc = rank * GL_WARPS + warp, stride = CW * rpw;
  const long long wpr = a.cols / 8;
  const GLRows rows{kh, Hk, Rc, ng, wc, rpw, stride, team, sub, tl, wpr};

  // Dynamic shared memory: the staging, h + delta (keep), the cluster's
  // projection rows this block computes (yl), the state rows of this
  // block's warps (MAXR a warp), and the q and k channels' conv weights and
  // conv state, each from a 16-byte boundary.
  char* dyn = (char*)smem;
  int at = (QSTAGE_BYTES(M, ng > SR / 64 ? ng : SR / 64) + 15) & ~15;  // x's groups, or the out forms' if more
  float* keep = (float*)(dyn + at);
  at += (4 * a.cols + 15) & ~15;
  float* yl = (float*)(dyn + at);
  at += (4 * Rc + 15) & ~15;
  float* Ss = (float*)(dyn + at);  // [GL_WARPS][MAXR][D]
  at += 4 * GL_WARPS * MAXR * D;
  float* cw = (float*)(dyn + at);  // [QK][4]
  at += 16 * QK;
  float* cs = (float*)(dyn + at);  // [3][QK]

  auto qkChan = [&](int c) { return c < D ? kh * D + c : (Hk + kh) * D + c - D; };
  auto rowAt = [&](int k) { return wc + CW * k; };  // the warp's k-th state row of the key head's SR

  // Before the wait: the projection rows asked of L2 (gdn_layer's), the
  // b and a rows of both value heads, and the warp's state rows and the q
  // and k channels' conv weights and state copied into shared memory.
  gl_prefetch<RATIO>(a, rows);
  if (warp >= GL_WARPS - 2 * RATIO) {  // b, b, a, a
    const int i = warp - (GL_WARPS - 2 * RATIO);
    gl_gate_prefetch(a, rows, kh * RATIO + i % RATIO, i >= RATIO);
  }
  if (OUT) {  // the block's share of out_proj's rows
    const int per = (a.o.rows + NB - 1) / NB, r1 = (rank + 1) * per < a.o.rows ? (rank + 1) * per : a.o.rows;
    out_proj_prefetch<SR>(a.o, kh, rank * per, r1);
  }
#pragma unroll
  for (int k = 0; k < MAXR; k++) {
    const int r = rowAt(k);
    if (r < SR) {
      const float* src = a.state + ((long long)(kh * RATIO + r / D) * D + r % D) * D;
      cp_async16(smem_u32(Ss + (warp * MAXR + k) * D + 4 * lane), src + 4 * lane, true);
    }
  }
  for (int c = tid; c < QK; c += PETAL_NTID_X()) cp_async16(smem_u32(cw + 4 * c), a.convW + 4 * (long long)qkChan(c), true);
  for (int i = tid; i < 3 * QK / 4; i += PETAL_NTID_X()) {
    const int row = i / (QK / 4), c = 4 * (i % (QK / 4));
    cp_async16(smem_u32(cs + row * QK + c), a.convState + (long long)row * C + qkChan(c), true);
  }
  cp_commit();
  pdl_begin();
  float gl[RATIO], gd[RATIO];
#pragma unroll
  for (int h = 0; h < RATIO; h++) gl[h] = a.aLog[kh * RATIO + h], gd[h] = a.dtBias[kh * RATIO + h];

  qstage_raw<true>(nullptr, ng, QNormIn{a.h, a.delta, a.normw, a.eps, keep});
  const QView q = qstage_layout<M>(ng);
  u32 ticket = 0;
  if (tid == 0) {
    fence_gpu();
    ticket = ticket_inc(a.counter, PETAL_NCTAID_X() - 1);
  }

  // The projections (gdn_layer's, over NB blocks).
  gl_project<M, RATIO>(a, rows, q, yl);
  cp_wait<0>();
  cluster_sync();  // every block's rows in its shared memory; the copies landed

  auto proj = [&](int li) { return ld_cluster_f32(cluster_addr(yl + li, gl_owner<NB>(li, rpw))); };
  const int v0 = 2 * D, z0 = v0 + RATIO * D;
  // q and k: conv and SiLU by threads 0-255 (gdn_step's arithmetic), the
  // q/k conv state shifted a share a block (every block's copy landed
  // before the barrier).
  float c = 0.f;
  if (tid < QK) {
    const float xt = proj(tid);
    const f32x4 w = *(const f32x4*)(cw + 4 * tid);
    const float s0 = cs[tid], s1 = cs[QK + tid], s2 = cs[2 * QK + tid];
    c = gsilu(w.x * s0 + w.y * s1 + w.z * s2 + w.w * xt);
    if (tid % NB == (int)rank) {
      const long long ch = qkChan(tid);
      a.convState[ch] = s1, a.convState[C + ch] = s2, a.convState[2 * C + ch] = xt;
    }
  }
  // b and a of both value heads, by the last four warps (no conv work).
  if (warp >= GL_WARPS - 2 * RATIO) {
    const int i = warp - (GL_WARPS - 2 * RATIO), j = kh * RATIO + i % RATIO;
    const bool isA = i >= RATIO;
    const float acc = gl_gate_row<M>(a, rows, q, j, isA);
    if (lane == 0) {
      gba[i] = acc;
      if (rank == 0) (isA ? a.y[3] : a.y[2])[j] = acc;
    }
  }
  const float ss = warp_sum(c * c);
  if (lane == 0 && warp < 8) red[warp] = ss;
  __syncthreads();
  if (tid < RATIO) {
    gates[tid] = gsigmoid(gba[tid]);
    gates[RATIO + tid] = gexp(-gexp(gl[tid]) * gsoftplus(gba[RATIO + tid] + gd[tid]));
  }
  if (tid < QK) {
    const float sq = red[0] + red[1] + red[2] + red[3], sk = red[4] + red[5] + red[6] + red[7];
    const float scale = tid < D ? 1.f / (__builtin_sqrtf(sq + 1e-6f) * __builtin_sqrtf((float)D))
                                : 1.f / __builtin_sqrtf(sk + 1e-6f);
    qk[tid] = c * scale;
  }
  __syncthreads();

  // The delta rule, row by row (gdn_step's arithmetic a row), each row's
  // v from its conv, done by the warp (the block's own channels: their
  // conv state read after the wait and shifted by the warp).
  const f32x4 k4 = *(const f32x4*)(qk + D + 4 * lane);
  const f32x4 q4 = *(const f32x4*)(qk + 4 * lane);
  float zr[MAXR];
#pragma unroll
  for (int k = 0; k < MAXR; k++) {
    const int r = rowAt(k);
    zr[k] = 0.f;
    if (r >= SR) continue;  // warp-uniform
    const int hl = r / D, j = kh * RATIO + hl;
    const long long vc = (long long)(2 * Hk + j) * D + r % D;
    const f32x4 wv = *(const f32x4*)(a.convW + 4 * vc);
    const float c0 = a.convState[vc], c1 = a.convState[C + vc], c2 = a.convState[2 * C + vc], vx = proj(v0 + r);
    const float vv = gsilu(wv.x * c0 + wv.y * c1 + wv.z * c2 + wv.w * vx);
    zr[k] = proj(z0 + r);
    __syncwarp();
    if (lane == 0) a.convState[vc] = c1, a.convState[C + vc] = c2, a.convState[2 * C + vc] = vx;
    const float beta = gates[hl], g = gates[RATIO + hl];
    f32x4 S = *(const f32x4*)(Ss + (warp * MAXR + k) * D + 4 * lane);
    S.x *= g, S.y *= g, S.z *= g, S.w *= g;
    float m1[1] = {dot4(S, k4)};
    warp_sums<1>(m1);
    const float d = beta * (vv - m1[0]);
    S.x += d * k4.x, S.y += d * k4.y, S.z += d * k4.z, S.w += d * k4.w;
    st4(a.state + ((long long)j * D + r % D) * D + 4 * lane, S);
    float o1[1] = {dot4(S, q4)};
    warp_sums<1>(o1);
    if (lane == 0) oall[r] = o1[0];
  }
  pdl_trigger();  // the state is written; the gated norm and the norm's write-back are left
  cluster_sync();  // every block's outputs in its shared memory
  for (int r = tid; r < SR; r += PETAL_NTID_X()) {
    og[r] = ld_cluster_f32(cluster_addr(oall + r, (u32)((r % CW) / GL_WARPS)));
    if (OUT) zall[r] = proj(z0 + r);
  }
  cluster_arrive();  // done with the others' shared memory
  __syncthreads();
  // Each value head's sum of squares in gdn_step_s4_cl's order: four parts
  // of 32 rows in turn, each a tree of eight sequential sums of four.
  if (tid < RATIO) {
    const float* o = og + tid * D;
    float tot = 0.f;
    for (int part = 0; part < 4; part++) {
      float rs[8];
#pragma unroll
      for (int w = 0; w < 8; w++) {
        float sq = 0.f;
#pragma unroll
        for (int i = 0; i < 4; i++) sq += o[part * 32 + w * 4 + i] * o[part * 32 + w * 4 + i];
        rs[w] = sq;
      }
      tot += ((rs[0] + rs[1]) + (rs[2] + rs[3])) + ((rs[4] + rs[5]) + (rs[6] + rs[7]));
    }
    inv[tid] = 1.f / __builtin_sqrtf(tot / D + a.geps);
    if (tid == 0) last = ticket == PETAL_NCTAID_X() - 1;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < MAXR; k++) {
    const int r = rowAt(k);
    if (r < SR && lane == 0) {
      const int hl = r / D;
      a.out[(long long)(kh * RATIO + hl) * D + r % D] = og[r] * inv[hl] * a.gnormW[r % D] * gsilu(zr[k]);
    }
  }
  if (last) {
    fence_gpu();
    for (int i = tid; i < a.cols; i += PETAL_NTID_X()) {
      if (a.delta) a.h[i] = keep[i];
      a.xout[i] = q.raw[i];
    }
  }
  if (OUT) gdn_nb_out_proj<M, NB>(a, og, zall, inv, kh, rank);
  cluster_wait();
}

// Entry points gdn_layer_c<NB>_<kind>_v2: clusters of 6 and 7 blocks, the
// kinds of qmv=exact and qmv=fast, two value heads a key head.
#define GDN_LAYER_NB(M, NB, OUT, NAME)                                                            \
  extern "C" __global__ void __launch_bounds__(GL_WARPS * 32, 1) NAME(const GDNLayerArgs a) { \
    gdn_layer_nb<M, NB, OUT>(a);                                                                  \
  }
GDN_LAYER_NB(QM_I8X3, 6, false, gdn_layer_c6_i8x3_v2)
GDN_LAYER_NB(QM_I8X2, 6, false, gdn_layer_c6_i8x2_v2)
GDN_LAYER_NB(QM_I8X3, 7, false, gdn_layer_c7_i8x3_v2)
GDN_LAYER_NB(QM_I8X2, 7, false, gdn_layer_c7_i8x2_v2)
// Entry points gdn_layer_out_c<NB>_<kind>_v2: the out forms
// (gdnlayer=out6|out7); the projection's partials [hk][rows] and NB ticket
// counters.
GDN_LAYER_NB(QM_I8X3, 6, true, gdn_layer_out_c6_i8x3_v2)
GDN_LAYER_NB(QM_I8X2, 6, true, gdn_layer_out_c6_i8x2_v2)
GDN_LAYER_NB(QM_I8X3, 7, true, gdn_layer_out_c7_i8x3_v2)
GDN_LAYER_NB(QM_I8X2, 7, true, gdn_layer_out_c7_i8x2_v2)
