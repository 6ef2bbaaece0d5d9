//go:build !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpAVX2Accuracy runs the assembly exp on every 251st float32 (all
// exponents, signs and low mantissa bits come up) and on the edges of its
// range: each result is within one unit in the last place of
// float32(math.Exp(x)), and all but a few in ten thousand are equal.
func TestExpAVX2Accuracy(t *testing.T) {
	needAVX2(t)
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, -150, -149.9, -103.98, -103.97, -103.28, -87.34,
		-87.33, 88.72, 88.73, 129.9, 130, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32}
	const stride = 251
	var checked, inexact int
	check := func(x []float32) {
		got := append([]float32(nil), x...)
		expShiftSumAVX2(&got[0], len(got), 0)
		for i, v := range x {
			want := float32(math.Exp(float64(v)))
			switch d := ulps(got[i], want); {
			case d > 1:
				t.Fatalf("exp(%v) = %v, math.Exp %v: %d ulps apart", v, got[i], want, d)
			case d == 1:
				inexact++
			}
		}
		checked += len(x)
	}
	check(special)
	buf := make([]float32, 0, 4096)
	for bits := uint64(0); bits < 1<<32; bits += stride {
		buf = append(buf, math.Float32frombits(uint32(bits)))
		if len(buf) == cap(buf) {
			check(buf)
			buf = buf[:0]
		}
	}
	check(buf)
	t.Logf("%d values, %d one ulp from float32(math.Exp)", checked, inexact)
	if inexact > checked/10000 {
		t.Errorf("%d of %d values are one ulp off: the float64 evaluation is not accurate enough", inexact, checked)
	}
}

// TestExpRowsAVX2MatchGo pins each assembly row function to its Go twin
// on fresh inputs of every length, in and past exp's float32 range.
func TestExpRowsAVX2MatchGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(19, 20))
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if d := ulps(got[i], want[i]); d > 2 {
				t.Fatalf("%s [%d]: assembly %v, Go %v (%d ulps)", what, i, got[i], want[i], d)
			}
		}
	}
	for _, n := range vecLengths {
		for _, x := range [][]float32{randomVec(rng, n), wideVec(rng, n)} {
			name := fmt.Sprintf("n=%d max %v", n, x[0])
			y := randomVec(rng, n)
			m := x[rng.IntN(n)]
			got, check := guarded(t, x)
			want := append([]float32(nil), x...)
			gotSum, wantSum := expShiftSumAVX2(&got[0], n, m), expShiftSumGo(want, m)
			check()
			same(name+": expShiftSum", got, want)
			if !(math.Abs(float64(gotSum-wantSum)) <= vecTol*float64(wantSum)) && gotSum != wantSum {
				t.Errorf("%s: expShiftSum returned %v, Go %v", name, gotSum, wantSum)
			}

			got, check = guarded(t, x)
			want = append(want[:0], x...)
			siluRowAVX2(&got[0], n)
			siluRowGo(want)
			check()
			same(name+": siluRow", got, want)

			got, check = guarded(t, y)
			want = append(want[:0], y...)
			mulSiluAVX2(&got[0], &x[0], n)
			mulSiluGo(want, x)
			check()
			same(name+": mulSilu", got, want)

			got, check = guarded(t, y)
			want = append(want[:0], y...)
			gateRowAVX2(&got[0], &x[0], n, 1.7)
			gateRowGo(want, x, 1.7)
			check()
			same(name+": gateRow", got, want)
		}
	}
}

// BenchmarkExpRows compares each row function's assembly with its Go
// twin on 256 floats.
func BenchmarkExpRows(b *testing.B) {
	needAVX2(b)
	const n = 256
	rng := rand.New(rand.NewPCG(3, 4))
	src, x, y := randomVec(rng, n), make([]float32, n), randomVec(rng, n)
	cases := []struct {
		name     string
		asm, go_ func()
	}{
		{"expShiftSum", func() { copy(x, src); expShiftSumAVX2(&x[0], n, 1) }, func() { copy(x, src); expShiftSumGo(x, 1) }},
		{"siluRow", func() { copy(x, src); siluRowAVX2(&x[0], n) }, func() { copy(x, src); siluRowGo(x) }},
		{"mulSilu", func() { copy(x, src); mulSiluAVX2(&x[0], &y[0], n) }, func() { copy(x, src); mulSiluGo(x, y) }},
		{"gateRow", func() { copy(x, src); gateRowAVX2(&x[0], &y[0], n, 2) }, func() { copy(x, src); gateRowGo(x, y, 2) }},
	}
	for _, c := range cases {
		b.Run(c.name+"/avx2", func(b *testing.B) {
			for range b.N {
				c.asm()
			}
		})
		b.Run(c.name+"/go", func(b *testing.B) {
			for range b.N {
				c.go_()
			}
		})
	}
}
