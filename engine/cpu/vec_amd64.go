//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// useAVX2 picks the assembly in vec_amd64.s; machines without AVX2 and FMA
// take the Go twins. The slicing below is the bounds check the assembly
// cannot do.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// tailMask[8-n:][:8] masks the first n of 8 lanes: the assembly loads and
// stores the last n%8 elements of a row under it.
var tailMask = [16]int32{-1, -1, -1, -1, -1, -1, -1, -1}

func dot(a, b []float32) float32 {
	if !useAVX2 || len(a) == 0 {
		return dotGo(a, b)
	}
	b = b[:len(a)]
	return dotAVX2(&a[0], &b[0], len(a))
}

func axpy(a float32, x, y []float32) {
	if !useAVX2 || len(y) == 0 {
		axpyGo(a, x, y)
		return
	}
	x = x[:len(y)]
	axpyAVX2(a, &x[0], &y[0], len(y))
}

func dot4(rows []float32, stride int, x []float32, out *[4]float32) {
	if !useAVX2 || len(x) == 0 {
		dot4Go(rows, stride, x, out)
		return
	}
	_ = rows[3*stride:][:len(x)]
	dot4AVX2(&rows[0], stride, &x[0], len(x), out)
}

func axpy4(a *[4]float32, rows []float32, stride int, y []float32) {
	if !useAVX2 || len(y) == 0 {
		axpy4Go(a, rows, stride, y)
		return
	}
	_ = rows[3*stride:][:len(y)]
	axpy4AVX2(a, &rows[0], stride, &y[0], len(y))
}

func maxOf(x []float32) float32 {
	if !useAVX2 || len(x) == 0 {
		return maxGo(x)
	}
	return maxAVX2(&x[0], len(x))
}

func deltaRows(S, k, q, v, o []float32, beta, g, kq float32) {
	if !useAVX2 || len(k) == 0 || len(v) == 0 {
		deltaRowsGo(S, k, q, v, o, beta, g, kq)
		return
	}
	_, q, o = S[len(v)*len(k)-1], q[:len(k)], o[:len(v)]
	deltaRowsAVX2(&S[0], &k[0], &q[0], &v[0], &o[0], len(v), len(k), beta, g, kq)
}

// Implemented in vec_amd64.s and deltarows_amd64.s; n > 0 elements, rows
// stride floats apart.

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func axpyAVX2(a float32, x, y *float32, n int)

//go:noescape
func dot4AVX2(rows *float32, stride int, x *float32, n int, out *[4]float32)

//go:noescape
func axpy4AVX2(a *[4]float32, rows *float32, stride int, y *float32, n int)

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func deltaRowsAVX2(s, k, q, v, o *float32, rows, n int, beta, decay, kq float32)
