package sample

import (
	"math"
	"slices"
	"testing"
)

// expected is the distribution the sampling rules give for a row, in
// float64, computed by sorting (independently of Kernel's selection).
func expected(logits []float32, counts, inPrompt []int32, p Params) []float64 {
	V := len(logits)
	x := make([]float64, V)
	for i, v := range logits {
		f := float64(v)
		if p.RepetitionPenalty != 1 && p.RepetitionPenalty > 0 && (counts[i] > 0 || inPrompt[i] != 0) {
			if f > 0 {
				f /= p.RepetitionPenalty
			} else {
				f *= p.RepetitionPenalty
			}
		}
		if counts[i] > 0 {
			f -= p.PresencePenalty + p.FrequencyPenalty*float64(counts[i])
		}
		x[i] = f
	}
	order := make([]int, V)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case x[a] > x[b]:
			return -1
		case x[a] < x[b]:
			return 1
		}
		return 0
	})
	n := V
	if p.TopK > 0 && p.TopK < V {
		n = p.TopK
	}
	w := make([]float64, V)
	var z float64
	for _, i := range order[:n] {
		w[i] = math.Exp((x[i] - x[order[0]]) / p.Temperature)
		z += w[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		var cum float64
		for j, i := range order[:n] {
			if cum += w[i]; cum >= p.TopP*z {
				n = j + 1
				break
			}
		}
	}
	probs := make([]float64, V)
	var total float64
	for _, i := range order[:n] {
		if w[i] >= p.MinP || i == order[0] {
			probs[i] = w[i]
			total += w[i]
		}
	}
	for i := range probs {
		probs[i] /= total
	}
	return probs
}

// TestDrawsMatchTheDistribution: 40000 seeded draws over a small
// vocabulary fit the distribution the rules give (a chi-square test at
// p = 0.001), under each truncation and the penalties, and tokens the
// rules exclude are never drawn.
func TestDrawsMatchTheDistribution(t *testing.T) {
	logits := []float32{2.0, 1.5, 1.5, 0.8, 0.1, -0.5, -1.2, 3.0}
	prompt := []int32{0, 5}
	generated := []int32{7, 7, 3}
	// chi-square critical values at p = 0.001 by degrees of freedom
	critical := []float64{0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32}
	for name, p := range map[string]Params{
		"temperature": {Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, Seed: 1},
		"hot":         {Temperature: 1.7, TopP: 1, RepetitionPenalty: 1, Seed: 2},
		"top-k 4":     {Temperature: 1, TopK: 4, TopP: 1, RepetitionPenalty: 1, Seed: 3},
		"top-p 0.7":   {Temperature: 1, TopP: 0.7, RepetitionPenalty: 1, Seed: 4},
		"min-p 0.2":   {Temperature: 1, TopP: 1, MinP: 0.2, RepetitionPenalty: 1, Seed: 5},
		"penalties":   {Temperature: 1, TopP: 1, RepetitionPenalty: 1.5, PresencePenalty: 0.4, FrequencyPenalty: 0.3, Seed: 6},
		"all":         {Temperature: 0.9, TopK: 6, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.3, PresencePenalty: 0.2, FrequencyPenalty: 0.1, Seed: 7},
	} {
		s := New(p, prompt)
		for _, g := range generated {
			s.Accept(g)
		}
		counts, inPrompt := slices.Clone(s.counts[:len(logits)]), slices.Clone(s.inPrompt[:len(logits)])
		want := expected(logits, counts, inPrompt, p)
		const N = 40000
		got := make([]float64, len(logits))
		for range N {
			got[s.Next(logits)]++
		}
		var chi float64
		df := -1
		for i := range want {
			if want[i] == 0 {
				if got[i] > 0 {
					t.Errorf("%s: token %d (excluded) drawn %d times", name, i, int(got[i]))
				}
				continue
			}
			df++
			e := want[i] * N
			chi += (got[i] - e) * (got[i] - e) / e
		}
		if df > 0 && chi > critical[df] {
			t.Errorf("%s: chi-square %.1f over %d degrees of freedom (critical %.1f): drawn %v, want %v", name, chi, df, critical[df], got, want)
		}
	}
}

// TestSamplingEdges: top-k 1 and a tiny top-p are greedy at any
// temperature; min-p 1 keeps exactly the tokens tied for the best; equal
// logits are drawn uniformly (top-k taking the lowest ids); a repetition
// or frequency penalty pushes a repeated token down.
func TestSamplingEdges(t *testing.T) {
	row := []float32{0.5, 2, 1.99, 2, -1, 0}
	draw := func(p Params, logits []float32, n int) map[int32]int {
		s := New(p, nil)
		seen := map[int32]int{}
		for range n {
			seen[s.Next(logits)]++
		}
		return seen
	}
	for name, p := range map[string]Params{
		"top-k 1":     {Temperature: 2, TopK: 1, Seed: 1},
		"top-p 1e-9":  {Temperature: 2, TopP: 1e-9, Seed: 2},
		"greedy":      {Seed: 3},
		"min-p tie 1": {Temperature: 2, TopK: 1, MinP: 1, Seed: 4},
	} {
		if got := draw(p, row, 500); len(got) != 1 || got[1] != 500 {
			t.Errorf("%s: drew %v, want token 1 (the first of the two best) only", name, got)
		}
	}
	if got := draw(Params{Temperature: 1, MinP: 1, Seed: 5}, row, 2000); len(got) != 2 || got[1] < 850 || got[3] < 850 {
		t.Errorf("min-p 1: drew %v, want tokens 1 and 3 (tied for the best), evenly", got)
	}
	equal := make([]float32, 10)
	if got := draw(Params{Temperature: 1, TopK: 3, Seed: 6}, equal, 3000); len(got) != 3 || got[0] < 850 || got[1] < 850 || got[2] < 850 {
		t.Errorf("equal logits, top-k 3: drew %v, want ids 0, 1, 2 evenly", got)
	}
	if got := draw(Params{Temperature: 1, TopP: 0.35, Seed: 7}, equal, 3000); len(got) != 4 || got[3] < 600 {
		t.Errorf("equal logits, top-p 0.35: drew %v, want ids 0 to 3 (the shortest prefix reaching 35%%) evenly", got)
	}
	if got := draw(Params{Temperature: 1, Seed: 8}, equal, 10000); len(got) != 10 {
		t.Errorf("equal logits: drew %v, want all 10", got)
	}
	// greedy with penalties: a token repeated enough loses its place
	for name, p := range map[string]Params{
		"repetition": {RepetitionPenalty: 1.5},
		"frequency":  {FrequencyPenalty: 0.02, RepetitionPenalty: 1},
		"presence":   {PresencePenalty: 0.5, RepetitionPenalty: 1},
	} {
		s := New(p, nil)
		first := s.Next(row)
		s.Accept(first)
		second := s.Next(row)
		s.Accept(second)
		if first != 1 || second != 3 {
			t.Errorf("%s: greedy chose %d then %d, want 1 then 3 (1 penalised once generated)", name, first, second)
		}
		if third := s.Next(row); third != 2 {
			t.Errorf("%s: third choice %d, want 2 (1 and 3 both penalised)", name, third)
		}
	}
}
