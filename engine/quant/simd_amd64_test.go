package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// These tests pin each AVX2 kernel to its Go twin on the same inputs.

func needAVX2(t *testing.T) {
	t.Helper()
	if !hasAVX2 {
		t.Skip("this CPU lacks AVX2 or FMA: only the Go kernels run here")
	}
}

var simdShapes = []struct{ experts, rows, cols, bits, group int }{
	{1, 1, 64, 4, 64}, {1, 3, 192, 4, 64}, {1, 67, 512, 4, 64}, {1, 5, 8192, 4, 64},
	{1, 1, 64, 8, 64}, {1, 3, 192, 8, 64}, {1, 67, 512, 8, 64}, {1, 5, 8192, 8, 64},
	{1, 9, 256, 4, 128}, {1, 9, 256, 8, 128}, {2, 5, 128, 4, 64},
}

func TestMatVecAVX2MatchesGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(51, 52))
	for _, s := range simdShapes {
		m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
		x, x64 := randomInputs(rng, 1, s.cols)
		_, size := referenceProducts(&m, x64, 1)
		rows := s.experts * s.rows
		xsum := groupSums(nil, x, s.group)
		want := poisoned(rows)
		matVecRowsGo(&m, x, xsum, want, 0, rows)
		got := poisoned(rows)
		// Two calls over split ranges also check the row offsets.
		xk := rowKernelInput(nil, x, s.bits)
		matVecRowsSIMD(&m, xk, xsum, got, 0, rows/2)
		matVecRowsSIMD(&m, xk, xsum, got, rows/2, rows)
		for r := range rows {
			if d := math.Abs(float64(got[r] - want[r])); !(d <= kernelTol*size[0][r]) {
				t.Errorf("%+v row %d: AVX2 %v, Go %v", s, r, got[r], want[r])
			}
		}
	}
}

func TestDequantAVX2IsExact(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(53, 54))
	for _, s := range simdShapes {
		m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
		want := make([]float32, s.cols)
		got := make([]float32, s.cols+1)
		for r := range s.experts * s.rows {
			m.DequantizeRow(r, want)
			got[s.cols] = 42 // must survive: the kernel writes exactly Cols values
			dequantRowSIMD(&m, r, got[:s.cols])
			for c := range want {
				if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
					t.Fatalf("%+v row %d col %d: AVX2 %v, reference %v", s, r, c, got[c], want[c])
				}
			}
			if got[s.cols] != 42 {
				t.Fatalf("%+v row %d: wrote past the row", s, r)
			}
		}
	}
}

func TestTilesAVX2MatchGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(55, 56))
	for _, cols := range []int{16, 64, 208, 2048} {
		w, _ := randomInputs(rng, tileRows, cols)
		x, _ := randomInputs(rng, tileCols, cols)
		var want, got [tileRows * tileCols]float32
		check := func(what string, n int) {
			for k := range n {
				var size float64
				a, b := k%tileRows, k/tileRows
				for c := range cols {
					size += math.Abs(float64(w[a*cols+c]) * float64(x[b*cols+c]))
				}
				if d := math.Abs(float64(got[k] - want[k])); !(d <= kernelTol*size) {
					t.Errorf("%s cols %d: out[%d] AVX2 %v, Go %v", what, cols, k, got[k], want[k])
				}
			}
		}
		tile4x2Go(w, x, &want)
		got = [8]float32{}
		tile4x2SIMD(w, x, &got)
		check("tile4x2", 8)
		tile4x1Go(w, x[:cols], &want)
		got = [8]float32{}
		tile4x1SIMD(w, x[:cols], &got)
		check("tile4x1", 4)
	}
}

// TestRowKernelInputTransposesBlocks checks the layout the 4-bit kernel
// expects: nibble j of word w in a block is column 8w+j.
func TestRowKernelInputTransposesBlocks(t *testing.T) {
	x := make([]float32, 128)
	for i := range x {
		x[i] = float32(i)
	}
	xk := rowKernelInput(nil, x, 4)
	for b := 0; b < 128; b += 64 {
		for j := range 8 {
			for w := range 8 {
				if got, want := xk[b+j*8+w], float32(b+w*8+j); got != want {
					t.Fatalf("%s: xk[%d] = %v, want x[%v]", fmt.Sprint("block ", b/64), b+j*8+w, got, want)
				}
			}
		}
	}
}
