package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
	"petal/engine/quant"
)

// TestTopExpertsNonFinite: the router's top-k selects k distinct experts
// whatever the probabilities hold; NaN ranks below every number.
func TestTopExpertsNonFinite(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		probs []float32
		want  []int32
	}{
		{[]float32{0.1, 0.4, 0.2, 0.3}, []int32{1, 3}},
		{[]float32{0.25, 0.25, 0.25, 0.25}, []int32{0, 1}},
		{[]float32{nan, nan, nan, nan}, []int32{0, 1}},
		{[]float32{nan, 0.5, nan, 0.5}, []int32{1, 3}},
		{[]float32{nan, 0, nan, 1}, []int32{3, 1}},
		{[]float32{nan, nan, 1, nan}, []int32{2, 0}},
	} {
		probs := append([]float32(nil), tc.probs...)
		sel, w := make([]int32, 2), make([]float32, 2)
		topExperts(probs, sel, w)
		if sel[0] != tc.want[0] || sel[1] != tc.want[1] {
			t.Errorf("top 2 of %v: %v, want %v", tc.probs, sel, tc.want)
		}
		for k, e := range sel {
			if a, b := w[k], tc.probs[e]; a != b && !(a != a && b != b) {
				t.Errorf("top 2 of %v: weight %g for expert %d, want %g", tc.probs, a, e, b)
			}
		}
	}
}

// TestRouteNonFiniteInput: a NaN or infinite hidden state routes to valid,
// distinct experts (no panic), and its weights stay non-finite, so the
// damage reaches the logits, where generation catches it.
func TestRouteNonFiniteInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	b := New()
	const E, dim, topK = 8, 64, 3
	router, _ := b.Upload(quant.RandomMatrix(rng, 1, E, dim, 8, 64))
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		x, err := b.Alloc(2*dim, backend.F32)
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]float32, 2*dim)
		for i := range xs {
			xs[i] = rng.Float32()*2 - 1
		}
		xs[3], xs[dim+7] = bad, bad
		if err := b.Write(x, xs); err != nil {
			t.Fatal(err)
		}
		idx, err := b.Alloc(2*topK, backend.I32)
		if err != nil {
			t.Fatal(err)
		}
		wts, err := b.Alloc(2*topK, backend.F32)
		if err != nil {
			t.Fatal(err)
		}
		op := &backend.Route{X: x, Router: router, Idx: idx, Weights: wts, Rows: 2, TopK: topK, Normalize: true}
		if err := b.Run(op); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 2; r++ {
			seen := map[int32]bool{}
			for _, e := range I(idx)[r*topK : (r+1)*topK] {
				if e < 0 || e >= E || seen[e] {
					t.Fatalf("%g: row %d routed to %v", bad, r, I(idx)[r*topK:(r+1)*topK])
				}
				seen[e] = true
			}
			finite := true
			for _, v := range F(wts)[r*topK : (r+1)*topK] {
				finite = finite && v-v == 0
			}
			if finite {
				t.Errorf("%g: row %d has finite weights %v: the damage was hidden", bad, r, F(wts)[r*topK:(r+1)*topK])
			}
		}
	}
}
