// sample.cu: the Sample and Logprobs ops (engine/backend ops_sample.go) on
// the device, one block of SAMPLE_THREADS over a row of logits, following
// engine/sample's Kernel step by step: penalties, greedy choice, weights
// exp(-(m-x)/T) (float64 series rounded to float32, as expNeg), top-k by a
// radix selection of the k-th order key (three histogram passes), top-p by
// a radix selection over weights, min-p, and the draw u·total in id order.
// What must run in id order (ties at a boundary, the running sums) is done
// over contiguous id ranges, one per thread, joined by a block scan.
#include "rowmath.h"

#define SAMPLE_THREADS 1024
#define RADIX_BITS 11
#define RADIX_BINS (1 << RADIX_BITS)
#define RADIX_MASK (RADIX_BINS - 1)
#define MAX_SPAN 87.f

// order_key, rank_key and rank_id are in rowmath.h.

// exp_neg is engine/sample's expNeg: exp(-d) for 0 <= d < 87 as
// 2^n·2^f with a degree-7 series of 2^f in float64, rounded to float32.
static __device__ __forceinline__ float exp_neg(float d) {
  const double t = -(double)d * 1.4426950408889634074;
  const double n = -__builtin_floor(-t + 0.5);
  const double f = (t - n) * 0.69314718055994530942;
  const double p =
      1 + f * (1 + f * (1.0 / 2 + f * (1.0 / 6 + f * (1.0 / 24 + f * (1.0 / 120 + f * (1.0 / 720 + f * (1.0 / 5040)))))));
  return (float)(p * pow2d((long long)n));
}

// uniform is engine/sample's Uniform: splitmix64, 24 bits.
static __device__ __forceinline__ float uniform(u64 seed, u64 draw) {
  u64 z = seed + (draw + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ z >> 27) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.f / 16777216.f);
}

static __device__ __forceinline__ bool kept_by(u32 key, int id, u32 limitKey, int limitID) {
  return key > limitKey || key == limitKey && id <= limitID;
}

// sample_prep: grid SAMPLE_PARTS, block SAMPLE_PREP_THREADS: steps 1-2 of
// sample_row over the whole GPU (one block over 248,320 logits took 106 us
// a token on the H200: docs/bench/cuda/2026-12-01-ktrace1). It writes the
// penalised logits to x and, per block, the largest rank_key and whether
// a logit was not finite to part[2b], part[2b+1]; sample_row reduces them.
#define SAMPLE_PARTS 128
#define SAMPLE_PREP_THREADS 256

// The top-k fast path (a top-k of at most SAMPLE_FAST_K, a vocabulary of
// at most SAMPLE_PARTS * SAMPLE_SLICE): each sample_prep block sorts the
// keys of the tokens it penalised and leaves its best k in cand (its
// SAMPLE_FAST_K slots); sample_row sorts those SAMPLE_PARTS lists' union
// and takes the k best, and one thread does engine/sample's arithmetic
// over them in its order, so the choice is the host's bit for bit. The
// general path's radix selections over the whole row in one block, with
// the model's defaults (temperature 0.6, top-k 20, top-p 0.95), made a
// decoded token 1 ms slower than greedy on an H100
// (docs/bench/cuda/2026-12-06-sampled1).
#define SAMPLE_FAST_K 64
#define SAMPLE_ROUNDS 8
#define SAMPLE_SLICE (SAMPLE_ROUNDS * SAMPLE_PREP_THREADS)
// (on: the backend's sampler=topk; off, sample_row's general path always)
static __device__ __forceinline__ bool sample_fast(int on, float T, int K, int V) {
  return on && T > 0 && K > 0 && K <= SAMPLE_FAST_K && K < V && V <= SAMPLE_PARTS * SAMPLE_SLICE;
}

// bitonic_desc sorts n (a power of two) keys in shared memory, largest
// first; every thread of the block calls it.
static __device__ __forceinline__ void bitonic_desc(unsigned long long* s, int n, int t, int nt) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = t; i < n; i += nt) {
        const int p = i ^ j;
        if (p > i) {
          const unsigned long long a = s[i], b = s[p];
          if ((i & k) == 0 ? a < b : a > b) s[i] = b, s[p] = a;
        }
      }
      __syncthreads();
    }
  }
}

