// Package sample chooses the next token from a row of logits.
//
// Order of operations (documented because engines differ): repetition,
// presence and frequency penalties on the raw logits; then greedy when the
// temperature is 0; otherwise divide by the temperature, keep the top-k
// tokens, then the smallest set whose probability reaches top-p, then drop
// tokens whose probability is below min-p times the most likely one's, and
// draw from what is left with the seeded generator.
package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Params are resolved sampling settings (request, else the model's
// generation_config.json, else these neutral values).
type Params struct {
	Temperature       float64 // 0: greedy
	TopK              int     // <= 0: off
	TopP              float64 // >= 1: off
	MinP              float64 // <= 0: off
	PresencePenalty   float64 // OpenAI: subtracted once from every token already generated
	FrequencyPenalty  float64 // OpenAI: subtracted per occurrence in the generated text
	RepetitionPenalty float64 // HF/CTRL: divides positive (multiplies negative) logits of seen tokens; 1: off
	Seed              uint64
}

// Sampler draws tokens for one generation; it remembers what was generated
// (for the penalties) and owns its random stream, so a seed reproduces.
type Sampler struct {
	p         Params
	rng       *rand.Rand
	generated map[int32]int // occurrences in the output
	seen      map[int32]bool
	cand      []candidate
	probs     []float64
	hist      []float64
}

type candidate struct {
	id    int32
	logit float64
}

// New returns a sampler; prompt tokens count as seen for the repetition
// penalty only (as in transformers and vLLM).
func New(p Params, prompt []int32) *Sampler {
	s := &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15)),
		generated: map[int32]int{}, seen: map[int32]bool{}}
	for _, t := range prompt {
		s.seen[t] = true
	}
	return s
}

// Accept records a generated token.
func (s *Sampler) Accept(t int32) {
	s.generated[t]++
	s.seen[t] = true
}

// Next chooses a token from logits, which it may modify (penalties). A row
// with NaN or infinite logits never panics (callers should refuse such a
// row, it means damaged weights): NaN ranks below every number, and when
// the best logit is not finite the choice is greedy.
func (s *Sampler) Next(logits []float32) int32 {
	s.penalise(logits)
	best := Argmax(logits)
	if s.p.Temperature <= 0 || isNonFinite(logits[best]) {
		return best
	}
	c := s.candidates(logits)
	// softmax over the candidates (sorted, best first)
	top := c[0].logit
	var z float64
	if cap(s.probs) < len(c) {
		s.probs = make([]float64, len(c))
	}
	probs := s.probs[:len(c)]
	for i := range c {
		probs[i] = math.Exp(c[i].logit - top)
		z += probs[i]
	}
	n := len(c)
	if s.p.TopP > 0 && s.p.TopP < 1 {
		var cum float64
		for i := range n {
			cum += probs[i] / z
			if cum >= s.p.TopP {
				n = i + 1
				break
			}
		}
	}
	if s.p.MinP > 0 {
		for i := 1; i < n; i++ {
			if probs[i] < s.p.MinP*probs[0] {
				n = i
				break
			}
		}
	}
	var total float64
	for i := range n {
		total += probs[i]
	}
	r := s.rng.Float64() * total
	for i := range n {
		r -= probs[i]
		if r < 0 {
			return c[i].id
		}
	}
	return c[n-1].id
}

func (s *Sampler) penalise(logits []float32) {
	if rp := s.p.RepetitionPenalty; rp > 0 && rp != 1 {
		for t := range s.seen {
			if logits[t] > 0 {
				logits[t] = float32(float64(logits[t]) / rp)
			} else {
				logits[t] = float32(float64(logits[t]) * rp)
			}
		}
	}
	if s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0 {
		for t, n := range s.generated {
			logits[t] -= float32(s.p.PresencePenalty + s.p.FrequencyPenalty*float64(n))
		}
	}
}

