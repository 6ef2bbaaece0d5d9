package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestMatMulMatchesReference(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, s := range shapes {
			m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
			for _, n := range []int{1, 2, 5, 33} {
				x, x64 := randomInputs(rng, n, s.cols)
				want, size := referenceProducts(&m, x64, n)
				y := poisoned(n * s.experts * s.rows)
				MatMul(&m, x, n, y)
				checkProducts(t, fmt.Sprintf("MatMul n=%d %+v", n, s), y, want, size, kernelTol)
			}
		}
	})
}

func TestMatMulOnExpertView(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		for _, bits := range []int{4, 8} {
			stack := RandomMatrix(rng, 3, 67, 192, bits, 64)
			x, x64 := randomInputs(rng, 5, 192)
			for e := range stack.Experts {
				m := stack.Expert(e)
				want, size := referenceProducts(&m, x64, 5)
				y := poisoned(5 * m.Rows)
				MatMul(&m, x, 5, y)
				checkProducts(t, fmt.Sprintf("MatMul of expert %d, %d-bit", e, bits), y, want, size, kernelTol)
			}
		}
	})
}

// TestMatMulSpansSeveralBlocks uses more weight rows than one worker's
// dequantised block holds, so blocks and chunks end off the tile grid.
func TestMatMulSpansSeveralBlocks(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(15, 16))
		const rows, cols, n = 1001, 4096, 3
		m := RandomMatrix(rng, 1, rows, cols, 4, 64)
		x, x64 := randomInputs(rng, n, cols)
		want, size := referenceProducts(&m, x64, n)
		y := poisoned(n * rows)
		MatMul(&m, x, n, y)
		checkProducts(t, "MatMul 1001×4096", y, want, size, kernelTol)
	})
}

func TestMatMulAgreesWithMatVec(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(17, 18))
		m := RandomMatrix(rng, 1, 130, 512, 4, 64)
		const n = 7
		x, _ := randomInputs(rng, n, m.Cols)
		y := poisoned(n * m.Rows)
		MatMul(&m, x, n, y)
		yv := poisoned(m.Rows)
		for i := range n {
			MatVec(&m, x[i*m.Cols:(i+1)*m.Cols], yv)
			for r, v := range yv {
				if d := v - y[i*m.Rows+r]; d > 1e-3 || d < -1e-3 {
					t.Fatalf("row %d output %d: MatMul %v, MatVec %v", i, r, y[i*m.Rows+r], v)
				}
			}
		}
	})
}

func TestMatMulDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	bothPaths(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(19, 20))
		m := RandomMatrix(rng, 1, 256, 512, 4, 64)
		const n = 9
		x, _ := randomInputs(rng, n, m.Cols)
		y := make([]float32, n*m.Rows)
		MatMul(&m, x, n, y)
		if a := testing.AllocsPerRun(50, func() { MatMul(&m, x, n, y) }); a != 0 {
			t.Errorf("MatMul allocates %v times per call, want 0", a)
		}
	})
}

func TestDequantRowGoMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, s := range shapes {
		m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
		want := make([]float32, s.cols)
		got := make([]float32, s.cols)
		for r := range s.experts * s.rows {
			m.DequantizeRow(r, want)
			dequantRowGo(&m, r, got)
			for c := range want {
				if got[c] != want[c] {
					t.Fatalf("%+v row %d col %d: %v, want %v", s, r, c, got[c], want[c])
				}
			}
		}
	}
}