extern "C" __global__ void __launch_bounds__(SAMPLE_PREP_THREADS)
    sample_prep(const float* __restrict__ logits, const float* __restrict__ params, const int* __restrict__ config,
                const int* __restrict__ counts, const int* __restrict__ inPrompt, float* __restrict__ x,
                unsigned long long* __restrict__ part, unsigned long long* __restrict__ cand, int fastOn, int V) {
  pdl_begin();
  __shared__ unsigned long long red64[32];
  __shared__ int redi[32];
  __shared__ unsigned long long keys[SAMPLE_SLICE];
  const float presence = params[3], frequency = params[4], rep = params[5];
  const bool useRep = rep > 0 && rep != 1;
  const int K = config[0];
  const bool fast = sample_fast(fastOn, params[0], K, V);
  int bad = 0;
  unsigned long long best = 0;
  const int stride = PETAL_NCTAID_X() * PETAL_NTID_X();
  int r = 0;
  for (int i = PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X(); i < V; i += stride, r++) {
    float v = logits[i];
    if (v - v != 0.f) bad = 1;
    const int n = counts[i];
    if (useRep && (n > 0 || inPrompt[i] != 0)) v = v > 0 ? v / rep : v * rep;
    if (n > 0) v -= presence + frequency * (float)n;
    x[i] = v;
    const unsigned long long k = rank_key(v, i);
    best = k > best ? k : best;
    if (fast) keys[r * SAMPLE_PREP_THREADS + PETAL_TID_X()] = k;
  }
  bad = block_sum_int(bad, redi);
  best = block_max_u64(best, red64);
  if (PETAL_TID_X() == 0) part[2 * PETAL_BID_X()] = best, part[2 * PETAL_BID_X() + 1] = (unsigned long long)bad;
  if (!fast) return;
  for (; r < SAMPLE_ROUNDS; r++) keys[r * SAMPLE_PREP_THREADS + PETAL_TID_X()] = 0;  // below every token's key
  __syncthreads();
  bitonic_desc(keys, SAMPLE_SLICE, PETAL_TID_X(), PETAL_NTID_X());
  for (int j = PETAL_TID_X(); j < K; j += PETAL_NTID_X()) cand[PETAL_BID_X() * SAMPLE_FAST_K + j] = keys[j];
}

