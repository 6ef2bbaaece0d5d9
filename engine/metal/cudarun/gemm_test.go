//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
)

// TestSimdgroupMatrixProduct runs gemm_mma8_check, the simdgroup_matrix
// calls of gemm.metal through the dialect's emulation, on random 8x8 tiles
// against float64: D = A·B + C with B the block at column 0 or 8 of an 8x16
// tile, read as it is or transposed, D read back row-major (through
// threadgroup memory) and transposed (stored to device memory directly).
// Each element is within 1e-6 of Σ|a||b| + |c| (eight float32 fma).
// This shows that the emulation computes the product; not Apple's layout,
// its order of additions or its speed.
func TestSimdgroupMatrixProduct(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "gemm")
	rng := freshRNG(t)
	const tiles = 37
	a, b, cc := randomVector(rng, 64*tiles), randomVector(rng, 128*tiles), randomVector(rng, 64*tiles)
	ab, bb, cb := upBuf(t, c, s, a, "a"), upBuf(t, c, s, b, "b"), upBuf(t, c, s, cc, "c")
	db := newBuf(t, c, s, 128*tiles, "d")
	for _, col0 := range []int{0, 8} {
		for _, tr := range []int{0, 1} {
			db.Poison(t, s)
			args := new(driver.Args).Ptr(ab.P).Ptr(bb.P).Ptr(cb.P).Ptr(db.P)
			withParams(args, kernels.MmaCheckParams{Col0: int32(col0), Transpose: int32(tr)})
			launch(t, s, mod, "gemm_mma8_check", tiles, 32, args)
			got := db.Floats(t, s, "d")
			worst := 0.0
			for k := range tiles {
				bm := func(i, j int) float64 { // B[i][j]
					if tr == 1 {
						return float64(b[128*k+16*j+col0+i])
					}
					return float64(b[128*k+16*i+col0+j])
				}
				for i := range 8 {
					for j := range 8 {
						want, scale := float64(cc[64*k+8*i+j]), math.Abs(float64(cc[64*k+8*i+j]))
						for l := range 8 {
							p := float64(a[64*k+8*i+l]) * bm(l, j)
							want += p
							scale += math.Abs(p)
						}
						for _, g := range []float32{got[128*k+8*i+j], got[128*k+64+8*j+i]} {
							worst = max(worst, math.Abs(float64(g)-want)/scale)
						}
					}
				}
			}
			label := fmt.Sprintf("column %d transpose %d", col0, tr)
			t.Logf("%s: max error %.2g of Σ|a·b|+|c|", label, worst)
			if !(worst <= 1e-6) {
				t.Errorf("%s: off by %.2g of Σ|a·b|+|c| (bar 1e-6)", label, worst)
			}
		}
	}
}
