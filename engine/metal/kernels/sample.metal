// sample.metal: the Sample and Logprobs ops (engine/backend ops_sample.go)
// on the device, the sibling of engine/cuda/kernels/sample.cu, following
// engine/sample's Kernel step by step: penalties, greedy choice, weights
// exp(-(m-x)/T), top-k by a radix selection of the k-th order key (three
// histogram passes), top-p by a radix selection over weights, min-p, and
// the draw u·total in id order (seeded splitmix64, float32, no sort of the
// vocabulary). sample_prep's threadgroups penalise the row and find its
// best token; sample_row, one threadgroup of SAMPLE_THREADS, does the
// rest. What must run in id order (ties at a boundary, the running sums)
// is done over contiguous id ranges, one per thread, joined by a
// threadgroup scan; with a top-k of at most SAMPLE_FAST_K, the top-k fast
// path does it over the k best only, by one thread, in the host's order.
//
// Where sample.cu takes a weight from a float64 series rounded to float32
// (engine/sample's expNeg), this one computes it in float32 (exp_acc,
// about 2 units in the last place): Apple GPUs have no float64. A choice
// can then differ from the CPU's only at a near-tie (a boundary within
// that rounding of a partial sum), which the conformance suite allows. The
// weight histogram adds floats in threadgroup memory with a
// compare-and-swap loop (Metal's threadgroup atomics are integer), as
// sample.cu adds them with atomics: in no fixed order.
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "rowmath.h"

#define SAMPLE_THREADS 1024
#define RADIX_BITS 11
#define RADIX_BINS (1 << RADIX_BITS)
#define RADIX_MASK (RADIX_BINS - 1)
#define MAX_SPAN 87.f

// order_key maps a float to a uint of the same order (for non-NaN values).
static inline uint order_key(float v) {
  const uint b = as_type<uint>(v);
  return b ^ (uint(int(b) >> 31) | 0x80000000u);
}

// rank_key orders values for a choice: larger first, NaN last, -0 as +0,
// then the lower id; the largest rank_key is the best token.
static inline ulong rank_key(float v, int id) {
  const uint ord = is_nan(v) ? 0u : order_key(v + 0.f);
  return ulong(ord) << 32 | ulong(0xffffffffu - uint(id));
}
static inline int rank_id(ulong k) { return int(0xffffffffu - uint(k)); }

// exp_neg is exp(-d) for 0 <= d < 87 (engine/sample's expNeg, in float32).
static inline float exp_neg(float d) { return exp_acc(-d); }

// uniform is engine/sample's Uniform: splitmix64, 24 bits.
static inline float uniform(ulong seed, ulong draw) {
  ulong z = seed + (draw + 1) * 0x9e3779b97f4a7c15ul;
  z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ul;
  z = (z ^ z >> 27) * 0x94d049bb133111ebul;
  z ^= z >> 31;
  return float(z >> 40) * (1.f / 16777216.f);
}

static inline bool kept_by(uint key, int id, uint limitKey, int limitID) {
  return key > limitKey || (key == limitKey && id <= limitID);
}