// sample_fast_choose is engine/sample's Kernel.Choose after its top-k, for
// the k best keys (best, largest first) of the penalised logits x, by one
// thread: the candidates in id order, their weights, top-p's boundary
// (its digit sums as the host's, in id order), min-p and the draw; r01 is
// the draw's uniform number.
static __device__ int sample_fast_choose(const unsigned long long* __restrict__ best, int K, const float* __restrict__ x,
                                         float m, int bestID, float T, float topP, float minP, float r01) {
  int ids[SAMPLE_FAST_K];
  float w[SAMPLE_FAST_K];
  u32 keys[SAMPLE_FAST_K];
  for (int j = 0; j < K; j++) {  // insertion into id order
    const int id = rank_id(best[j]);
    int at = j;
    for (; at > 0 && ids[at - 1] > id; at--) ids[at] = ids[at - 1];
    ids[at] = id;
  }
  for (int j = 0; j < K; j++) {
    const float v = x[ids[j]], d = (m - v) / T;
    w[j] = d < MAX_SPAN ? exp_neg(d) : 0.f;
    keys[j] = order_key(v);
  }
  u32 limitKey = 0;
  int limitID = 0x7fffffff;
  if (topP > 0 && topP < 1) {
    float z = 0.f;
    for (int j = 0; j < K; j++) z += w[j];
    const float target = topP * z;
    // boundary: the digit sums of the tokens under the prefix, each in id
    // order, walked from the largest digit
    u32 prefix = 0, mask = 0;
    float cum = 0.f;
    u32 dg[SAMPLE_FAST_K];
    float hs[SAMPLE_FAST_K];
    for (int level = 0; level < 3; level++) {
      const int shift = level == 0 ? 21 : level == 1 ? 10 : 0;
      int nd = 0;
      for (int j = 0; j < K; j++) {
        if ((keys[j] & mask) != prefix) continue;
        const u32 d = (keys[j] >> shift) & RADIX_MASK;
        int k = 0;
        while (k < nd && dg[k] != d) k++;
        if (k == nd) dg[nd] = d, hs[nd] = 0.f, nd++;
        hs[k] += w[j];
      }
      int low = -1, at = -1;
      u32 above = RADIX_MASK + 1;  // digits taken so far are those >= above
      for (int seen = 0; seen < nd; seen++) {
        int k = -1;
        for (int q = 0; q < nd; q++)
          if (dg[q] < above && (k < 0 || dg[q] > dg[k])) k = q;
        above = dg[k];
        low = k;
        if (cum + hs[k] >= target) {
          at = k;
          break;
        }
        cum += hs[k];
      }
      if (at < 0) {
        at = low;
        cum -= hs[at];
      }
      prefix |= dg[at] << shift;
      mask |= (u32)RADIX_MASK << shift;
    }
    int last = -1;
    for (int j = 0; j < K; j++) {
      if (keys[j] != prefix) continue;
      last = ids[j];
      cum += w[j];
      if (cum >= target) break;
    }
    limitKey = prefix, limitID = last;
  }
  float total = 0.f;
  for (int j = 0; j < K; j++)
    if (kept_by(keys[j], ids[j], limitKey, limitID) && (w[j] >= minP || ids[j] == bestID)) total += w[j];
  const float r = r01 * total;
  float acc = 0.f;
  int last = bestID;
  for (int j = 0; j < K; j++) {
    if (!kept_by(keys[j], ids[j], limitKey, limitID) || !(w[j] >= minP || ids[j] == bestID) || w[j] == 0.f) continue;
    acc += w[j];
    last = ids[j];
    if (r < acc) return ids[j];
  }
  return last;
}

