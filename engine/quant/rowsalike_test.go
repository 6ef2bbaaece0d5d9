package quant

import (
	"math/rand/v2"
	"testing"
)

// TestMatMulRowsDoNotDependOnTheirNeighbours: a row's results are the same
// bits whether it is multiplied alone with others, first or last, in an odd
// or an even number of rows, so cutting a prompt into chunks changes nothing
// (a single row goes to MatVec, which sums differently).
func TestMatMulRowsDoNotDependOnTheirNeighbours(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, portable := range []bool{false, true} {
		portableOnly = portable
		m := RandomMatrix(rng, 1, 67, 256, 4, 64)
		x := make([]float32, 7*256)
		for i := range x {
			x[i] = rng.Float32() - 0.5
		}
		all := make([]float32, 7*67)
		MatMul(&m, x, 7, all)
		for n := 2; n <= 7; n++ {
			for s := 0; s+n <= 7; s++ {
				y := make([]float32, n*67)
				MatMul(&m, x[s*256:(s+n)*256], n, y)
				for i := range y {
					if y[i] != all[s*67+i] {
						t.Fatalf("portable %v, rows %d..%d: element %d is %g, %g among all rows", portable, s, s+n, i, y[i], all[s*67+i])
					}
				}
			}
		}
	}
	portableOnly = false
}
