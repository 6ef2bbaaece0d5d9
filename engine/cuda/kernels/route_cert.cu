// route_cert.cu: router=cert, prefill's router choosing the experts
// qgemm_i8 (route_i8.cu) chooses without qgemm_i8's exact sums for every
// expert: in a module of its own, loaded under that option only.
//
//   route_cert_bound: once a router matrix, for each group of 64 columns
//     the largest sum over a row of |scale|·q + |bias| there (gbound, at
//     least the sum of |weight|), rounded up.
//   qgemm_cert: qgemm_i8_wg2's blocks with x in two 8-bit parts, not four
//     (qi_gemm's PARTS = 2): each logit to within eps of its exact value,
//     a bound per token from the parts' truncation and the float32 sums.
//   route_cert_select: a warp a token. An expert whose approximate logit
//     plus its bound is below the topK-th largest of the approximate
//     logits less theirs cannot be among the topK, since topK others are
//     surely above it; the others (the candidates: about topK at the 35B
//     model's widths) get qgemm_i8's exact logit, its arithmetic step by
//     step for that row, and the choice is route_select's among them.
//     A token whose bounds are not finite (x holding a NaN or an
//     infinity) takes every expert. Its weights are renormalised over the
//     chosen (route_cert.go's certFits: the others' need every logit).
// The experts chosen are qgemm_i8's and route_select's, in the same order.
// The weights are its softmax over the chosen renormalised, computed over
// the candidates' exact logits (route_select sums over all): the same
// float32 bits but where a float64 rounding crosses a float32 one.
#define QI_HELPERS_ONLY
#include "route_i8.cu"

// RC_WARPS: route_cert_select's warps a block, a token each.
#define RC_WARPS 4

// rc_bytes is route_cert_select's shared memory a warp (RC_BYTES in
// route_cert.go): for groups of 64 columns their d·2^-24 and part sums
// (float64), the candidates' group terms (32 at a time), x's parts
// (int32), and for each expert a lower and an upper bound, an exact logit
// and a candidate's id.
static __device__ __forceinline__ int rc_bytes(int groups, int cols, int E) {
  return 8 * (34 * groups) + 4 * cols + 16 * E;
}

extern "C" __global__ void __launch_bounds__(256)
    route_cert_bound(const QDesc* __restrict__ wd, float* __restrict__ gbound) {
  pdl_begin();
  const QDesc d = *wd;
  const int g = PETAL_BID_X(), tid = PETAL_TID_X();
  __shared__ double red[8];
  double best = 0;
  for (int e = tid; e < d.rows; e += 256) {
    const double s = bf16_to_f32(d.s[(long long)e * d.gpr + g]), b = bf16_to_f32(d.b[(long long)e * d.gpr + g]);
    const u32* w = d.w + (long long)e * d.wpr + g * (2 * d.bits);
    // |s|·q + |b| over |s·q + b|: it bounds the float32 sums' roundings of
    // the products' terms too, where s·q and b cancel
    double sum = 0;  // each term exact, the sum rounded: raised below
    for (int k = 0; k < 64; k++) {
      const int per = 32 / d.bits;
      const u32 q = (w[k / per] >> (d.bits * (k % per))) & ((1u << d.bits) - 1u);
      sum += __builtin_fma(__builtin_fabs(s), (double)q, __builtin_fabs(b));
    }
    best = sum > best || sum != sum ? sum : best;  // a NaN stays
  }
  for (int o = 16; o > 0; o >>= 1) {
    const double u = shfl_xor_f64(best, o);
    best = u > best || u != u ? u : best;
  }
  if ((tid & 31) == 0) red[tid >> 5] = best;
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < 8; w++) best = red[w] > best || red[w] != red[w] ? red[w] : best;
    best *= 1.0 + 0x1p-40;  // over the float64 sum's roundings
    float f = (float)best;
    if ((double)f < best) f = __uint_as_float(__float_as_uint(f) + 1u);  // rounded up (positive)
    gbound[g] = f;
  }
}