// sample_row: grid 1, block SAMPLE_THREADS, after sample_prep. x and w are V
// floats of scratch: the penalised logits (from sample_prep) and the
// candidates' weights (-1 for a token that is no candidate); part is
// sample_prep's.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    sample_row(const float* __restrict__ params, int* __restrict__ config, int* __restrict__ counts,
               int* __restrict__ token, int* __restrict__ status, float* __restrict__ x, float* __restrict__ w,
               const unsigned long long* __restrict__ part, const unsigned long long* __restrict__ cand, int fastOn,
               int V) {
  pdl_begin();
  extern __shared__ unsigned long long fastKeys[];  // SAMPLE_PARTS * SAMPLE_FAST_K, for the top-k fast path
  __shared__ int hist[RADIX_BINS];
  __shared__ float whist[RADIX_BINS];
  __shared__ unsigned long long red64[32];
  __shared__ float redf[32];
  __shared__ int redi[32];
  __shared__ u32 sPrefix, sMask;
  __shared__ int sNeed;
  __shared__ float sCum;
  const int t = PETAL_TID_X(), nt = PETAL_NTID_X();
  const float T = params[0], topP = params[1], minP = params[2];
  const int topK = config[0];
  const u64 seed = (u64)(u32)config[1] | (u64)(u32)config[2] << 32;
  const u64 draw = (u64)(u32)config[3];
    const int chunk = (V + nt - 1) / nt, lo = imin(V, t * chunk), hi = imin(V, lo + chunk);

  // 1-2: penalties, the finite check, the greedy choice (sample_prep's
  // parts)
  int bad = 0;
  unsigned long long best = 0;
  for (int i = t; i < SAMPLE_PARTS; i += nt) {
    best = part[2 * i] > best ? part[2 * i] : best;
    bad |= part[2 * i + 1] != 0;
  }
  const bool finite = block_sum_int(bad, redi) == 0;
  best = block_max_u64(best, red64);
  const int bestID = rank_id(best);
  const float m = x[bestID];
  int chosen = bestID;
  if (T > 0 && finite && m - m == 0.f && sample_fast(fastOn, T, topK, V)) {
    // the k best of each sample_prep block's k best, then the host's
    // arithmetic over them (sample_fast_choose)
    const int n = SAMPLE_PARTS * topK;
    int n2 = 1;
    while (n2 < n) n2 <<= 1;
    for (int i = t; i < n2; i += nt) fastKeys[i] = i < n ? cand[(i / topK) * SAMPLE_FAST_K + i % topK] : 0ull;
    __syncthreads();
    bitonic_desc(fastKeys, n2, t, nt);
    if (t == 0) chosen = sample_fast_choose(fastKeys, topK, x, m, bestID, T, topP, minP, uniform(seed, draw));
  } else if (T > 0 && finite && m - m == 0.f) {
    // 3-4: candidates and their weights; top-k
    const bool useTopK = topK > 0 && topK < V;
    if (!useTopK) {
      for (int i = t; i < V; i += nt) {
        const float d = (m - x[i]) / T;
        w[i] = d < MAX_SPAN ? exp_neg(d) : -1.f;
      }
    } else {
      if (t == 0) sPrefix = 0, sMask = 0, sNeed = topK;
      for (int level = 0; level < 3; level++) {
        const int shift = level == 0 ? 21 : level == 1 ? 10 : 0;
        for (int b = t; b < RADIX_BINS; b += nt) hist[b] = 0;
        __syncthreads();
        const u32 prefix = sPrefix, mask = sMask;
        for (int i = t; i < V; i += nt) {
          const u32 key = order_key(x[i]);
          if ((key & mask) == prefix) atomic_add(&hist[(key >> shift) & RADIX_MASK], 1);
        }
        __syncthreads();
        if (t == 0) {
          int need = sNeed, d = RADIX_MASK;
          for (; d > 0 && hist[d] < need; d--) need -= hist[d];
          sNeed = need;
          sPrefix = prefix | (u32)d << shift;
          sMask = mask | (u32)RADIX_MASK << shift;
        }
        __syncthreads();
      }
      const u32 P = sPrefix;
      const int need = sNeed;
      // the tokens at the boundary key count in id order
      int eq = 0;
      for (int i = lo; i < hi; i++) eq += order_key(x[i]) == P;
      int rank = block_scan_int(eq, redi);
      for (int i = lo; i < hi; i++) {
        const u32 key = order_key(x[i]);
        bool cand = key > P;
        if (key == P) cand = rank++ < need;
        const float d = (m - x[i]) / T;
        w[i] = cand ? (d < MAX_SPAN ? exp_neg(d) : 0.f) : -1.f;
      }
    }
    __syncthreads();

    // top-p: the boundary (key, last id) where the weight in the order
    // (key desc, id asc) reaches topP times the candidates' total
    u32 limitKey = 0;
    int limitID = 0x7fffffff;
    if (topP > 0 && topP < 1) {
      float z = 0.f;
      for (int i = t; i < V; i += nt)
        if (w[i] >= 0) z += w[i];
      const float target = topP * block_sum(z, redf);
      if (t == 0) sPrefix = 0, sMask = 0, sCum = 0.f;
      for (int level = 0; level < 3; level++) {
        const int shift = level == 0 ? 21 : level == 1 ? 10 : 0;
        for (int b = t; b < RADIX_BINS; b += nt) hist[b] = 0, whist[b] = 0.f;
        __syncthreads();
        const u32 prefix = sPrefix, mask = sMask;
        for (int i = t; i < V; i += nt) {
          if (!(w[i] >= 0)) continue;
          const u32 key = order_key(x[i]);
          if ((key & mask) == prefix) {
            const int b = (key >> shift) & RADIX_MASK;
            atomic_add(&hist[b], 1);
            atomic_add(&whist[b], w[i]);
          }
        }
        __syncthreads();
        if (t == 0) {
          float cum = sCum;
          int low = -1, d = RADIX_MASK;
          for (; d >= 0; d--) {
            if (hist[d] == 0) continue;
            low = d;
            if (cum + whist[d] >= target) break;
            cum += whist[d];
          }
          if (d < 0) {
            d = low < 0 ? 0 : low;
            cum -= whist[d];
          }
          sCum = cum;
          sPrefix = prefix | (u32)d << shift;
          sMask = mask | (u32)RADIX_MASK << shift;
        }
        __syncthreads();
      }
      limitKey = sPrefix;
      // the last id kept among the tokens of the boundary key
      float part = 0.f;
      int lastEq = -1;
      for (int i = lo; i < hi; i++)
        if (w[i] >= 0 && order_key(x[i]) == limitKey) part += w[i], lastEq = i;
      float cum = sCum + block_scan_f(part, redf);
      int found = 0x7fffffff;
      for (int i = lo; i < hi; i++) {
        if (!(w[i] >= 0) || order_key(x[i]) != limitKey) continue;
        cum += w[i];
        if (cum >= target) {
          found = i;
          break;
        }
      }
      found = 0x7fffffff - (int)(u32)(block_max_u64((unsigned long long)(u32)(0x7fffffff - found), red64));
      if (found == 0x7fffffff) found = (int)(u32)block_max_u64((unsigned long long)(u32)(lastEq + 1), red64) - 1;
      limitID = found;
    }

    // min-p and the draw: the first kept token, in id order, where the
    // running sum of kept weights passes u times their total
    float part = 0.f;
    int lastKept = -1;
    for (int i = lo; i < hi; i++) {
      const float wi = w[i];
      if (wi > 0 && kept_by(order_key(x[i]), i, limitKey, limitID) && (wi >= minP || i == bestID))
        part += wi, lastKept = i;
    }
    const float total = block_sum(part, redf);
    const float r = uniform(seed, draw) * total;
    float acc = block_scan_f(part, redf);
    int found = 0x7fffffff;
    for (int i = lo; i < hi; i++) {
      const float wi = w[i];
      if (!(wi > 0 && kept_by(order_key(x[i]), i, limitKey, limitID) && (wi >= minP || i == bestID))) continue;
      acc += wi;
      if (r < acc) {
        found = i;
        break;
      }
    }
    found = 0x7fffffff - (int)(u32)(block_max_u64((unsigned long long)(u32)(0x7fffffff - found), red64));
    if (found == 0x7fffffff) {
      const int last = (int)(u32)block_max_u64((unsigned long long)(u32)(lastKept + 1), red64) - 1;
      found = last >= 0 ? last : bestID;
    }
    chosen = found;
  }
  if (t == 0) {
    counts[chosen] += 1;
    config[3] += 1;
    token[0] = chosen;
    status[0] = chosen;
    status[1] = finite ? 0 : 1;
  }
}

