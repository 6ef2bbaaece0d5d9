package sample

import (
	"math"
	"slices"
)

// The sampling computation, in float32, as the Sample op of every backend
// defines it (engine/backend ops_sample.go gives the exact statement; this
// is its implementation, run by the CPU backend and by Sampler):
//
//  1. Penalties, on a copy of the raw logits l: for a token seen in the
//     prompt or generated, x = x/rep when x > 0, else x*rep; then for a
//     generated token, x -= presence + frequency*count.
//  2. Greedy (the largest x, the lower id on ties) when the temperature is
//     0, or when a logit is not finite (the caller refuses such a row).
//  3. Weights w = exp(-(m-x)/T) with m the largest x; tokens with
//     (m-x)/T >= 87 have w = 0 and are never drawn.
//  4. Top-k keeps the k first tokens in the order (x descending, id
//     ascending); top-p then keeps the shortest prefix of what is left, in
//     that order, whose weight reaches top-p times the weight of all that is
//     left; min-p keeps tokens with w >= min-p (the best token has w = 1).
//  5. With u the draw-th number of the seed's stream (Uniform), the chosen
//     id is the first kept token, in id order, at which the running sum of
//     kept weights exceeds u times their total.
//
// Nothing here sorts the vocabulary: top-k and top-p find their boundary by
// a radix selection over the ordered bits of x (three passes of histograms,
// counts for top-k and weights for top-p), then take the ties at the
// boundary value in id order.

// Settings are Params as the sampling op reads them: float32.
type Settings struct {
	Temperature, TopP, MinP         float32
	Presence, Frequency, Repetition float32
	TopK                            int32
	Seed                            uint64
}

// Settings converts resolved parameters to the op's float32 settings.
func (p Params) Settings() Settings {
	return Settings{
		Temperature: float32(p.Temperature), TopP: float32(p.TopP), MinP: float32(p.MinP),
		Presence: float32(p.PresencePenalty), Frequency: float32(p.FrequencyPenalty),
		Repetition: float32(p.RepetitionPenalty), TopK: int32(min(max(p.TopK, -1), math.MaxInt32)), Seed: p.Seed,
	}
}

// Penalised reports whether the settings change any logit.
func (s *Settings) Penalised() bool {
	return s.Repetition > 0 && s.Repetition != 1 || s.Presence != 0 || s.Frequency != 0
}

