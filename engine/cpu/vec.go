package cpu

import "math"

// Vector helpers for the attention and delta-rule kernels. dot, axpy, dot4,
// axpy4, maxOf and deltaRows (vec_amd64.go, vec_other.go) run AVX2 assembly
// where the machine has it and the Go twins below otherwise; the tests pin
// each to its twin. Sums may be ordered differently in the two, so results
// agree to float32 rounding, not bit for bit. dot2Go and scaleAddGo are the
// two passes of deltaRowsGo.

// dotGo returns a·b over len(a).
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	n := len(a) &^ 3
	for i := 0; i < n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for i := n; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot2Go returns (a·x, a·y) in one pass over a.
func dot2Go(a, x, y []float32) (float32, float32) {
	var x0, x1, y0, y1 float32
	n := len(a) &^ 1
	x, y = x[:len(a)], y[:len(a)]
	for i := 0; i < n; i += 2 {
		x0 += a[i] * x[i]
		y0 += a[i] * y[i]
		x1 += a[i+1] * x[i+1]
		y1 += a[i+1] * y[i+1]
	}
	if n < len(a) {
		x0 += a[n] * x[n]
		y0 += a[n] * y[n]
	}
	return x0 + x1, y0 + y1
}

// axpyGo: y += a*x.
func axpyGo(a float32, x, y []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// scaleAddGo: y = g*y + d*x.
func scaleAddGo(g, d float32, x, y []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] = g*y[i] + d*x[i]
	}
}

// dot4Go: out[r] = row_r·x for the four rows rows[r*stride:][:len(x)].
func dot4Go(rows []float32, stride int, x []float32, out *[4]float32) {
	for r := range out {
		out[r] = dotGo(x, rows[r*stride:][:len(x)])
	}
}

// axpy4Go: y += a[0]*row_0 + ... + a[3]*row_3, the rows as in dot4Go.
func axpy4Go(a *[4]float32, rows []float32, stride int, y []float32) {
	r0, r1 := rows[:len(y)], rows[stride:][:len(y)]
	r2, r3 := rows[2*stride:][:len(y)], rows[3*stride:][:len(y)]
	for i := range y {
		v := y[i]
		v += a[0] * r0[i]
		v += a[1] * r1[i]
		v += a[2] * r2[i]
		v += a[3] * r3[i]
		y[i] = v
	}
}

// maxGo returns the largest element of x that is not NaN, or -Inf.
func maxGo(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	return m
}

// deltaRowsGo is deltaStep's row loop (see there) with kq = k·q: for each
// row of S (len(k) floats; one per element of v), d = beta*(v[r] - g*row·k),
// o[r] = g*row·q + d*kq, then row = g*row + d*k.
func deltaRowsGo(S, k, q, v, o []float32, beta, g, kq float32) {
	Dk := len(k)
	for r := range v {
		row := S[r*Dk:][:Dk]
		sk, sq := dot2Go(row, k, q)
		d := beta * (v[r] - g*sk)
		o[r] = g*sq + d*kq
		scaleAddGo(g, d, k, row)
	}
}
