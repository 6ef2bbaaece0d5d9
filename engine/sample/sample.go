// Package sample chooses the next token from a row of logits.
//
// Order of operations (documented because engines differ): repetition,
// presence and frequency penalties on the raw logits; then greedy when the
// temperature is 0; otherwise divide by the temperature, keep the top-k
// tokens, then the smallest set whose probability reaches top-p, then drop
// tokens whose probability is below min-p times the most likely one's, and
// draw from what is left with the seeded generator. Kernel is that
// computation in float32, exactly as the Sample op of every backend states
// it; Sampler runs it on the host.
package sample

import (
	"math"
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

// Sampler draws tokens for one generation on the host with the same
// computation as the Sample op (Kernel): it counts what was generated (for
// the penalties) and numbers its draws, so a seed reproduces.
type Sampler struct {
	p        Settings
	counts   []int32 // generated occurrences by id
	inPrompt []int32 // nonzero for ids in the prompt
	draws    uint64
	k        Kernel
}

// New returns a sampler; prompt tokens count as seen for the repetition
// penalty only (as in transformers and vLLM).
func New(p Params, prompt []int32) *Sampler {
	s := &Sampler{p: p.Settings()}
	for _, t := range prompt {
		s.size(int(t) + 1)
		s.inPrompt[t] = 1
	}
	return s
}

// size makes room for ids below n.
func (s *Sampler) size(n int) {
	if n > len(s.counts) {
		s.counts = append(s.counts, make([]int32, n-len(s.counts))...)
		s.inPrompt = append(s.inPrompt, make([]int32, n-len(s.inPrompt))...)
	}
}

// Accept records a generated token.
func (s *Sampler) Accept(t int32) {
	s.size(int(t) + 1)
	s.counts[t]++
}

// Next chooses a token from logits (which it leaves as they are). A row
// with NaN or infinite logits never panics (callers should refuse such a
// row, it means damaged weights): NaN ranks below every number, and the
// choice is greedy.
func (s *Sampler) Next(logits []float32) int32 {
	s.size(len(logits))
	id, _ := s.k.Choose(logits, s.counts[:len(logits)], s.inPrompt[:len(logits)], &s.p, Uniform(s.p.Seed, s.draws))
	s.draws++
	return id
}

// penalise applies the penalties to logits in place.
func (s *Sampler) penalise(logits []float32) {
	s.size(len(logits))
	if s.p.Penalised() {
		penalise(logits, logits, s.counts[:len(logits)], s.inPrompt[:len(logits)], &s.p)
	}
}

// nucleusFloor is the smallest logit that top-p keeps (top-k off), or
// where top-p is off the smallest a token with any weight can have.
func (s *Sampler) nucleusFloor(logits []float32) float64 {
	best := logits[Argmax(logits)]
	T := s.p.Temperature
	ids, w := s.k.candidates(logits, best, &s.p)
	if !(s.p.TopP > 0 && s.p.TopP < 1) {
		return float64(best - maxSpan*T)
	}
	keys := s.k.keys[:len(ids)]
	for j, id := range ids {
		keys[j] = orderKey(logits[id])
	}
	var z float32
	for _, v := range w {
		z += v
	}
	key, _ := s.k.boundary(ids, w, keys, s.p.TopP*z)
	for _, id := range ids {
		if orderKey(logits[id]) == key {
			return float64(logits[id])
		}
	}
	return math.Inf(-1)
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
