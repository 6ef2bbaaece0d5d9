package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ulps is the distance between a and b in units in the last place: how
// many float32 values lie between them (NaN only matches NaN).
func ulps(a, b float32) int64 {
	if a != a || b != b {
		if a != a && b != b {
			return 0
		}
		return math.MaxInt64
	}
	ordered := func(x float32) int64 {
		bits := int64(math.Float32bits(x))
		if bits&(1<<31) != 0 {
			return -(bits &^ (1 << 31))
		}
		return bits
	}
	d := ordered(a) - ordered(b)
	return max(d, -d)
}

// wideVec has values over the range where exp neither under- nor overflows
// in float32, and past it on both sides.
func wideVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (rng.Float32()*2 - 1) * 120
	}
	return x
}

// TestExpHelpers checks the helpers as the kernels call them (assembly or
// Go) against float64 math, to within 2 units in the last place.
func TestExpHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	// exp(-z) overflows float32 for z below -88.7, and silu then is -0.
	e32 := func(z float32) float64 { return float64(float32(math.Exp(-float64(z)))) }
	silu64 := func(z float32) float64 { return float64(z) / (1 + e32(z)) }
	near := func(got float32, want float64) bool { return ulps(got, float32(want)) <= 2 }
	for _, n := range vecLengths {
		for _, x := range [][]float32{randomVec(rng, n), wideVec(rng, n)} {
			const m = 0.5
			got := append([]float32(nil), x...)
			sum := expShiftSum(got, m)
			var want float64
			for i, v := range x {
				e := math.Exp(float64(v - m))
				want += float64(float32(e))
				if !near(got[i], e) {
					t.Fatalf("n=%d: exp(%v - %v) = %v, want %v", n, v, m, got[i], e)
				}
			}
			if !(math.Abs(float64(sum)-want) <= vecTol*want) && !(math.IsInf(want, 1) && math.IsInf(float64(sum), 1)) {
				t.Errorf("n=%d: expShiftSum returned %v, the values sum to %v", n, sum, want)
			}

			got, check := guarded(t, x)
			siluRow(got)
			check()
			for i, v := range x {
				if !near(got[i], silu64(v)) {
					t.Fatalf("n=%d: silu(%v) = %v, want %v", n, v, got[i], silu64(v))
				}
			}

			y := randomVec(rng, n)
			got, check = guarded(t, y)
			mulSilu(got, x)
			check()
			for i, v := range x {
				if want := float64(y[i]) * silu64(v); !near(got[i], want) {
					t.Fatalf("n=%d: %v·silu(%v) = %v, want %v", n, y[i], v, got[i], want)
				}
			}

			const s = 3
			got, check = guarded(t, y)
			gateRow(got, x, s)
			check()
			for i, v := range x {
				if want := float64(y[i]) / s / (1 + e32(v)); !near(got[i], want) {
					t.Fatalf("n=%d: %v/%v·sigmoid(%v) = %v, want %v", n, y[i], s, v, got[i], want)
				}
			}
		}
	}
}
