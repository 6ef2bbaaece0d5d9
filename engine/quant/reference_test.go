package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// referenceProducts returns, for each row r of m and each input row x_i,
// the float64 dot product of the row as DequantizeRow expands it with x_i,
// and the size of the terms Σ_c |scale·q·x| + |bias·x| that a float32 kernel
// using the group identity rounds along the way.
func referenceProducts(m *Matrix, x []float64, n int) (want, size [][]float64) {
	rows := m.Rows * m.Experts
	want = make([][]float64, n)
	size = make([][]float64, n)
	row := make([]float32, m.Cols)
	for i := range n {
		want[i] = make([]float64, rows)
		size[i] = make([]float64, rows)
	}
	gr := m.GroupsPerRow()
	for r := range rows {
		m.DequantizeRow(r, row)
		for i := range n {
			xi := x[i*m.Cols : (i+1)*m.Cols]
			var dot, mag float64
			for c, w := range row {
				dot += float64(w) * xi[c]
				g := r*gr + c/m.GroupSize
				b := float64(BF16(m.Biases[g]))
				mag += math.Abs((float64(w)-b)*xi[c]) + math.Abs(b*xi[c])
			}
			want[i][r], size[i][r] = dot, mag
		}
	}
	return want, size
}

// checkProducts compares y [n, rows] with the reference within a relative
// tolerance of the term size; a NaN left by poisoning fails too.
func checkProducts(t *testing.T, what string, y []float32, want, size [][]float64, tol float64) {
	t.Helper()
	rows := len(want[0])
	bad := 0
	for i := range want {
		for r := range rows {
			got := float64(y[i*rows+r])
			if d := math.Abs(got - want[i][r]); !(d <= tol*size[i][r]) {
				if bad < 5 {
					t.Errorf("%s: y[%d][%d] = %v, want %v (|Δ| %.3g, term size %.3g)", what, i, r, got, want[i][r], d, size[i][r])
				}
				bad++
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d outputs off in all", what, bad)
	}
}

// randomInputs returns n×cols values in [-1, 1) as float32 and as float64.
func randomInputs(rng *rand.Rand, n, cols int) ([]float32, []float64) {
	x32 := make([]float32, n*cols)
	x64 := make([]float64, n*cols)
	for i := range x32 {
		x32[i] = float32(rng.Float64()*2 - 1)
		x64[i] = float64(x32[i])
	}
	return x32, x64
}

func poisoned(n int) []float32 {
	y := make([]float32, n)
	for i := range y {
		y[i] = float32(math.NaN())
	}
	return y
}

// shapes covers both widths, rows off every tile boundary, several group
// counts, group sizes other than 64, and stacks of experts.
var shapes = []struct{ experts, rows, cols, bits, group int }{
	{1, 1, 64, 4, 64}, {1, 3, 192, 4, 64}, {1, 67, 512, 4, 64},
	{1, 1, 64, 8, 64}, {1, 3, 192, 8, 64}, {1, 67, 512, 8, 64},
	{1, 5, 256, 4, 128}, {1, 5, 256, 8, 128}, {1, 9, 96, 4, 32}, {1, 9, 96, 8, 32},
	{3, 7, 192, 4, 64}, {2, 33, 128, 8, 64},
}

// bothPaths runs body with the SIMD kernels (where the machine has them)
// and with the portable Go kernels.
func bothPaths(t *testing.T, body func(t *testing.T)) {
	t.Run("simd", body)
	t.Run("portable", func(t *testing.T) {
		portableOnly = true
		defer func() { portableOnly = false }()
		body(t)
	})
}