// atomic_add_f adds v to the float whose bits *p holds.
static inline void atomic_add_f(threadgroup atomic_uint* p, float v) {
  uint old = atomic_load_explicit(p, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(p, &old, as_type<uint>(as_type<float>(old) + v), memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}
static inline float atomic_get_f(threadgroup atomic_uint* p) {
  return as_type<float>(atomic_load_explicit(p, memory_order_relaxed));
}

// sample_prep: grid SAMPLE_PARTS, threadgroup SAMPLE_PREP_THREADS: steps
// 1-2 of sample_row spread over the GPU, as sample.cu's. It writes the
// penalised logits to x and, per threadgroup, the largest rank_key and
// whether a logit was not finite to part[2b], part[2b+1]; sample_row
// reduces them.
#define SAMPLE_PARTS 128
#define SAMPLE_PREP_THREADS 256

// The top-k fast path (a top-k of at most SAMPLE_FAST_K, a vocabulary of
// at most SAMPLE_PARTS * SAMPLE_SLICE), sample.cu's: each sample_prep
// threadgroup sorts the keys of the tokens it penalised and leaves its best
// k in cand (its SAMPLE_FAST_K slots); sample_row takes the k best of
// those SAMPLE_PARTS lists, and one thread does engine/sample's arithmetic
// over them in its order, with no pass over the vocabulary.
#define SAMPLE_FAST_K 64
#define SAMPLE_ROUNDS 8
#define SAMPLE_SLICE (SAMPLE_ROUNDS * SAMPLE_PREP_THREADS)
// sample.cu sorts all SAMPLE_PARTS * k candidates at once (64 KiB of keys
// at k = 64); Metal has 32 KiB of threadgroup memory, which the general
// path's histograms already half fill, so sample_row sorts them in rounds
// of SAMPLE_FAST_BUF keys, each keeping the best so far in front.
#define SAMPLE_FAST_BUF 1024
static_assert(RADIX_BINS * 8 + SAMPLE_FAST_BUF * 8 + 32 * 16 + 16 <= 32768,
              "sample_row exceeds Metal's 32 KiB of threadgroup memory");
static_assert(SAMPLE_SLICE * 8 + 32 * 12 <= 32768, "sample_prep exceeds Metal's 32 KiB of threadgroup memory");

// (on: the backend's sampler=topk; off, sample_row's general path always)
static inline bool sample_fast(int on, float T, int K, int V) {
  return on != 0 && T > 0 && K > 0 && K <= SAMPLE_FAST_K && K < V && V <= SAMPLE_PARTS * SAMPLE_SLICE;
}

// bitonic_desc sorts n (a power of two) keys in threadgroup memory, largest
// first; every thread of the threadgroup calls it.
static inline void bitonic_desc(threadgroup ulong* s, int n, int t, int nt) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = t; i < n; i += nt) {
        const int p = i ^ j;
        if (p > i) {
          const ulong a = s[i], b = s[p];
          if ((i & k) == 0 ? a < b : a > b) s[i] = b, s[p] = a;
        }
      }
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
}

// sample_prep's buffers: logits, params, config, counts and inPrompt as
// sample_row's comment says; x (V floats), part (2 * SAMPLE_PARTS) and cand
// (SAMPLE_PARTS * SAMPLE_FAST_K keys) are sample_row's scratch.
kernel void sample_prep(device const float* logits [[buffer(0)]], device const float* params [[buffer(1)]],
                        device const int* config [[buffer(2)]], device const int* counts [[buffer(3)]],
                        device const int* inPrompt [[buffer(4)]], device float* x [[buffer(5)]],
                        device ulong* part [[buffer(6)]], device ulong* cand [[buffer(7)]],
                        constant SampleParams& sp [[buffer(8)]], uint tid [[thread_position_in_threadgroup]],
                        uint ntid [[threads_per_threadgroup]], uint bid [[threadgroup_position_in_grid]],
                        uint groups [[threadgroups_per_grid]]) {
  threadgroup ulong red64[32];
  threadgroup int redi[32];
  threadgroup ulong keys[SAMPLE_SLICE];
  const int t = int(tid), nt = int(ntid), b = int(bid), V = sp.V;
  const float presence = params[3], frequency = params[4], rep = params[5];
  const bool useRep = rep > 0 && rep != 1;
  const int K = config[0];
  const bool fast = sample_fast(sp.fastOn, params[0], K, V);
  int bad = 0;
  ulong best = 0;
  const int stride = int(groups) * nt;
  int r = 0;
  for (int i = b * nt + t; i < V; i += stride, r++) {
    float v = logits[i];
    if (v - v != 0.f) bad = 1;
    const int n = counts[i];
    if (useRep && (n > 0 || inPrompt[i] != 0)) v = v > 0 ? v / rep : v * rep;
    if (n > 0) v -= presence + frequency * float(n);
    x[i] = v;
    const ulong k = rank_key(v, i);
    best = k > best ? k : best;
    if (fast) keys[r * SAMPLE_PREP_THREADS + t] = k;
  }
  bad = block_sum_int(bad, redi, t, nt);
  best = block_max_u64(best, red64, t, nt);
  if (t == 0) part[2 * b] = best, part[2 * b + 1] = ulong(bad);
  if (!fast) return;
  for (; r < SAMPLE_ROUNDS; r++) keys[r * SAMPLE_PREP_THREADS + t] = 0;  // below every token's key
  threadgroup_barrier(mem_flags::mem_threadgroup);
  bitonic_desc(keys, SAMPLE_SLICE, t, nt);
  for (int j = t; j < K; j += nt) cand[b * SAMPLE_FAST_K + j] = keys[j];
}

