package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGreedyIsArgmaxWithLowestIndexOnTies(t *testing.T) {
	s := New(Params{}, nil)
	if got := s.Next([]float32{1, 5, 5, 2}); got != 1 {
		t.Fatalf("greedy chose %d, want 1", got)
	}
}

func TestTopKOneIsGreedyAtAnyTemperature(t *testing.T) {
	s := New(Params{Temperature: 1.5, TopK: 1, Seed: 7}, nil)
	for range 100 {
		if got := s.Next([]float32{0.1, 0.3, 0.29, -1}); got != 1 {
			t.Fatalf("top-k 1 chose %d, want 1", got)
		}
	}
}

func TestSeedReproducesAndDistributionMatches(t *testing.T) {
	logits := []float32{0, float32(math.Log(3))} // p = 0.25, 0.75
	draw := func(seed uint64) []int32 {
		s := New(Params{Temperature: 1, Seed: seed}, nil)
		out := make([]int32, 20000)
		for i := range out {
			out[i] = s.Next(append([]float32(nil), logits...))
		}
		return out
	}
	a, b := draw(42), draw(42)
	ones := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed diverged at draw %d", i)
		}
		ones += int(a[i])
	}
	if f := float64(ones) / float64(len(a)); math.Abs(f-0.75) > 0.015 {
		t.Fatalf("token 1 drawn with frequency %.3f, want 0.75", f)
	}
	c := draw(43)
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("different seeds gave identical draws")
	}
}

func TestTopPAndMinPCut(t *testing.T) {
	probs := []float64{0.6, 0.3, 0.1}
	logits := make([]float32, 3)
	for i, p := range probs {
		logits[i] = float32(math.Log(p))
	}
	s := New(Params{Temperature: 1, TopP: 0.55, Seed: 1}, nil)
	for range 200 {
		if got := s.Next(append([]float32(nil), logits...)); got != 0 {
			t.Fatalf("top-p 0.55 chose %d, want 0", got)
		}
	}
	s = New(Params{Temperature: 1, MinP: 0.4, Seed: 1}, nil)
	seen := map[int32]bool{}
	for range 2000 {
		seen[s.Next(append([]float32(nil), logits...))] = true
	}
	if seen[2] || !seen[0] || !seen[1] {
		t.Fatalf("min-p 0.4 drew %v, want tokens 0 and 1 only", seen)
	}
}

func TestPenalties(t *testing.T) {
	s := New(Params{PresencePenalty: 0.5, FrequencyPenalty: 0.25, RepetitionPenalty: 2}, []int32{0})
	s.Accept(1)
	s.Accept(1)
	l := []float32{4, 4, -1}
	s.penalise(l)
	want := []float32{2, 4/2.0 - 0.5 - 0.5, -1}
	for i := range l {
		if math.Abs(float64(l[i]-want[i])) > 1e-6 {
			t.Fatalf("penalised logits %v, want %v", l, want)
		}
	}
}

func TestLogSoftmaxAndTopN(t *testing.T) {
	l := []float32{1, 3, 2}
	lp := make([]float64, 3)
	LogSoftmax(l, lp)
	var z float64
	for _, v := range lp {
		z += math.Exp(v)
	}
	if math.Abs(z-1) > 1e-12 || math.Abs(lp[1]-lp[0]-2) > 1e-12 {
		t.Fatalf("log-softmax %v", lp)
	}
	if got := TopN(lp, 2); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("top-2 %v, want [1 2]", got)
	}
}

// BenchmarkSampleFullVocabulary: one draw over a 248320-token vocabulary
// with top-k off (top-p only), the costliest setting.
func BenchmarkSampleFullVocabulary(b *testing.B) {
	logits := make([]float32, 248320)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i))) * 8
	}
	s := New(Params{Temperature: 1, TopP: 0.95, Seed: 1}, nil)
	row := make([]float32, len(logits))
	for range b.N {
		copy(row, logits)
		s.Next(row)
	}
}

// TestNucleusFloorKeepsTheNucleus: the floor used to avoid sorting the whole
// vocabulary never cuts a token that exact top-p (and min-p) would keep.
func TestNucleusFloorKeepsTheNucleus(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 300 {
		n := 1 + rng.IntN(2000)
		logits := make([]float32, n)
		scale := rng.Float64() * 20
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * scale)
		}
		p := Params{Temperature: 0.1 + rng.Float64()*2, TopP: rng.Float64(), MinP: rng.Float64() * 0.2 * float64(trial%2)}
		s := New(p, nil)
		floor := s.nucleusFloor(logits)
		// exact: sort everything, accumulate to top-p
		sorted := slices.Clone(logits)
		slices.SortFunc(sorted, func(a, b float32) int { return cmp.Compare(b, a) })
		var z float64
		for _, v := range sorted {
			z += math.Exp((float64(v) - float64(sorted[0])) / p.Temperature)
		}
		var cum float64
		for _, v := range sorted {
			prob := math.Exp((float64(v)-float64(sorted[0]))/p.Temperature) / z
			keptByMinP := p.MinP <= 0 || math.Exp((float64(v)-float64(sorted[0]))/p.Temperature) >= p.MinP
			if keptByMinP && prob > 1e-20 && float64(v) < floor {
				t.Fatalf("trial %d: token with logit %g (p %.3g) is in the nucleus but below the floor %g", trial, v, prob, floor)
			}
			if cum += prob; cum >= p.TopP {
				break
			}
		}
	}
}
