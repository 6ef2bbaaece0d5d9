//go:build !purego

package cpu

// tileAsm says whether mulInto has its AVX2 kernel; the chunked delta
// rule is only worth choosing automatically when it does.
var tileAsm = useAVX2

// mulTileFast runs a whole tile (k > 0) in assembly where the machine has
// AVX2; mulInto has checked the bounds. It reports whether it ran.
func mulTileFast(c []float32, ldc int, a strided, b []float32, ldb, k int, keep bool, cs, rs *[tileRows]float32) bool {
	if !useAVX2 {
		return false
	}
	mulTileAVX2(&c[0], ldc, &a.x[0], a.row, a.col, &b[0], ldb, k, keep, cs, rs)
	return true
}

// Implemented in deltachunk_amd64.s.

//go:noescape
func mulTileAVX2(c *float32, ldc int, a *float32, lda, astep int, b *float32, ldb, k int, keep bool, cs, rs *[4]float32)