// Uniform is the draw-th number (from 0) of seed's stream, in [0, 1): the
// (draw+1)-th output of splitmix64 started at seed, its top 24 bits over
// 2^24. Integer arithmetic modulo 2^64 only, so every device draws the same.
func Uniform(seed, draw uint64) float32 {
	z := seed + (draw+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float32(z>>40) * (1.0 / (1 << 24))
}

// maxSpan is the (m-x)/T beyond which a token weighs 0: exp(-87) is just
// above float32's smallest normal number, so no device rounds it
// differently (subnormals flush to zero on GPUs).
const maxSpan = 87

// Kernel is the sampling computation with its scratch memory; one Kernel
// serves one row at a time and allocates nothing once warmed up.
type Kernel struct {
	x           []float32 // penalised logits
	ids         []int32   // candidates, in id order
	w           []float32 // their weights
	keys        []uint32  // their order keys
	top         []int32   // top-k by insertion, best first
	sub, merged []int32
	hist        [1 << radixBits]float32
	cnt         [1 << radixBits]int32
}

// Choose returns the sampled id of a row of raw logits, and whether every
// logit was finite. counts[i] is how often token i was generated and
// inPrompt[i] is nonzero when it appears in the prompt; both may be nil when
// no penalty applies. u is the uniform number of this draw.
func (k *Kernel) Choose(logits []float32, counts, inPrompt []int32, p *Settings, u float32) (int32, bool) {
	x := logits
	var finite bool
	var best int32
	if p.Penalised() && counts != nil {
		k.x = grow(k.x, len(logits))
		x = k.x
		finite = penalise(x, logits, counts, inPrompt, p)
		best = Argmax(x)
	} else {
		best, finite = argmaxFinite(logits)
	}
	m, T := x[best], p.Temperature
	if !(T > 0) || !finite || isNonFinite(m) {
		return best, finite
	}
	ids, w := k.candidates(x, m, p)
	keys := k.keys[:len(ids)]
	for j, id := range ids {
		keys[j] = orderKey(x[id])
	}
	// top-p: the boundary in the order (x desc, id asc) where the weight reaches top-p
	limitKey, limitID := uint32(0), int32(math.MaxInt32)
	if p.TopP > 0 && p.TopP < 1 {
		var z float32
		for _, v := range w {
			z += v
		}
		limitKey, limitID = k.boundary(ids, w, keys, p.TopP*z)
	}
	var total float32
	for j, v := range w {
		if kept(keys[j], ids[j], limitKey, limitID) && (v >= p.MinP || ids[j] == best) {
			total += v
		}
	}
	r := u * total
	var acc float32
	last := best
	for j, v := range w {
		if !kept(keys[j], ids[j], limitKey, limitID) || !(v >= p.MinP || ids[j] == best) || v == 0 {
			continue
		}
		acc += v
		last = ids[j]
		if r < acc {
			return ids[j], true
		}
	}
	return last, true
}

func kept(key uint32, id int32, limitKey uint32, limitID int32) bool {
	return key > limitKey || key == limitKey && id <= limitID
}

// argmaxFinite is Argmax and Finite in one pass.
func argmaxFinite(x []float32) (int32, bool) {
	best := 0
	var acc float32
	for i, v := range x {
		acc += v - v
		if above(v, x[best]) {
			best = i
		}
	}
	return int32(best), acc == 0
}

// penalise writes the penalised logits of src into dst (see Choose) and
// reports whether src was finite.
func penalise(dst, src []float32, counts, inPrompt []int32, p *Settings) bool {
	rep := p.Repetition
	useRep := rep > 0 && rep != 1
	var acc float32
	counts, inPrompt = counts[:len(src)], inPrompt[:len(src)]
	for i, v := range src {
		acc += v - v
		n := counts[i]
		if useRep && (n > 0 || inPrompt[i] != 0) {
			if v > 0 {
				v /= rep
			} else {
				v *= rep
			}
		}
		if n > 0 {
			v -= p.Presence + p.Frequency*float32(n)
		}
		dst[i] = v
	}
	return acc == 0
}

// candidates gathers the tokens that can be drawn after top-k, in id order,
// with their weights.
func (k *Kernel) candidates(x []float32, m float32, p *Settings) ([]int32, []float32) {
	T := p.Temperature
	V := len(x)
	if K := int(p.TopK); K > 0 && K < V {
		ids := k.topK(x, K)
		k.w, k.keys = grow(k.w, len(ids)), growKeys(k.keys, len(ids))
		for j, id := range ids {
			k.w[j] = weight(x[id], m, T)
		}
		return ids, k.w
	}
	k.ids, k.w, k.keys = growIDs(k.ids, V), grow(k.w, V), growKeys(k.keys, V)
	span := float32(maxSpan)
	if p.MinP > 0 && !(p.TopP > 0 && p.TopP < 1) {
		// min-p alone: a token beyond -log(min-p) (with a margin over the
		// rounding of exp) cannot reach w >= min-p, so needs no weight
		span = min(span, float32(-math.Log(float64(p.MinP))*(1+1e-5)+1e-5))
	}
	n := 0
	for i, v := range x {
		if d := (m - v) / T; d < span {
			k.ids[n] = int32(i)
			k.w[n] = expNeg(d)
			n++
		}
	}
	return k.ids[:n], k.w[:n]
}

func weight(v, m, T float32) float32 {
	if d := (m - v) / T; d < maxSpan {
		return expNeg(d)
	}
	return 0
}

// topK returns the K best tokens of x in the order (x desc, id asc), as a
// list in id order.
func (k *Kernel) topK(x []float32, K int) []int32 {
	if K <= 256 {
		// a sorted list of the K best: one pass, rarely an insertion
		top := k.top[:0]
		for i, v := range x {
			if len(top) == K && !(v > x[top[K-1]]) {
				continue
			}
			pos, _ := slices.BinarySearchFunc(top, v, func(id int32, v float32) int {
				if x[id] >= v { // equal values: the earlier id stays first
					return -1
				}
				return 1
			})
			if len(top) < K {
				top = append(top, 0)
			}
			copy(top[pos+1:], top[pos:len(top)-1])
			top[pos] = int32(i)
		}
		k.top = top
		k.ids = append(k.ids[:0], top...)
		slices.Sort(k.ids)
		return k.ids
	}
	// radix selection of the K-th key, counting: the first digit over the
	// row, the others over the tokens of the boundary digit only
	clear(k.cnt[:])
	for _, v := range x {
		k.cnt[orderKey(v)>>radixShifts[0]]++
	}
	need := int32(K)
	d := radixMask
	for ; d > 0 && k.cnt[d] < need; d-- {
		need -= k.cnt[d]
	}
	above, edge := k.ids[:0], k.sub[:0]
	for i, v := range x {
		switch digit := int(orderKey(v) >> radixShifts[0]); {
		case digit > d:
			above = append(above, int32(i))
		case digit == d:
			edge = append(edge, int32(i))
		}
	}
	prefix, mask := uint32(d)<<radixShifts[0], uint32(radixMask)<<radixShifts[0]
	for _, shift := range radixShifts[1:] {
		clear(k.cnt[:])
		for _, id := range edge {
			if key := orderKey(x[id]); key&mask == prefix {
				k.cnt[key>>shift&radixMask]++
			}
		}
		d := radixMask
		for ; d > 0 && k.cnt[d] < need; d-- {
			need -= k.cnt[d]
		}
		prefix |= uint32(d) << shift
		mask |= radixMask << shift
	}
	won := edge[:0]
	for _, id := range edge {
		if key := orderKey(x[id]); key > prefix || key == prefix && need > 0 {
			if key == prefix {
				need--
			}
			won = append(won, id)
		}
	}
	k.ids, k.sub = above, edge
	// both lists are in id order: merge them
	k.merged = append(k.merged[:0], above...)
	k.merged = append(k.merged, won...)
	slices.Sort(k.merged)
	return k.merged
}

// boundary finds where the weight of the candidates, taken in the order
// (key desc, id asc), first reaches target: the key there and, among the
// tokens of that key, the last id kept.
func (k *Kernel) boundary(ids []int32, w []float32, keys []uint32, target float32) (uint32, int32) {
	prefix, mask := uint32(0), uint32(0)
	var cum float32
	for _, shift := range radixShifts {
		clear(k.hist[:])
		clear(k.cnt[:])
		for j, key := range keys {
			if key&mask == prefix {
				k.hist[key>>shift&radixMask] += w[j]
				k.cnt[key>>shift&radixMask]++
			}
		}
		low := -1 // the lowest digit holding a token: where rounding leaves us short
		d := radixMask
		for ; d >= 0; d-- {
			if k.cnt[d] == 0 {
				continue
			}
			low = d
			if cum+k.hist[d] >= target {
				break
			}
			cum += k.hist[d]
		}
		if d < 0 {
			d = low
			cum -= k.hist[d]
		}
		prefix |= uint32(d) << shift
		mask |= radixMask << shift
	}
	last := int32(-1)
	for j, key := range keys {
		if key == prefix {
			last = ids[j]
			if cum += w[j]; cum >= target {
				break
			}
		}
	}
	return prefix, last
}

// radix selection digits: 11, 11 and 10 bits of the 32-bit key.
const (
	radixBits = 11
	radixMask = 1<<radixBits - 1
)

var radixShifts = [3]int{21, 10, 0}

// orderKey maps a float32 to a uint32 with the same order (for non-NaN
// values): the sign bit flipped for positives, all bits for negatives.
func orderKey(v float32) uint32 {
	b := math.Float32bits(v)
	return b ^ (uint32(int32(b)>>31) | 1<<31)
}

// Finite reports whether a row holds no NaN and no infinity. One pass: v-v
// is 0 for every finite v and NaN otherwise.
func Finite(row []float32) bool {
	var acc float32
	for _, v := range row {
		acc += v - v
	}
	return acc == 0
}

// Logprobs sets out[0] to the log-probability of id under softmax(logits)
// and, for the len(top) most likely tokens (logit descending, id ascending,
// NaN last), top[j] to the id and out[1+j] to its log-probability. In
// float32: log-probabilities are l - (m + log Σ exp(l-m)), the sum taken in
// id order over the tokens within 87 of the largest logit m.
func (k *Kernel) Logprobs(logits []float32, id int32, top []int32, out []float32) {
	m := logits[Argmax(logits)]
	var z float32
	for _, v := range logits {
		if d := m - v; d < maxSpan {
			z += expNeg(d)
		}
	}
	lse := m + float32(math.Log(float64(z)))
	out[0] = logits[id] - lse
	if len(top) == 0 {
		return
	}
	best := k.top[:0]
	n := len(top)
	for i, v := range logits {
		if len(best) == n && !above(v, logits[best[n-1]]) {
			continue
		}
		pos := 0
		for pos < len(best) && !above(v, logits[best[pos]]) {
			pos++
		}
		if len(best) < n {
			best = append(best, 0)
		}
		copy(best[pos+1:], best[pos:len(best)-1])
		best[pos] = int32(i)
	}
	k.top = best
	for j := range top {
		if j < len(best) {
			top[j], out[1+j] = best[j], logits[best[j]]-lse
		}
	}
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func growIDs(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

func growKeys(b []uint32, n int) []uint32 {
	if cap(b) < n {
		return make([]uint32, n)
	}
	return b[:n]
}

// expNeg is exp(-d) for 0 <= d < 87, rounded to float32 (within a unit in
// the last place of the float32 exp): 2^(n+f) with n = round(-d·log2 e)
// and 2^f, |f| <= 1/2, from its degree-7 Taylor polynomial in float64
// (truncation error below 1e-8, relative).
func expNeg(d float32) float32 {
	t := -float64(d) * math.Log2E
	n := -int64(-t + 0.5)
	f := (t - float64(n)) * math.Ln2
	p := 1 + f*(1+f*(1.0/2+f*(1.0/6+f*(1.0/24+f*(1.0/120+f*(1.0/720+f*(1.0/5040)))))))
	return float32(p * math.Float64frombits(uint64(n+1023)<<52))
}