// candidates returns the tokens that survive top-k, best first, with
// temperature-scaled logits.
func (s *Sampler) candidates(logits []float32) []candidate {
	k := s.p.TopK
	if k <= 0 || k > len(logits) {
		k = len(logits)
	}
	c := s.cand[:0]
	if k < len(logits) {
		// keep a small sorted list of the k best (k is typically 20-40)
		for i, v := range logits {
			if v != v || len(c) == k && float64(v) <= c[k-1].logit {
				continue // NaN is never a candidate
			}
			pos := sort.Search(len(c), func(j int) bool { return c[j].logit < float64(v) })
			if len(c) < k {
				c = append(c, candidate{})
			}
			copy(c[pos+1:], c[pos:len(c)-1])
			c[pos] = candidate{int32(i), float64(v)}
		}
	} else {
		floor := s.nucleusFloor(logits)
		for i, v := range logits {
			if float64(v) >= floor {
				c = append(c, candidate{int32(i), float64(v)})
			}
		}
		slices.SortFunc(c, func(a, b candidate) int {
			if a.logit != b.logit {
				return cmp.Compare(b.logit, a.logit)
			}
			return cmp.Compare(a.id, b.id)
		})
	}
	for i := range c {
		c[i].logit /= s.p.Temperature
	}
	s.cand = c
	return c
}

// nucleusFloor is a logit below which no token can be drawn when top-k is
// off, so that only the tokens above it need sorting: tokens more than 50
// temperatures below the best (probability under e^-50 of its own), and,
// with top-p, those below the histogram bucket where the probability
// counted from the top reaches top-p; with min-p, those below min-p times
// the best token's probability. The floor is never above a token the exact
// computation could keep.
func (s *Sampler) nucleusFloor(logits []float32) float64 {
	const span, buckets = 50.0, 4096
	T := s.p.Temperature
	best := float64(logits[Argmax(logits)])
	floor := best - span*T
	if s.p.MinP > 0 {
		floor = max(floor, best+T*math.Log(s.p.MinP))
	}
	if s.p.TopP <= 0 || s.p.TopP >= 1 {
		return floor
	}
	if cap(s.hist) < buckets {
		s.hist = make([]float64, buckets)
	}
	hist := s.hist[:buckets]
	clear(hist)
	var total float64
	for _, v := range logits {
		d := (best - float64(v)) / T
		if !(d < span) {
			continue // also NaN
		}
		p := math.Exp(-d)
		hist[int(d*buckets/span)] += p
		total += p
	}
	var cum float64
	for b, p := range hist {
		if cum += p; cum >= s.p.TopP*total {
			return max(floor, best-float64(b+1)*span/buckets*T)
		}
	}
	return floor
}

// Argmax returns the index of the largest logit (the lowest index on ties;
// NaN ranks below every number).
func Argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if above(v, logits[best]) {
			best = i
		}
	}
	return int32(best)
}

// above orders values for selection: a ranks above b when it is larger, or
// when b is NaN and a is not, so that NaN is always last.
func above[F float32 | float64](a, b F) bool { return a > b || b != b && a == a }

func isNonFinite(v float32) bool { return v-v != 0 } // NaN and ±Inf

// LogSoftmax writes log-probabilities of logits into dst.
func LogSoftmax(logits []float32, dst []float64) {
	m := float64(logits[Argmax(logits)])
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v) - m)
	}
	lz := m + math.Log(z)
	for i, v := range logits {
		dst[i] = float64(v) - lz
	}
}

// TopN returns the n most likely ids of logprobs, best first (the lower id
// on ties, NaN last).
func TopN(logprobs []float64, n int) []int32 {
	var ids []int32
	for i, v := range logprobs {
		if len(ids) == n && !above(v, logprobs[ids[n-1]]) {
			continue
		}
		pos := sort.Search(len(ids), func(j int) bool { return above(v, logprobs[ids[j]]) })
		if len(ids) < n {
			ids = append(ids, 0)
		}
		copy(ids[pos+1:], ids[pos:len(ids)-1])
		ids[pos] = int32(i)
	}
	return ids
}