// qgemm_cert: qgemm_i8_wg2's grid and block (32 tokens x 256 rows, 16
// warps, two groups of 64 columns a stage, two stages; qiShape.shared
// with two parts), the approximate logits y [splits][T][ldy] and the
// bounds eps [splits][T].
extern "C" __global__ void __launch_bounds__(512, 1)
    qgemm_cert(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y, int T, int ldy,
               const float* __restrict__ gbound, float* __restrict__ eps) {
  qi_gemm<2, 8, 4, 2, 2, 2>(wd, x, y, nullptr, T, ldy, gbound, eps);
}
// qgemm_cert16: the same in blocks of 16 tokens (8 warps, two blocks a
// multiprocessor): twice the blocks, so that 4096 rows fill every
// multiprocessor twice over where qgemm_cert's 128 blocks leave some idle
// (route_cert.go's certShapes; TestMeasureRouterCert times both).
extern "C" __global__ void __launch_bounds__(256, 2)
    qgemm_cert16(const QDesc* __restrict__ wd, const float* __restrict__ x, float* __restrict__ y, int T, int ldy,
                 const float* __restrict__ gbound, float* __restrict__ eps) {
  qi_gemm<1, 8, 4, 2, 2, 2>(wd, x, y, nullptr, T, ldy, gbound, eps);
}

// rc_take is the index (lane + 32i, below n) of the best of v not yet
// taken, in route_select's order (rank_key: the larger first, NaN last,
// then the lower index), marked in its lane's taken (bit i); -1 where none
// is left.
static __device__ __forceinline__ int rc_take(const float* v, int n, int lane, u32& taken) {
  unsigned long long best = 0;
  for (int i = 0; lane + 32 * i < n; i++)
    if (!(taken >> i & 1u)) {
      const unsigned long long key = rank_key(v[lane + 32 * i], lane + 32 * i);
      best = key > best ? key : best;
    }
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long u = shfl_xor_u64(best, o);
    best = u > best ? u : best;
  }
  if (best == 0) return -1;
  const int j = rank_id(best);
  if ((j & 31) == lane) taken |= 1u << (j >> 5);
  return j;
}

