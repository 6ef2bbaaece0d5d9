// sample.metal: the Sample and Logprobs ops (engine/backend ops_sample.go)
// on the device, one threadgroup of SAMPLE_THREADS over a row of logits:
// the sibling of engine/cuda/kernels/sample.cu, following engine/sample's
// Kernel step by step: penalties, greedy choice, weights exp(-(m-x)/T),
// top-k by a radix selection of the k-th order key (three histogram
// passes), top-p by a radix selection over weights, min-p, and the draw
// u·total in id order (seeded splitmix64, float32, no sort). What must run
// in id order (ties at a boundary, the running sums) is done over
// contiguous id ranges, one per thread, joined by a threadgroup scan.
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

// sample_row: grid 1, threadgroup SAMPLE_THREADS. params holds the
// temperature, top-p, min-p, presence, frequency and repetition penalties;
// config the top-k, the seed's low and high words and the draw counter
// (advanced here); counts the tokens chosen so far (the chosen one counted
// here), inPrompt the prompt's tokens. token[0] and status[0] get the id,
// status[1] 1 where a logit was not finite. x and w are V floats of
// scratch: the penalised logits and the candidates' weights (-1 for a
// token that is no candidate).
kernel void sample_row(device const float* logits [[buffer(0)]], device const float* params [[buffer(1)]],
                       device int* config [[buffer(2)]], device int* counts [[buffer(3)]],
                       device const int* inPrompt [[buffer(4)]], device int* token [[buffer(5)]],
                       device int* status [[buffer(6)]], device float* x [[buffer(7)]], device float* w [[buffer(8)]],
                       constant SampleParams& sp [[buffer(9)]], uint tid [[thread_position_in_threadgroup]],
                       uint ntid [[threads_per_threadgroup]]) {
  threadgroup atomic_int hist[RADIX_BINS];
  threadgroup atomic_uint whist[RADIX_BINS];
  threadgroup ulong red64[32];
  threadgroup float redf[32];
  threadgroup int redi[32];
  threadgroup uint sPrefix, sMask;
  threadgroup int sNeed;
  threadgroup float sCum;
  const int t = int(tid), nt = int(ntid), V = sp.V;
  const float T = params[0], topP = params[1], minP = params[2], presence = params[3], frequency = params[4],
              rep = params[5];
  const int topK = config[0];
  const ulong seed = ulong(uint(config[1])) | ulong(uint(config[2])) << 32;
  const ulong draw = ulong(uint(config[3]));
  const bool useRep = rep > 0 && rep != 1;
  const int chunk = (V + nt - 1) / nt, lo = min(V, t * chunk), hi = min(V, lo + chunk);

  // 1-2: penalties, the finite check, the greedy choice
  int bad = 0;
  ulong best = 0;
  for (int i = t; i < V; i += nt) {
    float v = logits[i];
    if (v - v != 0.f) bad = 1;
    const int n = counts[i];
    if (useRep && (n > 0 || inPrompt[i] != 0)) v = v > 0 ? v / rep : v * rep;
    if (n > 0) v -= presence + frequency * float(n);
    x[i] = v;
    const ulong k = rank_key(v, i);
    best = k > best ? k : best;
  }
  // x is device memory, read below by other threads than wrote it
  threadgroup_barrier(mem_flags::mem_device);
  const bool finite = block_sum_int(bad, redi, t, nt) == 0;
  best = block_max_u64(best, red64, t, nt);
  const int bestID = rank_id(best);
  const float m = x[bestID];
  int chosen = bestID;
  if (T > 0 && finite && m - m == 0.f) {
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
