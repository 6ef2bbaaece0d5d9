package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// vecLengths sit on and off the 8- and 16-float vector boundaries.
var vecLengths = []int{1, 7, 8, 31, 64, 127, 256}

// vecTol bounds a helper's error relative to the sum of the magnitudes of
// its terms: float32 rounding in any order stays far below it, one term
// missing or counted twice far above.
const vecTol = 1e-5

func randomVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	return x
}

// fourRows lays out four random rows of n floats stride apart with NaN in
// the gaps, so reading outside a row poisons the result.
func fourRows(rng *rand.Rand, n, stride int) []float32 {
	rows := make([]float32, 3*stride+n)
	for i := range rows {
		rows[i] = float32(math.NaN())
	}
	for r := range 4 {
		copy(rows[r*stride:], randomVec(rng, n))
	}
	return rows
}

// guarded returns a copy of y inside a buffer whose ends hold sentinels,
// and a check that the sentinels survived.
func guarded(t *testing.T, y []float32) ([]float32, func()) {
	buf := make([]float32, len(y)+2)
	buf[0], buf[len(buf)-1] = 42, 43
	copy(buf[1:], y)
	return buf[1 : 1+len(y)], func() {
		t.Helper()
		if buf[0] != 42 || buf[len(buf)-1] != 43 {
			t.Fatalf("n=%d: wrote outside the output", len(y))
		}
	}
}

// closeTo reports whether got is within vecTol*size of want.
func closeTo(got float32, want, size float64) bool {
	return math.Abs(float64(got)-want) <= vecTol*size
}

// TestVecHelpers checks the helpers as the kernels call them (assembly or
// Go, whichever this build runs), and the Go passes of deltaRowsGo, against
// float64 sums.
func TestVecHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range vecLengths {
		a, x, y := randomVec(rng, n), randomVec(rng, n), randomVec(rng, n)
		var ax, ay, size float64
		for i := range a {
			ax += float64(a[i]) * float64(x[i])
			ay += float64(a[i]) * float64(y[i])
			size += math.Abs(float64(a[i])) * (math.Abs(float64(x[i])) + math.Abs(float64(y[i])))
		}
		if got := dot(a, x); !closeTo(got, ax, size) {
			t.Errorf("n=%d: dot %v, want %v", n, got, ax)
		}
		if gx, gy := dot2Go(a, x, y); !closeTo(gx, ax, size) || !closeTo(gy, ay, size) {
			t.Errorf("n=%d: dot2Go (%v, %v), want (%v, %v)", n, gx, gy, ax, ay)
		}

		const g, d = 0.75, -1.5
		out, check := guarded(t, y)
		axpy(d, x, out)
		check()
		for i := range out {
			want := float64(y[i]) + d*float64(x[i])
			if !closeTo(out[i], want, 1+math.Abs(want)) {
				t.Fatalf("n=%d: axpy [%d] %v, want %v", n, i, out[i], want)
			}
		}
		out, check = guarded(t, y)
		scaleAddGo(g, d, x, out)
		check()
		for i := range out {
			want := g*float64(y[i]) + d*float64(x[i])
			if !closeTo(out[i], want, 1+math.Abs(want)) {
				t.Fatalf("n=%d: scaleAddGo [%d] %v, want %v", n, i, out[i], want)
			}
		}

		stride := n + 3
		rows := fourRows(rng, n, stride)
		coef := [4]float32{0.5, -1, 2, 0.25}
		nan := float32(math.NaN())
		four := [4]float32{nan, nan, nan, nan}
		dot4(rows, stride, x, &four)
		out, check = guarded(t, y)
		axpy4(&coef, rows, stride, out)
		check()
		for r := range 4 {
			var want, size float64
			for i := range x {
				p := float64(rows[r*stride+i]) * float64(x[i])
				want, size = want+p, size+math.Abs(p)
			}
			if !closeTo(four[r], want, size) {
				t.Errorf("n=%d: dot4 row %d %v, want %v", n, r, four[r], want)
			}
		}
		for i := range out {
			want, size := float64(y[i]), math.Abs(float64(y[i]))
			for r := range 4 {
				p := float64(coef[r]) * float64(rows[r*stride+i])
				want, size = want+p, size+math.Abs(p)
			}
			if !closeTo(out[i], want, size) {
				t.Fatalf("n=%d: axpy4 [%d] %v, want %v", n, i, out[i], want)
			}
		}
	}
}

// TestVecHelpersEmpty: zero-length vectors are valid and touch nothing.
func TestVecHelpersEmpty(t *testing.T) {
	var four [4]float32
	if dot(nil, nil) != 0 {
		t.Error("dot of empty vectors is not 0")
	}
	if a, b := dot2Go(nil, nil, nil); a != 0 || b != 0 {
		t.Error("dot2Go of empty vectors is not (0, 0)")
	}
	axpy(1, nil, nil)
	scaleAddGo(1, 1, nil, nil)
	if maxOf(nil) != float32(math.Inf(-1)) {
		t.Error("maxOf of no values is not -Inf")
	}
	deltaRows(nil, nil, nil, nil, nil, 1, 1, 0)
	axpy4(&four, make([]float32, 3), 1, nil)
	dot4(make([]float32, 3), 1, nil, &four)
	if four != [4]float32{} {
		t.Errorf("dot4 of empty rows gave %v", four)
	}
}
