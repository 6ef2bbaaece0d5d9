package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// benchRow is a 248320-token row of logits shaped like a language model's:
// most tokens far below a few dozen plausible ones.
func benchRow() []float32 {
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, 248320)
	for i := range row {
		row[i] = float32(rng.NormFloat64() * 2.5)
	}
	for i := range 40 {
		row[rng.IntN(len(row))] = 12 + float32(i%7)
	}
	return row
}

// BenchmarkDraw: one draw at a 248K vocabulary under common settings.
func BenchmarkDraw(b *testing.B) {
	sinRow := make([]float32, 248320)
	for i := range sinRow {
		sinRow[i] = float32(math.Sin(float64(i))) * 8
	}
	for _, c := range []struct {
		name string
		row  []float32
		p    Params
	}{
		{"greedy", benchRow(), Params{}},
		{"qwen-defaults", benchRow(), Params{Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 1}},
		{"top-p-0.95", benchRow(), Params{Temperature: 1, TopP: 0.95, Seed: 1}},
		{"temperature-only", benchRow(), Params{Temperature: 1, Seed: 1}},
		{"min-p-0.05", benchRow(), Params{Temperature: 1, MinP: 0.05, Seed: 1}},
		{"top-k-1000", benchRow(), Params{Temperature: 1, TopK: 1000, Seed: 1}},
		{"penalties", benchRow(), Params{Temperature: 0.7, TopK: 20, TopP: 0.8, RepetitionPenalty: 1.1, PresencePenalty: 0.5, Seed: 1}},
		{"flat-top-p-0.95", sinRow, Params{Temperature: 1, TopP: 0.95, Seed: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := New(c.p, []int32{1, 2, 3, 500, 7000})
			for i := range 200 {
				s.Accept(int32(i * 17))
			}
			row := make([]float32, len(c.row))
			for range b.N {
				copy(row, c.row) // the old sampler penalised in place
				s.Next(row)
			}
		})
	}
}
