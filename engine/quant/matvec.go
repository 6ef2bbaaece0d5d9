package quant

import (
	"fmt"
	"sync"

	"petal/engine/parallel"
)

// minChunkWeights is the least work, in weights, worth handing to another
// core: a few microseconds, well above the cost of waking it.
const minChunkWeights = 32 << 10

// portableOnly makes MatVec and MatMul use the Go kernels even where SIMD
// kernels exist: tests check both paths on every machine with it, and it
// measures what the SIMD kernels gain.
var portableOnly = false

// MatVec computes y[r] = Σ_c W[r][c]·x[c] for every row r of the stack
// (Rows·Experts outputs), in float32, reading each weight byte once. It uses
// the identity of spec 3.4,
//
//	y[r] = Σ_g scale[r][g]·Σ_{c∈g} q[r][c]·x[c] + bias[r][g]·Σ_{c∈g} x[c],
//
// with the group sums of x computed once per call. Rows are split across
// the cores of engine/parallel. It panics if x or y has the wrong length.
func MatVec(m *Matrix, x, y []float32) {
	rows := m.Rows * m.Experts
	if len(x) != m.Cols || len(y) != rows {
		panic(fmt.Sprintf("quant: MatVec of a [%d, %d] matrix with %d inputs and %d outputs", rows, m.Cols, len(x), len(y)))
	}
	j := vecJobs.Get().(*vecJob)
	j.prepare(m, x, y)
	parallel.For(rows, max(1, minChunkWeights/max(m.Cols, 1)), j.rows)
	j.m, j.x, j.y, j.xk = nil, nil, nil, nil
	vecJobs.Put(j)
}

// vecJob is one MatVec call: the inputs in the layout the row kernel reads,
// kept between calls so a call allocates nothing.
type vecJob struct {
	m      *Matrix
	x, y   []float32
	xsum   []float32 // Σ x over each group
	xk     []float32 // x as the row kernel reads it: x itself, or xbuf
	xbuf   []float32 // this job's own storage for a relaid x; never the caller's
	kernel rowKernel
	rows   func(lo, hi int)
}

// rowKernel names a MatVec row kernel; the SIMD ones are per architecture.
type rowKernel uint8

const portableKernel rowKernel = 0

var vecJobs = sync.Pool{New: func() any {
	j := new(vecJob)
	j.rows = j.run
	return j
}}

func (j *vecJob) prepare(m *Matrix, x, y []float32) {
	j.m, j.x, j.y = m, x, y
	j.xsum = groupSums(j.xsum, x, m.GroupSize)
	j.kernel = portableKernel
	if !portableOnly {
		j.kernel = pickRowKernel(m)
	}
	j.xk = x
	if xk := layoutInput(j.kernel, m.Bits, j.xbuf, x); xk != nil {
		j.xbuf, j.xk = xk, xk
	}
}

func (j *vecJob) run(lo, hi int) {
	if j.kernel == portableKernel {
		matVecRowsGo(j.m, j.x, j.xsum, j.y, lo, hi)
		return
	}
	matVecRowsFast(j.kernel, j.m, j.xk, j.xsum, j.y, lo, hi)
}

// groupSums returns Σ x over each group of size g, reusing buf.
func groupSums(buf, x []float32, g int) []float32 {
	buf = grow(buf, len(x)/g)
	for i := range buf {
		var s0, s1 float32
		xs := x[i*g : (i+1)*g]
		for c := 0; c+1 < len(xs); c += 2 {
			s0 += xs[c]
			s1 += xs[c+1]
		}
		if len(xs)%2 == 1 {
			s0 += xs[len(xs)-1]
		}
		buf[i] = s0 + s1
	}
	return buf
}

// grow returns buf resized to n, reallocating only when it is too small.
func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// matVecRowsGo is the portable row kernel for rows [lo, hi).
func matVecRowsGo(m *Matrix, x, xsum, y []float32, lo, hi int) {
	wr, gr, gs := m.WordsPerRow(), m.GroupsPerRow(), m.GroupSize
	wg := gs * m.Bits / 32 // words per group
	for r := lo; r < hi; r++ {
		words := m.Words[r*wr : (r+1)*wr]
		scales := m.Scales[r*gr : (r+1)*gr]
		biases := m.Biases[r*gr : (r+1)*gr]
		var acc float32
		for g := range gr {
			var qx float32
			if m.Bits == 4 {
				qx = dotCodes4(words[g*wg:(g+1)*wg], x[g*gs:(g+1)*gs])
			} else {
				qx = dotCodes8(words[g*wg:(g+1)*wg], x[g*gs:(g+1)*gs])
			}
			acc += BF16(scales[g])*qx + BF16(biases[g])*xsum[g]
		}
		y[r] = acc
	}
}

// dotCodes4 is Σ q[c]·x[c] over the 4-bit codes packed in words.
func dotCodes4(words []uint32, x []float32) float32 {
	var s0, s1 float32
	for k, w := range words {
		xs := x[k*8 : k*8+8 : k*8+8]
		s0 += float32(w&15)*xs[0] + float32(w>>8&15)*xs[2] + float32(w>>16&15)*xs[4] + float32(w>>24&15)*xs[6]
		s1 += float32(w>>4&15)*xs[1] + float32(w>>12&15)*xs[3] + float32(w>>20&15)*xs[5] + float32(w>>28)*xs[7]
	}
	return s0 + s1
}

// dotCodes8 is Σ q[c]·x[c] over the 8-bit codes packed in words.
func dotCodes8(words []uint32, x []float32) float32 {
	var s0, s1 float32
	for k, w := range words {
		xs := x[k*4 : k*4+4 : k*4+4]
		s0 += float32(w&255)*xs[0] + float32(w>>16&255)*xs[2]
		s1 += float32(w>>8&255)*xs[1] + float32(w>>24)*xs[3]
	}
	return s0 + s1
}
