//go:build !purego

package cpu

// tileAsm says whether mulInto has its AVX2 kernel; the chunked delta
// rule is only worth choosing automatically when it does.
var tileAsm = useAVX2

// mulPanelFast runs tiles tiles of rows x 16 side by side (k > 0) in
// assembly where the machine has AVX2; mulInto has checked the bounds. It
// reports whether it ran.
func mulPanelFast(c []float32, ldc int, src []float32, lds int, a strided, b []float32, ldb, k, rows, tiles int, keep bool, cs, rs *[tileRows]float32) bool {
	if !useAVX2 {
		return false
	}
	mulPanelAVX2(&c[0], ldc, &src[0], lds, &a.x[0], a.row, a.col, &b[0], ldb, k, rows, tiles, keep, cs, rs)
	return true
}

// transpose8Fast transposes the 8x8 blocks of the first blocks*8 rows and
// 8 columns of src into dst (see transpose), where the machine has AVX2,
// and reports whether it did.
func transpose8Fast(dst []float32, ldd int, src []float32, lds, blocks int) bool {
	if !useAVX2 {
		return false
	}
	_, _ = dst[7*ldd+8*blocks-1], src[(8*blocks-1)*lds+7]
	transpose8AVX2(&dst[0], &src[0], ldd, lds, blocks)
	return true
}

// Implemented in deltachunk_amd64.s.

//go:noescape
func mulPanelAVX2(c *float32, ldc int, src *float32, lds int, a *float32, lda, astep int, b *float32, ldb, k, rows, tiles int, keep bool, cs, rs *[4]float32)

//go:noescape
func transpose8AVX2(dst, src *float32, ldd, lds, blocks int)
