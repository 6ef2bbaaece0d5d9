package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

const kernelTol = 1e-5

func TestMatVecMatchesReference(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, s := range shapes {
			m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
			x, x64 := randomInputs(rng, 1, s.cols)
			want, size := referenceProducts(&m, x64, 1)
			y := poisoned(s.experts * s.rows)
			MatVec(&m, x, y)
			checkProducts(t, fmt.Sprintf("MatVec %+v", s), y, want, size, kernelTol)
		}
	})
}

func TestMatVecOnQuantizedWeights(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, bits := range []int{4, 8} {
			const rows, cols = 67, 512
			w := make([]float32, rows*cols)
			for i := range w {
				w[i] = float32(rng.NormFloat64() * 0.02)
			}
			m := Quantize(w, rows, cols, bits, 64)
			x, x64 := randomInputs(rng, 1, cols)
			want, size := referenceProducts(&m, x64, 1)
			y := poisoned(rows)
			MatVec(&m, x, y)
			checkProducts(t, fmt.Sprintf("MatVec of quantised weights, %d-bit", bits), y, want, size, kernelTol)
		}
	})
}

func TestMatVecOnExpertView(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, bits := range []int{4, 8} {
			stack := RandomMatrix(rng, 4, 67, 192, bits, 64)
			x, x64 := randomInputs(rng, 1, 192)
			for e := range stack.Experts {
				m := stack.Expert(e)
				want, size := referenceProducts(&m, x64, 1)
				y := poisoned(m.Rows)
				MatVec(&m, x, y)
				checkProducts(t, fmt.Sprintf("MatVec of expert %d, %d-bit", e, bits), y, want, size, kernelTol)
			}
		}
	})
}

// TestKernelsReadNibblesLowFirst multiplies a hand-packed matrix by one-hot
// vectors: with scale 1 and bias 0 the product is the code of one element.
func TestKernelsReadNibblesLowFirst(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		for _, tc := range []struct {
			bits  int
			words []uint32
			codes []float32 // codes of elements 0..7
		}{
			{4, []uint32{0x76543210, 0xfedcba98}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
			{4, []uint32{0x0000000f, 0xa0000000}, []float32{15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10}},
			{8, []uint32{0x03020100, 0xff7f8001}, []float32{0, 1, 2, 3, 1, 128, 127, 255}},
		} {
			cols := 64
			m := Matrix{Rows: 1, Cols: cols, Experts: 1, Bits: tc.bits, GroupSize: 64,
				Words:  make([]uint32, cols*tc.bits/32),
				Scales: []uint16{0x3f80}, // 1.0
				Biases: []uint16{0},
			}
			copy(m.Words, tc.words)
			for c, code := range tc.codes {
				x := make([]float32, cols)
				x[c] = 1
				y := poisoned(1)
				MatVec(&m, x, y)
				if y[0] != code {
					t.Errorf("%d-bit MatVec: element %d reads code %v, want %v", tc.bits, c, y[0], code)
				}
				// Two input rows: one row would go to MatVec.
				y2 := poisoned(2)
				MatMul(&m, append(x, x...), 2, y2)
				if y2[0] != code || y2[1] != code {
					t.Errorf("%d-bit MatMul: element %d reads codes %v, want %v", tc.bits, c, y2, code)
				}
			}
		}
	})
}

func TestMatVecDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, bits := range []int{4, 8} {
			m := RandomMatrix(rng, 1, 1024, 2048, bits, 64)
			x, _ := randomInputs(rng, 1, m.Cols)
			y := make([]float32, m.Rows)
			MatVec(&m, x, y)
			if a := testing.AllocsPerRun(100, func() { MatVec(&m, x, y) }); a != 0 {
				t.Errorf("%d-bit MatVec allocates %v times per call, want 0", bits, a)
			}
		}
	})
}

func TestMatVecRejectsWrongLengths(t *testing.T) {
	m := RandomMatrix(rand.New(rand.NewPCG(1, 1)), 1, 4, 64, 4, 64)
	for _, tc := range []struct{ nx, ny int }{{63, 4}, {64, 3}, {64, 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MatVec with %d inputs and %d outputs did not panic", tc.nx, tc.ny)
				}
			}()
			MatVec(&m, make([]float32, tc.nx), make([]float32, tc.ny))
		}()
	}
}
