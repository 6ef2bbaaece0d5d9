package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestVecInputMulRows: row ranges multiplied by a prepared input equal the
// same rows of MatVec, on both the SIMD and the portable kernels.
func TestVecInputMulRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, portable := range []bool{false, true} {
		portableOnly = portable
		for _, bits := range []int{4, 8} {
			m := RandomMatrix(rng, 3, 37, 192, bits, 64)
			x := make([]float32, 192)
			for i := range x {
				x[i] = rng.Float32()*2 - 1
			}
			want := make([]float32, 3*37)
			MatVec(&m, x, want)
			var in VecInput
			in.Prepare(&m, x)
			for _, r := range [][2]int{{0, 111}, {5, 6}, {36, 40}, {74, 111}} {
				y := make([]float32, r[1]-r[0]+1)
				y[len(y)-1] = float32(math.NaN())
				in.MulRows(&m, r[0], r[1], y)
				for i := range r[1] - r[0] {
					if d := math.Abs(float64(y[i] - want[r[0]+i])); d > 1e-5*(1+math.Abs(float64(want[r[0]+i]))) {
						t.Fatalf("bits %d portable %v rows %v: y[%d] = %g, MatVec %g", bits, portable, r, i, y[i], want[r[0]+i])
					}
				}
				if !math.IsNaN(float64(y[len(y)-1])) {
					t.Fatal("MulRows wrote past its rows")
				}
			}
		}
	}
	portableOnly = false
	m4, m8 := RandomMatrix(rng, 1, 4, 128, 4, 64), RandomMatrix(rng, 1, 4, 128, 8, 64)
	var in VecInput
	in.Prepare(&m4, make([]float32, 128))
	if in.Fits(&m8) {
		t.Error("an input laid out for 4-bit codes fits an 8-bit matrix")
	}
}