// route_cert_select: grid ceil(T/RC_WARPS), RC_WARPS·32 threads,
// RC_WARPS·rc_bytes bytes of dynamic shared memory; approx and eps as
// qgemm_cert wrote them (splits of the columns), ids and wts [T][topK] as
// route_select writes them after the qgemm_i8 whose columns were split
// exactSplits ways (1: none). E (the router's rows) at most 1024, its
// columns at most 4096.
extern "C" __global__ void __launch_bounds__(RC_WARPS * 32)
    route_cert_select(const QDesc* __restrict__ wd, const float* __restrict__ x, const float* __restrict__ approx,
                      const float* __restrict__ eps, int* __restrict__ ids, float* __restrict__ wts, int T, int topK,
                      int splits, int exactSplits) {
  pdl_begin();
  const QDesc d = *wd;
  const int E = d.rows, C = d.cols, groups = C / 64;
  const int lane = PETAL_TID_X() & 31, warp = PETAL_TID_X() >> 5;
  const int t = PETAL_BID_X() * RC_WARPS + warp;
  if (t >= T) return;  // whole warps, and no block barriers below
  extern __shared__ __attribute__((aligned(16))) unsigned char rc_smem[];
  unsigned char* base = rc_smem + warp * rc_bytes(groups, C, E);
  double* gds = (double*)base;  // [groups] d·2^-24
  double* gps = gds + groups;   // [groups] the parts' sum (NaN: not finite)
  double* tb = gps + groups;    // [32][groups] a candidate's group terms
  int* P = (int*)(tb + 32 * groups);  // [C] x's parts, floor(x/d·2^24)
  float* lo = (float*)(P + C);  // [E] lower bounds (then the chosen slots)
  float* up = lo + E;           // [E] upper bounds
  float* cl = up + E;           // [E] the candidates' exact logits
  int* cand = (int*)(cl + E);   // [E] the candidates' ids, in order

  // 1. each logit's bounds: the splits' approximate sums added, eps
  // widened over the roundings of these float32 operations
  float epsT = 0.f;
  for (int z = 0; z < splits; z++) epsT += eps[(long long)z * T + t];
  bool all = !(epsT <= 3.0e38f);  // NaN or infinite: every expert
  for (int e = lane; e < E; e += 32) {
    float a = 0.f, mag = 0.f;
    for (int z = 0; z < splits; z++) {
      const float v = approx[((long long)z * T + t) * E + e];
      a += v;
      mag += __builtin_fabsf(v);
    }
    // (1e-30: over any subnormal bound's roundings)
    const float err = (epsT + mag * 0x1p-20f) * 1.00390625f + __builtin_fabsf(a) * 0x1p-20f + 1e-30f;
    lo[e] = a - err;
    up[e] = a + err;
    all = all || !(__builtin_fabsf(a) <= 3.0e38f);
  }
  all = __nvvm_vote_any_sync(0xffffffffu, all);
  __syncwarp();  // the bounds, read across the warp below

  // 2. the topK-th largest lower bound (keys as route_select's)
  float lowK = -__builtin_inff();
  if (!all) {
    u32 taken = 0;  // bit i: expert lane + 32i
    for (int k = 0; k < topK; k++) lowK = lo[rc_take(lo, E, lane, taken)];  // topK <= E: one is left
    all = !(lowK >= -3.0e38f);
  }
  __syncwarp();

  // 3. the candidates, in the order of their ids
  int count = 0;
  for (int e0 = 0; e0 < E; e0 += 32) {
    const int e = e0 + lane;
    const bool c = e < E && (all || up[e] >= lowK);
    const u32 mask = __nvvm_vote_ballot_sync(0xffffffffu, c);
    if (c) cand[count + __builtin_popcount(mask & ((1u << lane) - 1u))] = e;
    count += __builtin_popcount(mask);
  }

  // 4. x's parts as qgemm_i8 splits a group (d from its largest |x|, the
  // bits below d·2^-24 dropped: floor(x/d·2^24) in float64, exact)
  for (int g = lane; g < groups; g += 32) {
    const float4v* xr = (const float4v*)(x + (long long)t * C + g * 64);  // 16 bytes a load
    u32 mb = 0;
#pragma unroll 4
    for (int k = 0; k < 16; k++) {
      const float4v v = xr[k];
      mb = umax(umax(mb, __float_as_uint(v.x) & 0x7FFFFFFFu), __float_as_uint(v.y) & 0x7FFFFFFFu);
      mb = umax(umax(mb, __float_as_uint(v.z) & 0x7FFFFFFFu), __float_as_uint(v.w) & 0x7FFFFFFFu);
    }
    const int Eg = imax((int)(mb >> 23) - 127, -120);
    const double sc = __builtin_bit_cast(double, (unsigned long long)(1023 + 30 - Eg) << 52);  // 2^24/d
    long long ps = 0;
#pragma unroll 4
    for (int k = 0; k < 16; k++) {
      const float4v v = xr[k];
      const float xs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int pk = mb >= 0x7F800000u ? 0 : (int)__builtin_floor((double)xs[e] * sc);
        P[g * 64 + 4 * k + e] = pk;
        ps += pk;
      }
    }
    gds[g] = __builtin_bit_cast(double, (unsigned long long)(1023 + Eg - 6 - 24) << 52);
    gps[g] = mb >= 0x7F800000u ? __builtin_nan("") : (double)ps;
  }
  __syncwarp();

  // 5. the candidates' exact logits, 32 at a time: a lane a group's term
  // (qgemm_i8's t), then a lane a candidate's sums over the groups in
  // order, split as qgemm_i8 and route_select split them
  for (int c0 = 0; c0 < count; c0 += 32) {
    const int nb = imin(32, count - c0);
    for (int ci = 0; ci < nb; ci++) {
      const long long e = cand[c0 + ci];
      for (int g = lane; g < groups; g += 32) {
        // the group's code words and x's parts, 16 bytes a load
        const u32x4a* w4 = (const u32x4a*)(d.w + e * d.wpr + g * (2 * d.bits));
        const u32x4a* p4 = (const u32x4a*)(P + g * 64);
        long long v = 0;  // sum of q·P: exact (under 2^45)
        if (d.bits == 8) {
#pragma unroll
          for (int j = 0; j < 4; j++) {
            const u32x4a wv = w4[j];
            const u32 words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
            for (int m = 0; m < 4; m++) {
              const u32x4a pv = p4[4 * j + m];
              const int ps[4] = {(int)pv.x, (int)pv.y, (int)pv.z, (int)pv.w};
#pragma unroll
              for (int b = 0; b < 4; b++) v += (long long)(int)((words[m] >> (8 * b)) & 0xFFu) * ps[b];
            }
          }
        } else {
#pragma unroll
          for (int j = 0; j < 2; j++) {
            const u32x4a wv = w4[j];
            const u32 words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
            for (int m = 0; m < 4; m++) {
              const u32x4a pa = p4[8 * j + 2 * m], pb = p4[8 * j + 2 * m + 1];
              const int ps[8] = {(int)pa.x, (int)pa.y, (int)pa.z, (int)pa.w, (int)pb.x, (int)pb.y, (int)pb.z, (int)pb.w};
#pragma unroll
              for (int b = 0; b < 8; b++) v += (long long)(int)((words[m] >> (4 * b)) & 0xFu) * ps[b];
            }
          }
        }
        const double s = bf16_to_f32(d.s[e * d.gpr + g]), b = bf16_to_f32(d.b[e * d.gpr + g]);
        tb[ci * groups + g] = __builtin_fma(s, i64_to_f64(v), b * gps[g]);
      }
    }
    __syncwarp();
    if (lane < nb) {
      double total = 0, acc = 0;
      for (int z = 0; z < exactSplits; z++) {
        const int g0 = z * groups / exactSplits, g1 = (z + 1) * groups / exactSplits;
        double part = 0;
        for (int g = g0; g < g1; g++) part = __builtin_fma(tb[lane * groups + g], gds[g], part);
        if (exactSplits == 1)
          acc = part;
        else
          total += part;
      }
      cl[c0 + lane] = exactSplits == 1 ? (float)acc : (float)total;
    }
    __syncwarp();
  }

  // 6. route_select's choice and weights over the candidates (a slot's
  // order is its id's)
  float m = -__builtin_inff();
  for (int j = lane; j < count; j += 32)
    if (!is_nan(cl[j])) m = __builtin_fmaxf(m, cl[j]);
  m = warp_max(m);
  double sum = 0;
  for (int j = lane; j < count; j += 32)
    if (!is_nan(cl[j])) sum += dexp((double)cl[j] - m);
  for (int o = 16; o > 0; o >>= 1) sum += shfl_xor_f64(sum, o);
  int* chosenSlot = (int*)lo;  // lo is done with
  u32 taken = 0;               // bit i: slot lane + 32i
  double chosen = 0;
  for (int k = 0; k < topK; k++) {
    const int got = rc_take(cl, count, lane, taken);
    const int j = got < 0 ? 0 : got, e = got < 0 ? 0 : cand[j];  // none left: expert 0, as route_select
    const double p = dexp((double)cl[j] - m) / sum;
    if (lane == 0) {
      chosenSlot[k] = j;
      ids[(long long)t * topK + k] = e;
      wts[(long long)t * topK + k] = (float)p;
    }
    chosen += p;
  }
  __syncwarp();
  for (int k = lane; k < topK; k += 32)
    wts[(long long)t * topK + k] = (float)(dexp((double)cl[chosenSlot[k]] - m) / sum / chosen);
}
