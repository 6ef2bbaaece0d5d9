package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// deltaStepPlain is the recurrence exactly as spec 2.5 step 7 writes it.
func deltaStepPlain(S, q, k, v []float32, beta, g float32, o []float32, Dv, Dk int) {
	for r := 0; r < Dv; r++ {
		row := S[r*Dk : (r+1)*Dk]
		var m float32
		for c := range row {
			row[c] *= g
			m += row[c] * k[c]
		}
		d := beta * (v[r] - m)
		var y float32
		for c := range row {
			row[c] += d * k[c]
			y += row[c] * q[c]
		}
		o[r] = y
	}
}

type deltaCase struct {
	S, q, k, v []float32
	beta, g    float32
}

func randomDeltaCase(rng *rand.Rand, Dv, Dk int) deltaCase {
	f := func(n int, scale float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = (rng.Float32()*2 - 1) * scale
		}
		return x
	}
	return deltaCase{S: f(Dv*Dk, 1), q: f(Dk, 0.1), k: f(Dk, 0.1), v: f(Dv, 1), beta: rng.Float32(), g: 0.1 + 0.9*rng.Float32()}
}

// TestDeltaStepMatchesPlain runs both forms for many steps on fresh random
// inputs (sizes off the usual boundaries) and compares outputs and state.
func TestDeltaStepMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range [][2]int{{128, 128}, {3, 5}, {17, 64}} {
		Dv, Dk := dims[0], dims[1]
		c := randomDeltaCase(rng, Dv, Dk)
		S1, S2 := append([]float32(nil), c.S...), append([]float32(nil), c.S...)
		o1, o2 := make([]float32, Dv), make([]float32, Dv)
		for step := range 50 {
			n := randomDeltaCase(rng, Dv, Dk)
			for i := range o1 {
				o1[i], o2[i] = float32(math.NaN()), float32(math.NaN())
			}
			deltaStep(S1, n.q, n.k, n.v, n.beta, n.g, o1, Dv, Dk)
			deltaStepPlain(S2, n.q, n.k, n.v, n.beta, n.g, o2, Dv, Dk)
			for i := range o1 {
				if d := math.Abs(float64(o1[i] - o2[i])); !(d <= 1e-4*(1+math.Abs(float64(o2[i])))) {
					t.Fatalf("%dx%d step %d: output %d is %g, plain form %g", Dv, Dk, step, i, o1[i], o2[i])
				}
			}
		}
		for i := range S1 {
			if d := math.Abs(float64(S1[i] - S2[i])); !(d <= 1e-4*(1+math.Abs(float64(S2[i])))) {
				t.Fatalf("%dx%d: state %d is %g, plain form %g", Dv, Dk, i, S1[i], S2[i])
			}
		}
	}
}

func benchmarkDelta(b *testing.B, step func(S, q, k, v []float32, beta, g float32, o []float32, Dv, Dk int)) {
	c := randomDeltaCase(rand.New(rand.NewPCG(1, 1)), 128, 128)
	o := make([]float32, 128)
	for range b.N {
		step(c.S, c.q, c.k, c.v, c.beta, 0.999, o, 128, 128)
	}
	b.SetBytes(128 * 128 * 4)
}

// BenchmarkDeltaStep compares the fused step with the plain spec form on one
// 128x128 head.
func BenchmarkDeltaStep(b *testing.B) {
	b.Run("fused", func(b *testing.B) { benchmarkDelta(b, deltaStep) })
	b.Run("plain", func(b *testing.B) { benchmarkDelta(b, deltaStepPlain) })
}
