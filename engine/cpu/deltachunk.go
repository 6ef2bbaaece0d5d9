package cpu

import (
	"fmt"
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// The chunked form of the gated delta rule (spec 2.6): the same outputs and
// state as deltaTask.run, but each block of up to chunk tokens of a value
// head is a handful of matrix products against the state at the block's
// start instead of one pass over the whole state per token. The products
// against the state (S0·k, S0·q and the update) cost 3*Dv*Dk multiply-adds
// per token, plus work inside the block that grows with its length; the
// sequential step costs about 4*Dv*Dk (it also scales S by g) and reloads
// and rewrites S for every token, where a product keeps a tile of sums in
// registers. That is all the gain there is, so blocks are kept short. In the
// notation of the spec, per block of n tokens:
//
//	R[i]  = beta_i*(v_i - e^G[i] * S0·k_i)
//	Vn    = (I + A)^-1 R                      (forward substitution)
//	o_i   = e^G[i] * S0·q_i + Σ_{j<=i} (q_i·k_j) e^(G[i]-G[j]) Vn[j]
//	S_end = e^G[n-1] * S0 + Σ_j e^(G[n-1]-G[j]) Vn[j] ⊗ k_j
//
// R folds the spec's U - S0·W into one product: (I+A)^-1 is linear, so
// solving for beta*v and beta*e^G*k separately and then applying S0 gives
// the same Vn with one triangular solve over Dv columns instead of two.
//
// The state is kept transposed (St[c][r] = S[r][c]) while the blocks run,
// so every product streams rows of its right operand; it is transposed
// back once at the end.

// deltaForm is Options.DeltaRule parsed.
type deltaForm int

const (
	deltaSequential deltaForm = iota
	deltaChunked
	deltaAuto
)

func parseDeltaForm(s string) (deltaForm, error) {
	switch s {
	case "", "sequential":
		return deltaSequential, nil
	case "chunked":
		return deltaChunked, nil
	case "auto":
		return deltaAuto, nil
	}
	return 0, fmt.Errorf("cpu: delta rule form %q, want sequential, chunked or auto", s)
}

// autoChunkMinRows is the shortest op "auto" runs in the chunked form. By
// TestDeltaFormsTiming (AVX2, 128x128 states, oracle and 35B head counts)
// blocks of 16 break even with the sequential form at 12 to 24 tokens and
// win by 13-17% at 32, about 20% from 64 on; decode stays sequential.
const autoChunkMinRows = 32

// useChunkedDelta says whether an op of rows tokens runs in the chunked form.
func (b *Backend) useChunkedDelta(rows int) bool {
	switch b.deltaForm {
	case deltaChunked:
		return true
	case deltaAuto:
		return tileAsm && rows >= autoChunkMinRows
	}
	return false
}

// defaultDeltaChunk is the block length that measured fastest here (spec
// 2.6 and transformers use 64): the products against the state cost the
// same per token at any length, while the work inside a block grows with
// it. Shorter blocks than one tile of columns waste their padding.
const defaultDeltaChunk = 16

// maxDeltaChunk bounds the block length, so the per-block decay factors
// fit arrays on the stack.
const maxDeltaChunk = 128

// The chunked form's scratch: for each key head its blocks' k·k and q·k
// (shared by the value heads of its group) and room to transpose a block
// of keys, then each value head's own buffers. Rows of the n x n
// matrices are w floats apart, w = c rounded up to whole tiles, so their
// products never take the slow path for a narrow edge.
type chunkLayout struct{ Hk, Hv, Dk, Dv, c, w, blocks int }

func newChunkLayout(o *backend.DeltaRule, c int) chunkLayout {
	w := (c + tileCols - 1) / tileCols * tileCols
	return chunkLayout{o.KeyHeads, o.ValueHeads, o.KeyDim, o.ValueDim, c, w, (o.Rows + c - 1) / c}
}

func (l chunkLayout) gramSize() int { return 2 * l.c * l.w }                    // one block of one key head
func (l chunkLayout) keySize() int  { return l.gramSize()*l.blocks + l.Dk*l.w } // one key head
func (l chunkLayout) headSize() int { return l.Dk*l.Dv + l.c*l.Dv + 2*l.c*l.w + 3*l.c }
func (l chunkLayout) size() int     { return l.Hk*l.keySize() + l.Hv*l.headSize() }

// chunkBufs is one value head's part of the scratch.
type chunkBufs struct {
	st       []float32 // [Dk][Dv] the state, transposed
	vn       []float32 // [n][Dv] R, then Vn, then Vn weighted by e^(G[n-1]-G[j])
	ak, mq   []float32 // [n][w] -A (strictly lower); the decayed q·k (lower, zeros above)
	beta, eg []float32 // [n] beta_i and e^G[i]
	rScale   []float32 // [n] -beta_i*e^G[i]
}

// carve cuts consecutive slices off the front of x.
type carve struct{ x []float32 }

func (c *carve) take(n int) []float32 {
	s := c.x[:n:n]
	c.x = c.x[n:]
	return s
}

func (t *deltaTask) chunkBufs(j int) chunkBufs {
	l := t.chunk
	c := carve{t.chunkScratch[l.Hk*l.keySize()+j*l.headSize():][:l.headSize()]}
	var b chunkBufs
	b.st = c.take(l.Dk * l.Dv)
	b.vn = c.take(l.c * l.Dv)
	b.ak, b.mq = c.take(l.c*l.w), c.take(l.c*l.w)
	b.beta, b.eg, b.rScale = c.take(l.c), c.take(l.c), c.take(l.c)
	return b
}

// gram is key head kh's k·k and q·k of block blk, n rows of w each.
func (t *deltaTask) gram(kh, blk, n int) (kk, qk []float32) {
	l := t.chunk
	g := t.chunkScratch[kh*l.keySize()+blk*l.gramSize():]
	return g[:n*l.w], g[n*l.w : 2*n*l.w]
}

// deltaRuleChunked is deltaRule in the chunked form, once the task holds
// the op. The normalised q and k go head-major into t.qk ([2*Hk][Rows][Dk],
// queries first), so a block's keys are a compact matrix.
func (b *Backend) deltaRuleChunked(o *backend.DeltaRule) {
	t := &b.tasks.delta
	t.chunk = newChunkLayout(o, min(b.deltaChunk, o.Rows))
	t.chunkScratch = b.scratch.get(slotDeltaChunk, t.chunk.size())
	parallel.For(o.Rows*2*o.KeyHeads, 16, b.tasks.deltaNormHeadsFn)
	parallel.For(o.KeyHeads, 1, b.tasks.deltaGramFn)
	parallel.For(o.ValueHeads, 1, b.tasks.deltaChunkFn)
}

// normalizeHeads is normalize writing t.qk head-major.
func (t *deltaTask) normalizeHeads(lo, hi int) {
	Hk, Dk, rows := t.o.KeyHeads, t.o.KeyDim, t.o.Rows
	for i := lo; i < hi; i++ {
		r, h := i/(2*Hk), i%(2*Hk)
		scale := float32(1)
		if h < Hk {
			scale = t.qScale
		}
		dst := (h*rows + r) * Dk
		l2Normalize(t.qkv[r*t.width+h*Dk:r*t.width+(h+1)*Dk], t.qk[dst:dst+Dk], scale)
	}
}

// blockRows are the normalised keys and queries of key head kh for the
// tokens from t0 on, one per row.
func (t *deltaTask) blockRows(kh, t0 int) (keys, queries strided) {
	Hk, Dk, rows := t.o.KeyHeads, t.o.KeyDim, t.o.Rows
	keys = strided{t.qk[((Hk+kh)*rows+t0)*Dk:], Dk, 1}
	queries = strided{t.qk[(kh*rows+t0)*Dk:], Dk, 1}
	return keys, queries
}

// grams computes k_i·k_j and q_i·k_j for j <= i in every block of key heads
// [lo, hi), one row block at a time up to its diagonal, in whole tiles:
// the keys' transpose has zero columns up to w.
func (t *deltaTask) grams(lo, hi int) {
	Dk, C, w := t.o.KeyDim, t.chunk.c, t.chunk.w
	plain := rowScales{rAll: 1}
	for kh := lo; kh < hi; kh++ {
		kt := t.chunkScratch[kh*t.chunk.keySize()+t.chunk.blocks*t.chunk.gramSize():][:Dk*w]
		for blk := range t.chunk.blocks {
			t0 := blk * C
			n := min(C, t.o.Rows-t0)
			keys, queries := t.blockRows(kh, t0)
			transpose(kt, w, keys.x, Dk, n, Dk)
			for c := range Dk {
				clear(kt[c*w+n : (c+1)*w])
			}
			kk, qk := t.gram(kh, blk, n)
			for i0 := 0; i0 < n; i0 += tileRows {
				m, cols := min(tileRows, n-i0), min(w, (i0+tileRows+tileCols-1)/tileCols*tileCols)
				mulInto(kk[i0*w:], w, keys.from(i0), kt, w, m, cols, Dk, plain)
				mulInto(qk[i0*w:], w, queries.from(i0), kt, w, m, cols, Dk, plain)
			}
		}
	}
}

// runChunked is deltaTask.run in the chunked form, for value heads [lo, hi).
func (t *deltaTask) runChunked(lo, hi int) {
	Dk, Dv, C := t.o.KeyDim, t.o.ValueDim, t.chunk.c
	for j := lo; j < hi; j++ {
		b := t.chunkBufs(j)
		S := t.state[j*Dv*Dk : (j+1)*Dv*Dk]
		transpose(b.st, Dv, S, Dk, Dv, Dk)
		for blk := range t.chunk.blocks {
			t.chunkBlock(j, blk, min(C, t.o.Rows-blk*C), &b)
		}
		transpose(S, Dk, b.st, Dv, Dk, Dv)
	}
}

// chunkBlock advances value head j over the n tokens of block blk and
// writes their outputs.
func (t *deltaTask) chunkBlock(j, blk, n int, b *chunkBufs) {
	Hk, Dk, Hv, Dv := t.o.KeyHeads, t.o.KeyDim, t.o.ValueHeads, t.o.ValueDim
	kh, t0, w := j/t.group, blk*t.chunk.c, t.chunk.w
	keys, queries := t.blockRows(kh, t0)
	ldo := Hv * Dv
	out := t.out[t0*ldo+j*Dv:]

	// Per-token gates. The decays stay in float64: their products below
	// are exact enough, and a product never overflows the way a quotient
	// e^G[i] / e^G[j] can.
	var g [maxDeltaChunk]float64
	negA := -math.Exp(float64(t.aLog[j]))
	eg := 1.0
	for i := range n {
		r := t0 + i
		g[i] = math.Exp(negA * softplus(float64(t.aa[r*Hv+j])+float64(t.dtBias[j])))
		eg *= g[i]
		b.beta[i] = sigmoid(t.bb[r*Hv+j])
		b.eg[i] = float32(eg)
		b.rScale[i] = -b.beta[i] * b.eg[i]
	}

	// Decay the block's k·k and q·k: drow[jj] = e^(G[i]-G[jj]) as the
	// product of the gates after jj. ak becomes -A; mq gets zeros above
	// the diagonal, where the output product reads whole tiles.
	kk, qk := t.gram(kh, blk, n)
	var drow [maxDeltaChunk]float64
	for i := range n {
		for jj := range i {
			drow[jj] *= g[i]
		}
		drow[i] = 1
		nb := -float64(b.beta[i])
		ak, mq := b.ak[i*w:i*w+i], b.mq[i*w:i*w+n]
		for jj, x := range kk[i*w : i*w+i] {
			ak[jj] = float32(nb * float64(x) * drow[jj])
		}
		for jj, x := range qk[i*w : i*w+i+1] {
			mq[jj] = float32(float64(x) * drow[jj])
		}
		clear(mq[i+1:])
	}

	// R = beta*v - beta*e^G * (K·St), and the outputs' e^G * (Q·St).
	v := t.qkv[t0*t.width+2*Hk*Dk+j*Dv:]
	mulInto(b.vn, Dv, keys, b.st, Dv, n, Dv, Dk, rowScales{keep: true, src: v, lds: t.width, c: b.beta, r: b.rScale})
	mulInto(out, ldo, queries, b.st, Dv, n, Dv, Dk, rowScales{r: b.eg})

	// Vn = (I+A)^-1 R: each row block takes the rows solved before it in
	// one product, then its own few rows one by one.
	sum := rowScales{keep: true, cAll: 1, rAll: 1}
	for i0 := 0; i0 < n; i0 += tileRows {
		m := min(tileRows, n-i0)
		if i0 > 0 {
			mulInto(b.vn[i0*Dv:], Dv, strided{b.ak[i0*w:], w, 1}, b.vn, Dv, m, Dv, i0, sum)
		}
		for i := i0 + 1; i < i0+m; i++ {
			for jj := i0; jj < i; jj++ {
				axpy(b.ak[i*w+jj], b.vn[jj*Dv:(jj+1)*Dv], b.vn[i*Dv:(i+1)*Dv])
			}
		}
	}

	// o += (decayed q·k) · Vn, each row block up to its diagonal.
	for i0 := 0; i0 < n; i0 += tileRows {
		m := min(tileRows, n-i0)
		mulInto(out[i0*ldo:], ldo, strided{b.mq[i0*w:], w, 1}, b.vn, Dv, m, Dv, min(n, i0+tileRows), sum)
	}

	// St = e^G[n-1] * St + Kᵀ · (d Vn), d[jj] = e^(G[n-1]-G[jj]) (drow now),
	// the keys read in place as the transposed left operand.
	for jj := range n {
		d := float32(drow[jj])
		row := b.vn[jj*Dv : (jj+1)*Dv]
		for x := range row {
			row[x] *= d
		}
	}
	mulInto(b.st, Dv, strided{keys.x, 1, Dk}, b.vn, Dv, Dk, Dv, n, rowScales{keep: true, cAll: b.eg[n-1], rAll: 1})
}