// sample_fast_choose is engine/sample's Kernel.Choose after its top-k, for
// the k best keys (best, in any order) of the penalised logits x, by one
// thread: the candidates in id order, their weights, top-p's boundary
// (its digit sums as the host's, in id order), min-p and the draw; r01 is
// the draw's uniform number. The weights are the general path's (exp_neg).
static int sample_fast_choose(const threadgroup ulong* best, int K, device const float* x, float m, int bestID, float T,
                              float topP, float minP, float r01) {
  int ids[SAMPLE_FAST_K];
  float w[SAMPLE_FAST_K];
  uint keys[SAMPLE_FAST_K];
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
  uint limitKey = 0;
  int limitID = 0x7fffffff;
  if (topP > 0 && topP < 1) {
    float z = 0.f;
    for (int j = 0; j < K; j++) z += w[j];
    const float target = topP * z;
    // boundary: the digit sums of the tokens under the prefix, each in id
    // order, walked from the largest digit
    uint prefix = 0, mask = 0;
    float cum = 0.f;
    uint dg[SAMPLE_FAST_K];
    float hs[SAMPLE_FAST_K];
    for (int level = 0; level < 3; level++) {
      const int shift = level == 0 ? 21 : level == 1 ? 10 : 0;
      int nd = 0;
      for (int j = 0; j < K; j++) {
        if ((keys[j] & mask) != prefix) continue;
        const uint d = (keys[j] >> shift) & RADIX_MASK;
        int k = 0;
        while (k < nd && dg[k] != d) k++;
        if (k == nd) dg[nd] = d, hs[nd] = 0.f, nd++;
        hs[k] += w[j];
      }
      int low = -1, at = -1;
      uint above = RADIX_MASK + 1;  // digits taken so far are those >= above
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
      mask |= uint(RADIX_MASK) << shift;
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

// sample_row: grid 1, threadgroup SAMPLE_THREADS, after sample_prep. params
// holds the temperature, top-p, min-p, presence, frequency and repetition
// penalties; config the top-k, the seed's low and high words and the draw
// counter (advanced here); counts the tokens chosen so far (the chosen one
// counted here), inPrompt (sample_prep's) the prompt's tokens. token[0] and
// status[0] get the id, status[1] 1 where a logit was not finite. x and w
// are V floats of scratch: the penalised logits (from sample_prep) and the
// candidates' weights (-1 for a token that is no candidate); part and cand
// are sample_prep's.
kernel void sample_row(device const float* params [[buffer(0)]], device int* config [[buffer(1)]],
                       device int* counts [[buffer(2)]], device int* token [[buffer(3)]],
                       device int* status [[buffer(4)]], device const float* x [[buffer(5)]],
                       device float* w [[buffer(6)]], device const ulong* part [[buffer(7)]],
                       device const ulong* cand [[buffer(8)]], constant SampleParams& sp [[buffer(9)]],
                       uint tid [[thread_position_in_threadgroup]], uint ntid [[threads_per_threadgroup]]) {
  threadgroup atomic_int hist[RADIX_BINS];
  threadgroup atomic_uint whist[RADIX_BINS];
  threadgroup ulong fastKeys[SAMPLE_FAST_BUF];  // for the top-k fast path
  threadgroup ulong red64[32];
  threadgroup float redf[32];
  threadgroup int redi[32];
  threadgroup uint sPrefix, sMask;
  threadgroup int sNeed;
  threadgroup float sCum;
  const int t = int(tid), nt = int(ntid), V = sp.V;
  const float T = params[0], topP = params[1], minP = params[2];
  const int topK = config[0];
  const ulong seed = ulong(uint(config[1])) | ulong(uint(config[2])) << 32;
  const ulong draw = ulong(uint(config[3]));
  const int chunk = (V + nt - 1) / nt, lo = min(V, t * chunk), hi = min(V, lo + chunk);

  // 1-2: penalties, the finite check, the greedy choice (sample_prep's
  // parts)
  int bad = 0;
  ulong best = 0;
  for (int i = t; i < SAMPLE_PARTS; i += nt) {
    best = part[2 * i] > best ? part[2 * i] : best;
    bad |= part[2 * i + 1] != 0 ? 1 : 0;
  }
  const bool finite = block_sum_int(bad, redi, t, nt) == 0;
  best = block_max_u64(best, red64, t, nt);
  const int bestID = rank_id(best);
  const float m = x[bestID];
  int chosen = bestID;
  if (T > 0 && finite && m - m == 0.f && sample_fast(sp.fastOn, T, topK, V)) {
    // the k best of the sample_prep threadgroups' k best: rounds that each
    // sort the best kept so far (in front) and the next candidates, padded
    // with zeros (below every token's key); then the host's arithmetic
    // over them (sample_fast_choose)
    const int n = SAMPLE_PARTS * topK;
    int size = 1, keep = 1;
    while (size < min(n, SAMPLE_FAST_BUF)) size <<= 1;
    while (keep < topK) keep <<= 1;
    for (int taken = 0, from = 0; taken < n; from = keep) {
      for (int i = from + t; i < size; i += nt) {
        const int c = taken + i - from;
        fastKeys[i] = c < n ? cand[(c / topK) * SAMPLE_FAST_K + c % topK] : 0ul;
      }
      taken += size - from;
      threadgroup_barrier(mem_flags::mem_threadgroup);
      bitonic_desc(fastKeys, size, t, nt);
    }
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
        for (int b = t; b < RADIX_BINS; b += nt) atomic_store_explicit(&hist[b], 0, memory_order_relaxed);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint prefix = sPrefix, mask = sMask;
        for (int i = t; i < V; i += nt) {
          const uint key = order_key(x[i]);
          if ((key & mask) == prefix) atomic_fetch_add_explicit(&hist[(key >> shift) & RADIX_MASK], 1, memory_order_relaxed);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (t == 0) {
          int need = sNeed, d = RADIX_MASK;
          for (; d > 0; d--) {
            const int c = atomic_load_explicit(&hist[d], memory_order_relaxed);
            if (c >= need) break;
            need -= c;
          }
          sNeed = need;
          sPrefix = prefix | uint(d) << shift;
          sMask = mask | uint(RADIX_MASK) << shift;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
      }
      const uint P = sPrefix;
      const int need = sNeed;
      // the tokens at the boundary key count in id order
      int eq = 0;
      for (int i = lo; i < hi; i++) eq += order_key(x[i]) == P ? 1 : 0;
      int rank = block_scan_int(eq, redi, t, nt);
      for (int i = lo; i < hi; i++) {
        const uint key = order_key(x[i]);
        bool cand = key > P;
        if (key == P) cand = rank++ < need;
        const float d = (m - x[i]) / T;
        w[i] = cand ? (d < MAX_SPAN ? exp_neg(d) : 0.f) : -1.f;
      }
    }
    threadgroup_barrier(mem_flags::mem_device);

    // top-p: the boundary (key, last id) where the weight in the order
    // (key desc, id asc) reaches topP times the candidates' total
    uint limitKey = 0;
    int limitID = 0x7fffffff;
    if (topP > 0 && topP < 1) {
      float z = 0.f;
      for (int i = t; i < V; i += nt)
        if (w[i] >= 0) z += w[i];
      const float target = topP * block_sum(z, redf, t, nt);
      if (t == 0) sPrefix = 0, sMask = 0, sCum = 0.f;
      for (int level = 0; level < 3; level++) {
        const int shift = level == 0 ? 21 : level == 1 ? 10 : 0;
        for (int b = t; b < RADIX_BINS; b += nt) {
          atomic_store_explicit(&hist[b], 0, memory_order_relaxed);
          atomic_store_explicit(&whist[b], 0u, memory_order_relaxed);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint prefix = sPrefix, mask = sMask;
        for (int i = t; i < V; i += nt) {
          if (!(w[i] >= 0)) continue;
          const uint key = order_key(x[i]);
          if ((key & mask) == prefix) {
            const int b = (key >> shift) & RADIX_MASK;
            atomic_fetch_add_explicit(&hist[b], 1, memory_order_relaxed);
            atomic_add_f(&whist[b], w[i]);
          }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (t == 0) {
          float cum = sCum;
          int low = -1, d = RADIX_MASK;
          for (; d >= 0; d--) {
            if (atomic_load_explicit(&hist[d], memory_order_relaxed) == 0) continue;
            low = d;
            const float wd = atomic_get_f(&whist[d]);
            if (cum + wd >= target) break;
            cum += wd;
          }
          if (d < 0) {
            d = low < 0 ? 0 : low;
            cum -= atomic_get_f(&whist[d]);
          }
          sCum = cum;
          sPrefix = prefix | uint(d) << shift;
          sMask = mask | uint(RADIX_MASK) << shift;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
      }
      limitKey = sPrefix;
      // the last id kept among the tokens of the boundary key
      float part = 0.f;
      int lastEq = -1;
      for (int i = lo; i < hi; i++)
        if (w[i] >= 0 && order_key(x[i]) == limitKey) part += w[i], lastEq = i;
      float cum = sCum + block_scan_f(part, redf, t, nt);
      int found = 0x7fffffff;
      for (int i = lo; i < hi; i++) {
        if (!(w[i] >= 0) || order_key(x[i]) != limitKey) continue;
        cum += w[i];
        if (cum >= target) {
          found = i;
          break;
        }
      }
      found = 0x7fffffff - int(uint(block_max_u64(ulong(uint(0x7fffffff - found)), red64, t, nt)));
      if (found == 0x7fffffff) found = int(uint(block_max_u64(ulong(uint(lastEq + 1)), red64, t, nt))) - 1;
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
    const float total = block_sum(part, redf, t, nt);
    const float r = uniform(seed, draw) * total;
    float acc = block_scan_f(part, redf, t, nt);
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
    found = 0x7fffffff - int(uint(block_max_u64(ulong(uint(0x7fffffff - found)), red64, t, nt)));
    if (found == 0x7fffffff) {
      const int last = int(uint(block_max_u64(ulong(uint(lastKept + 1)), red64, t, nt))) - 1;
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

// logprobs_row: grid 1, threadgroup SAMPLE_THREADS. out[0] = log p(token),
// then the topN most likely tokens (logit descending, id ascending, NaN
// last): ids in top, log-probabilities in out[1:]. log p = l - (m + log z),
// z the float32 sum of exp(l-m) over logits within 87 of the largest m
// (log in float32, where sample.cu's is float64).
kernel void logprobs_row(device const float* logits [[buffer(0)]], device const int* token [[buffer(1)]],
                         device float* out [[buffer(2)]], device int* top [[buffer(3)]],
                         constant LogprobsParams& p [[buffer(4)]], uint tid [[thread_position_in_threadgroup]],
                         uint ntid [[threads_per_threadgroup]]) {
  threadgroup ulong red64[32];
  threadgroup float redf[32];
  const int t = int(tid), nt = int(ntid), V = p.V;
  ulong best = 0;
  for (int i = t; i < V; i += nt) {
    const ulong k = rank_key(logits[i], i);
    best = k > best ? k : best;
  }
  best = block_max_u64(best, red64, t, nt);
  const float m = logits[rank_id(best)];
  float z = 0.f;
  for (int i = t; i < V; i += nt) {
    const float d = m - logits[i];
    if (d < MAX_SPAN) z += exp_neg(d);
  }
  z = block_sum(z, redf, t, nt);
  const float lse = m + log(z);
  const int id = token[0];
  if (t == 0) out[0] = id >= 0 && id < V ? logits[id] - lse : f32_nan();
  ulong prev = ~0ul;
  for (int j = 0; j < p.topN; j++) {
    ulong b = 0;
    for (int i = t; i < V; i += nt) {
      const ulong k = rank_key(logits[i], i);
      if (k < prev && k > b) b = k;
    }
    b = block_max_u64(b, red64, t, nt);
    prev = b;
    if (t == 0) {
      const int i = rank_id(b);
      top[j] = i;
      out[1 + j] = logits[i] - lse;
    }
  }
}
