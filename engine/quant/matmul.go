package quant

import (
	"fmt"
	"sync"

	"petal/engine/parallel"
)

// tileRows and tileCols are the shape of the register tile: 4 weight rows
// against 2 input rows.
const tileRows, tileCols = 4, 2

// blockFloats bounds a worker's dequantised block of weight rows (256 KiB):
// it stays in the L2 cache while every input row streams past it.
const blockFloats = 64 << 10

// MatMul computes Y = X·Wᵀ for X [n, Cols] and Y [n, Rows·Experts], both
// row-major: the prefill path. Each worker dequantises a small block of
// weight rows into its own float32 buffer, once per call, and multiplies
// every input row against it; no whole matrix is ever expanded. Weight rows
// are split across the cores of engine/parallel. A single input row goes to
// MatVec, which reads the codes once without expanding them. It panics if x
// or y has the wrong length.
func MatMul(m *Matrix, x []float32, n int, y []float32) {
	rows := m.Rows * m.Experts
	if n < 0 || len(x) != n*m.Cols || len(y) != n*rows {
		panic(fmt.Sprintf("quant: MatMul of a [%d, %d] matrix with %d inputs and %d outputs for %d rows", rows, m.Cols, len(x), len(y), n))
	}
	if n == 0 || rows == 0 {
		return
	}
	if n == 1 {
		MatVec(m, x, y)
		return
	}
	j := mulJobs.Get().(*mulJob)
	j.m, j.x, j.n, j.y = m, x, n, y
	grain := max(tileRows, minChunkWeights/max(1, n*m.Cols))
	parallel.For(rows, grain, j.rows)
	j.m, j.x, j.y = nil, nil, nil
	mulJobs.Put(j)
}

type mulJob struct {
	m    *Matrix
	x, y []float32
	n    int
	rows func(lo, hi int)
}

var mulJobs = sync.Pool{New: func() any {
	j := new(mulJob)
	j.rows = j.run
	return j
}}

// mulScratch is one worker's block of dequantised weight rows, and a pair
// of input rows for an odd last row.
type mulScratch struct{ w, pair []float32 }

var mulScratches = sync.Pool{New: func() any { return new(mulScratch) }}

// run computes the output columns [lo, hi) for every input row.
func (j *mulJob) run(lo, hi int) {
	m, cols, rows := j.m, j.m.Cols, j.m.Rows*j.m.Experts
	block := max(tileRows, blockFloats/cols/tileRows*tileRows)
	sc := mulScratches.Get().(*mulScratch)
	sc.w = grow(sc.w, block*cols)
	simd := !portableOnly && simdMatMul(m)
	var out [tileRows * tileCols]float32
	for r0 := lo; r0 < hi; r0 += block {
		nr := min(block, hi-r0)
		for r := range nr {
			if simd {
				dequantRowSIMD(m, r0+r, sc.w[r*cols:(r+1)*cols])
			} else {
				dequantRowGo(m, r0+r, sc.w[r*cols:(r+1)*cols])
			}
		}
		// Zero rows pad the last tile; their results are dropped.
		padded := (nr + tileRows - 1) / tileRows * tileRows
		clear(sc.w[nr*cols : padded*cols])
		for i := 0; i < j.n; i += tileCols {
			xs := min(tileCols, j.n-i)
			x := j.x[i*cols : (i+xs)*cols]
			if xs == 1 {
				// An odd last row goes through the same tile as the others,
				// paired with itself, so every row's sums are computed alike
				// whatever the rows around it: results do not depend on how
				// a prompt is cut into chunks.
				sc.pair = grow(sc.pair, 2*cols)
				copy(sc.pair, x)
				copy(sc.pair[cols:], x)
				x = sc.pair
			}
			for t := 0; t < padded; t += tileRows {
				w := sc.w[t*cols : (t+tileRows)*cols]
				if simd {
					tile4x2SIMD(w, x, &out)
				} else {
					tile4x2Go(w, x, &out)
				}
				for b := range xs {
					dst := j.y[(i+b)*rows+r0+t:]
					for a := range min(tileRows, nr-t) {
						dst[a] = out[b*tileRows+a]
					}
				}
			}
		}
	}
	mulScratches.Put(sc)
}

// dequantRowGo writes row r of the stack into dst, like DequantizeRow but
// a word at a time.
func dequantRowGo(m *Matrix, r int, dst []float32) {
	wr, gr, gs := m.WordsPerRow(), m.GroupsPerRow(), m.GroupSize
	wg := gs * m.Bits / 32
	words := m.Words[r*wr : (r+1)*wr]
	for g := range gr {
		s, b := BF16(m.Scales[r*gr+g]), BF16(m.Biases[r*gr+g])
		d := dst[g*gs : (g+1)*gs]
		for k, w := range words[g*wg : (g+1)*wg] {
			if m.Bits == 4 {
				o := d[k*8 : k*8+8 : k*8+8]
				o[0], o[1] = float32(w&15)*s+b, float32(w>>4&15)*s+b
				o[2], o[3] = float32(w>>8&15)*s+b, float32(w>>12&15)*s+b
				o[4], o[5] = float32(w>>16&15)*s+b, float32(w>>20&15)*s+b
				o[6], o[7] = float32(w>>24&15)*s+b, float32(w>>28)*s+b
			} else {
				o := d[k*4 : k*4+4 : k*4+4]
				o[0], o[1] = float32(w&255)*s+b, float32(w>>8&255)*s+b
				o[2], o[3] = float32(w>>16&255)*s+b, float32(w>>24)*s+b
			}
		}
	}
}

// tile4x2Go computes the 8 dot products of 4 weight rows (w, row-major)
// with 2 input rows (x) of the same length: out[b*4+a] = w[a]·x[b].
func tile4x2Go(w, x []float32, out *[tileRows * tileCols]float32) {
	cols := len(x) / 2
	w0, w1, w2, w3 := w[:cols], w[cols:2*cols], w[2*cols:3*cols], w[3*cols:4*cols]
	x0, x1 := x[:cols], x[cols:2*cols]
	var a0, a1, a2, a3, b0, b1, b2, b3 float32
	for c := range x0 {
		u, v := x0[c], x1[c]
		a0 += w0[c] * u
		a1 += w1[c] * u
		a2 += w2[c] * u
		a3 += w3[c] * u
		b0 += w0[c] * v
		b1 += w1[c] * v
		b2 += w2[c] * v
		b3 += w3[c] * v
	}
	*out = [8]float32{a0, a1, a2, a3, b0, b1, b2, b3}
}
