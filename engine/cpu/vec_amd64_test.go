//go:build !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// These tests pin each AVX2 helper to its Go twin on the same fresh inputs.

func needAVX2(t testing.TB) {
	t.Helper()
	if !useAVX2 {
		t.Skip("this CPU lacks AVX2 or FMA: only the Go helpers run here")
	}
}

// agree reports whether the two results are within vecTol*size.
func agree(asm, twin float32, size float64) bool {
	return math.Abs(float64(asm)-float64(twin)) <= vecTol*size
}

func absDot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i]) * float64(b[i]))
	}
	return s
}

func TestVecAVX2MatchesGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(9, 10))
	nan := float32(math.NaN())
	for _, n := range vecLengths {
		a, x, y := randomVec(rng, n), randomVec(rng, n), randomVec(rng, n)
		s := rng.Float32()*2 - 1

		if got, want := dotAVX2(&a[0], &x[0], n), dotGo(a, x); !agree(got, want, absDot(a, x)) {
			t.Errorf("n=%d: dotAVX2 %v, Go %v", n, got, want)
		}

		got, check := guarded(t, y)
		want := append([]float32(nil), y...)
		axpyAVX2(s, &x[0], &got[0], n)
		axpyGo(s, x, want)
		check()
		for i := range got {
			if !agree(got[i], want[i], math.Abs(float64(y[i]))+math.Abs(float64(s*x[i]))) {
				t.Fatalf("n=%d: axpyAVX2 [%d] %v, Go %v", n, i, got[i], want[i])
			}
		}

		stride := n + 5
		rows := fourRows(rng, n, stride)
		got4, want4 := [4]float32{nan, nan, nan, nan}, [4]float32{nan, nan, nan, nan}
		dot4AVX2(&rows[0], stride, &x[0], n, &got4)
		dot4Go(rows, stride, x, &want4)
		for r := range 4 {
			if !agree(got4[r], want4[r], absDot(rows[r*stride:][:n], x)) {
				t.Errorf("n=%d: dot4AVX2 row %d %v, Go %v", n, r, got4[r], want4[r])
			}
		}

		coef := [4]float32{s, 1 - s, -2 * s, 0.5}
		got, check = guarded(t, y)
		copy(want, y)
		axpy4AVX2(&coef, &rows[0], stride, &got[0], n)
		axpy4Go(&coef, rows, stride, want)
		check()
		for i := range got {
			size := math.Abs(float64(y[i]))
			for r := range 4 {
				size += math.Abs(float64(coef[r] * rows[r*stride+i]))
			}
			if !agree(got[i], want[i], size) {
				t.Fatalf("n=%d: axpy4AVX2 [%d] %v, Go %v", n, i, got[i], want[i])
			}
		}
	}
}

// TestMaxAVX2MatchesGo: the same element comes out, NaN elements passed
// over, wherever the maximum and the NaN sit.
func TestMaxAVX2MatchesGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(23, 24))
	for _, n := range vecLengths {
		for trial := range 4 {
			x := randomVec(rng, n)
			for i := range x {
				x[i] -= 2 // all negative: a lane left at zero would show
			}
			if trial > 0 {
				x[rng.IntN(n)] = 5
			}
			if trial > 1 {
				x[rng.IntN(n)] = float32(math.NaN())
			}
			for i := n - 1; trial == 3 && i >= 0; i -= 3 {
				x[i] = float32(math.NaN())
			}
			if got, want := maxAVX2(&x[0], n), maxGo(x); got != want {
				t.Errorf("n=%d trial %d: maxAVX2 %v, Go %v", n, trial, got, want)
			}
		}
	}
}

// TestDeltaRowsAVX2MatchesGo runs the fused delta-rule rows on three rows
// of every length; the outputs start as NaN and nothing past S may change.
func TestDeltaRowsAVX2MatchesGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(21, 22))
	const rows = 3
	for _, n := range vecLengths {
		S, k, q, v := randomVec(rng, rows*n), randomVec(rng, n), randomVec(rng, n), randomVec(rng, rows)
		beta, g, kq := rng.Float32(), rng.Float32(), dotGo(k, q)
		got, check := guarded(t, S)
		want := append([]float32(nil), S...)
		gotO, wantO := poison(rows), poison(rows)
		deltaRowsAVX2(&got[0], &k[0], &q[0], &v[0], &gotO[0], rows, n, beta, g, kq)
		deltaRowsGo(want, k, q, v, wantO, beta, g, kq)
		check()
		for r := range rows {
			if !agree(gotO[r], wantO[r], 1+absDot(S[r*n:][:n], q)) {
				t.Errorf("n=%d: o[%d] AVX2 %v, Go %v", n, r, gotO[r], wantO[r])
			}
		}
		for i := range want {
			if !agree(got[i], want[i], 1+math.Abs(float64(want[i]))) {
				t.Fatalf("n=%d: S[%d] AVX2 %v, Go %v", n, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkVec compares each helper's assembly with its Go twin at the
// head sizes of the models (128 for the delta rule, 256 for attention).
func BenchmarkVec(b *testing.B) {
	needAVX2(b)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{128, 256} {
		a, x, y := randomVec(rng, n), randomVec(rng, n), randomVec(rng, n)
		rows := fourRows(rng, n, n)
		var four [4]float32
		coef := [4]float32{1e-3, -1e-3, 1e-3, -1e-3}
		var sink float32
		cases := []struct {
			name     string
			floats   int // floats read per call
			asm, go_ func()
		}{
			{"dot", 2 * n, func() { sink += dotAVX2(&a[0], &x[0], n) }, func() { sink += dotGo(a, x) }},
			{"axpy", 2 * n, func() { axpyAVX2(1e-3, &x[0], &y[0], n) }, func() { axpyGo(1e-3, x, y) }},
			{"dot4", 5 * n, func() { dot4AVX2(&rows[0], n, &x[0], n, &four) }, func() { dot4Go(rows, n, x, &four) }},
			{"max", n, func() { sink += maxAVX2(&a[0], n) }, func() { sink += maxGo(a) }},
			{"axpy4", 5 * n, func() { axpy4AVX2(&coef, &rows[0], n, &y[0], n) }, func() { axpy4Go(&coef, rows, n, y) }},
		}
		for _, c := range cases {
			for _, impl := range []struct {
				name string
				fn   func()
			}{{"avx2", c.asm}, {"go", c.go_}} {
				b.Run(fmt.Sprintf("%s/n%d/%s", c.name, n, impl.name), func(b *testing.B) {
					b.SetBytes(int64(4 * c.floats))
					for range b.N {
						impl.fn()
					}
				})
			}
		}
		_ = sink
	}
}
