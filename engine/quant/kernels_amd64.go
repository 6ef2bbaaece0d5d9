//go:build !purego

package quant

import "golang.org/x/sys/cpu"

// The AVX2 kernels (matvec_amd64.s, matmul_amd64.s) handle whole blocks of
// 64 columns, so they take any matrix whose group size is a multiple of 64.
// The AVX-512 row kernel takes 4-bit matrices with groups of exactly 64 (all
// MLX conversions petal reads), two groups per instruction. Everything else,
// and machines without AVX2 and FMA, takes the Go kernels.
var (
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL
)

const (
	avx2Kernel rowKernel = 1 + iota
	avx512Kernel
)

func pickRowKernel(m *Matrix) rowKernel {
	switch {
	case !hasAVX2 || m.GroupSize%64 != 0 || m.Cols == 0:
		return portableKernel
	case hasAVX512 && m.Bits == 4 && m.GroupSize == 64:
		return avx512Kernel
	}
	return avx2Kernel
}

func simdMatMul(m *Matrix) bool { return hasAVX2 && m.GroupSize%64 == 0 && m.Cols > 0 }

// layoutInput lays x out in buf (grown as needed) for a 4-bit SIMD row
// kernel and returns it, or returns nil when the kernel reads x as it is
// (8-bit codes widen from bytes in column order).
//
// A 4-bit kernel loads 8 words (64 codes) into one vector, 16 for AVX-512,
// and masks nibble j of every word at once: codes j, 8+j, ..., 56+j of each
// block of 64, each read as q·16^j. So x is stored transposed to match and
// scaled by 16^-j (exact: a power of two; only |x| below 2^-102 would turn
// subnormal and lose bits), except nibble 7, which the kernel shifts down
// instead:
//
//	AVX2:    xk[64b + 8j + w]        = x[64b + 8w + j]·16^-j
//	AVX-512: xk[128p + 16j + 8h + w] = x[64(2p+h) + 8w + j]·16^-j
//
// with a last odd block in the AVX2 layout.
func layoutInput(k rowKernel, bits int, buf, x []float32) []float32 {
	if k == portableKernel || bits != 4 || len(x)%64 != 0 {
		return nil
	}
	buf = grow(buf, len(x))
	blocks, b := len(x)/64, 0
	if k == avx512Kernel {
		for ; b+1 < blocks; b += 2 {
			src, dst := x[b*64:(b+2)*64], buf[b*64:(b+2)*64]
			for j := range 8 {
				for h := range 2 {
					for w := range 8 {
						dst[16*j+8*h+w] = src[64*h+8*w+j] * nibbleScale[j]
					}
				}
			}
		}
	}
	for ; b < blocks; b++ {
		src, dst := x[b*64:(b+1)*64], buf[b*64:(b+1)*64]
		for j := range 8 {
			for w := range 8 {
				dst[8*j+w] = src[8*w+j] * nibbleScale[j]
			}
		}
	}
	return buf
}

// nibbleScale[j] undoes the 16^j a masked-but-unshifted nibble j carries.
var nibbleScale = [8]float32{1, 0x1p-4, 0x1p-8, 0x1p-12, 0x1p-16, 0x1p-20, 0x1p-24, 1}

// matVecRowsFast runs SIMD row kernel k on rows [lo, hi).
func matVecRowsFast(k rowKernel, m *Matrix, xk, xsum, y []float32, lo, hi int) {
	if lo >= hi {
		return
	}
	wr, gr := m.WordsPerRow(), m.GroupsPerRow()
	words, scales, biases := &m.Words[lo*wr], &m.Scales[lo*gr], &m.Biases[lo*gr]
	_, _, _ = y[hi-1], xk[m.Cols-1], xsum[gr-1]
	switch {
	case k == avx512Kernel:
		matVec4AVX512(words, scales, biases, &xk[0], &xsum[0], &y[lo], hi-lo, gr)
	case m.Bits == 4:
		matVec4AVX2(words, scales, biases, &xk[0], &xsum[0], &y[lo], hi-lo, gr, m.GroupSize/64)
	default:
		matVec8AVX2(words, scales, biases, &xk[0], &xsum[0], &y[lo], hi-lo, gr, m.GroupSize/64)
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

// Implemented in matvec_amd64.s and matmul_amd64.s. Rows follow each other
// in words, scales and biases; blocks is the number of 64-column blocks per
// group.

//go:noescape
func matVec4AVX2(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups, blocks int)

//go:noescape
func matVec8AVX2(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups, blocks int)

//go:noescape
func matVec4AVX512(words *uint32, scales, biases *uint16, x, xsum, y *float32, rows, groups int)

//go:noescape
func dequant4AVX2(words *uint32, scales, biases *uint16, dst *float32, groups, blocks int)

//go:noescape
func dequant8AVX2(words *uint32, scales, biases *uint16, dst *float32, groups, blocks int)

//go:noescape
func tile4x2AVX2(w, x *float32, cols int, out *[tileRows * tileCols]float32)
