package quant

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMatVecLeavesInputAlone: an 8-bit call followed by a 4-bit call on the
// same input must not write into the input (the 4-bit kernel lays x out in
// its own buffer, never in one a previous call borrowed from the caller).
func TestMatVecLeavesInputAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m8 := RandomMatrix(rng, 1, 32, 256, 8, 64)
	m4 := RandomMatrix(rng, 1, 128, 256, 4, 64)
	x := make([]float32, 256)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	orig := slices.Clone(x)
	y8, y4 := make([]float32, 32), make([]float32, 128)
	for range 3 {
		MatVec(&m8, x, y8)
		MatVec(&m4, x, y4)
		if !slices.Equal(x, orig) {
			t.Fatal("MatVec changed its input")
		}
	}
	row := make([]float32, 256)
	for r := range 128 {
		m4.DequantizeRow(r, row)
		var want float64
		for c := range row {
			want += float64(row[c]) * float64(orig[c])
		}
		if d := float64(y4[r]) - want; d > 1e-4 || d < -1e-4 {
			t.Fatalf("row %d: %g, want %g", r, y4[r], want)
		}
	}
}
