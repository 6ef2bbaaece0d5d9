package quant

import (
	"golang.org/x/sys/cpu"
)

// The AVX2 kernels (simd_amd64.s) handle whole blocks of 64 columns, so they
// take any matrix whose group size is a multiple of 64; the Go kernels take
// the rest, and machines without AVX2 and FMA.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func simdMatVec(m *Matrix) bool { return hasAVX2 && m.GroupSize%64 == 0 && m.Cols > 0 }
func simdMatMul(m *Matrix) bool { return hasAVX2 && m.GroupSize%64 == 0 && m.Cols > 0 }

// rowKernelInput lays x out for the 4-bit row kernel, reusing buf. The kernel
// loads 8 words (64 codes) into one vector and peels nibble j of every word
// at once, which is codes j, 8+j, ..., 56+j; so within each block of 64,
// x is stored transposed as 8×8: xk[j*8+w] = x[w*8+j]. 8-bit codes widen in
// order and read x as it is.
func rowKernelInput(buf, x []float32, bits int) []float32 {
	if bits != 4 {
		return x
	}
	buf = grow(buf, len(x))
	for b := 0; b < len(x); b += 64 {
		src, dst := x[b:b+64:b+64], buf[b:b+64:b+64]
		for w := range 8 {
			for j := range 8 {
				dst[j*8+w] = src[w*8+j]
			}
		}
	}
	return buf
}

// matVecRowsSIMD runs the AVX2 row kernel on rows [lo, hi).
func matVecRowsSIMD(m *Matrix, xk, xsum, y []float32, lo, hi int) {
	if lo >= hi {
		return
	}
	wr, gr := m.WordsPerRow(), m.GroupsPerRow()
	blocks := m.GroupSize / 64
	words, scales, biases := &m.Words[lo*wr], &m.Scales[lo*gr], &m.Biases[lo*gr]
	_ = y[hi-1]
	if m.Bits == 4 {
		matVec4AVX2(words, scales, biases, &xk[0], &xsum[0], &y[lo], hi-lo, gr, blocks)
	} else {
		matVec8AVX2(words, scales, biases, &xk[0], &xsum[0], &y[lo], hi-lo, gr, blocks)
	}
}

// dequantRowSIMD is dequantRowGo in AVX2; the results are bit-identical
// because q·scale is exact in float32 and the fused add rounds once.
func dequantRowSIMD(m *Matrix, r int, dst []float32) {
	wr, gr := m.WordsPerRow(), m.GroupsPerRow()
	_ = dst[m.Cols-1]
	words, scales, biases := &m.Words[r*wr], &m.Scales[r*gr], &m.Biases[r*gr]
	if m.Bits == 4 {
		dequant4AVX2(words, scales, biases, &dst[0], gr, m.GroupSize/64)
	} else {
		dequant8AVX2(words, scales, biases, &dst[0], gr, m.GroupSize/64)
	}
}

// tile4x2SIMD is tile4x2Go in AVX2; len(x)/2 must be a multiple of 8.
func tile4x2SIMD(w, x []float32, out *[tileRows * tileCols]float32) {
	cols := len(x) / 2
	_ = w[4*cols-1]
	tile4x2AVX2(&w[0], &x[0], cols, out)
}

// tile4x1SIMD is tile4x1Go in AVX2; len(x) must be a multiple of 16.
func tile4x1SIMD(w, x []float32, out *[tileRows * tileCols]float32) {
	cols := len(x)
	_ = w[4*cols-1]
	tile4x1AVX2(&w[0], &x[0], cols, out)
}

// Implemented in simd_amd64.s. Row-major rows follow each other in words,
// scales and biases; blocks is the number of 64-column blocks per group.

//go:noescape
func matVec4AVX2(words *uint32, scales, biases *uint16, xk, xsum, y *float32, rows, groups, blocks int)

//go:noescape
func matVec8AVX2(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups, blocks int)

//go:noescape
func dequant4AVX2(words *uint32, scales, biases *uint16, dst *float32, groups, blocks int)

//go:noescape
func dequant8AVX2(words *uint32, scales, biases *uint16, dst *float32, groups, blocks int)

//go:noescape
func tile4x2AVX2(w, x *float32, cols int, out *[tileRows * tileCols]float32)

//go:noescape
func tile4x1AVX2(w, x *float32, cols int, out *[tileRows * tileCols]float32)