// logprobs_row: grid 1, block SAMPLE_THREADS. out[0] = log p(token),
// then the topN most likely tokens (logit descending, id ascending, NaN
// last): ids in top, log-probabilities in out[1:]. log p = l - (m + log z),
// z the float32 sum of exp(l-m) over logits within 87 of the largest m.
extern "C" __global__ void __launch_bounds__(SAMPLE_THREADS)
    logprobs_row(const float* __restrict__ logits, const int* __restrict__ token, float* __restrict__ out,
                 int* __restrict__ top, int V, int topN) {
  pdl_begin();
  __shared__ unsigned long long red64[32];
  __shared__ float redf[32];
  const int t = PETAL_TID_X(), nt = PETAL_NTID_X();
  unsigned long long best = 0;
  for (int i = t; i < V; i += nt) {
    const unsigned long long k = rank_key(logits[i], i);
    best = k > best ? k : best;
  }
  best = block_max_u64(best, red64);
  const float m = logits[rank_id(best)];
  float z = 0.f;
  for (int i = t; i < V; i += nt) {
    const float d = m - logits[i];
    if (d < MAX_SPAN) z += exp_neg(d);
  }
  z = block_sum(z, redf);
  const float lse = m + (float)dlog((double)z);
  const int id = token[0];
  if (t == 0) out[0] = id >= 0 && id < V ? logits[id] - lse : f32_nan();
  unsigned long long prev = ~0ull;
  for (int j = 0; j < topN; j++) {
    unsigned long long b = 0;
    for (int i = t; i < V; i += nt) {
      const unsigned long long k = rank_key(logits[i], i);
      if (k < prev && k > b) b = k;
    }
    b = block_max_u64(b, red64);
    prev = b;
    if (t == 0) {
      const int i = rank_id(b);
      top[j] = i;
      out[1 + j] = logits[i] - lse;
    }
  }
}
