package cpu

import (
	"fmt"
	"math"
)

// The chunked form of the gated delta rule (spec 2.6): the same outputs and
// state as deltaTask.run, but each block of up to chunk tokens of a value
// head is a handful of matrix products against the state at the block's
// start instead of one pass over the whole state per token. In the
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

// autoChunkMinRows is the shortest op "auto" runs in the chunked form: the
// measurements are in deltachunk_test.go.
const autoChunkMinRows = 1 << 30

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

// defaultDeltaChunk is the block length of spec 2.6.
const defaultDeltaChunk = 64

// maxDeltaChunk bounds the block length, so the per-block decay factors
// fit arrays on the stack.
const maxDeltaChunk = 128

// chunkBufs is one value head's part of the chunked form's scratch.
type chunkBufs struct {
	st       []float32 // [Dk][Dv] the state, transposed
	kt, kwt  []float32 // [Dk][n] the block's keys, transposed; kwt weighted by e^(G[n-1]-G[j])
	vn       []float32 // [n][Dv] R, then Vn
	ak, mq   []float32 // [n][n] -A (strictly lower), then the masked decayed q·k (lower)
	beta, eg []float32 // [n] beta_i and e^G[i]
	rScale   []float32 // [n] -beta_i*e^G[i]
}

// chunkHeadSize is the scratch one value head needs for blocks of c tokens.
func chunkHeadSize(Dk, Dv, c int) int {
	return Dk*Dv + 2*Dk*c + c*Dv + 2*c*c + 3*c
}

func (t *deltaTask) chunkBufs(j int) chunkBufs {
	Dk, Dv, c := t.o.KeyDim, t.o.ValueDim, t.chunkLen
	x := t.chunkScratch[j*chunkHeadSize(Dk, Dv, c):][:chunkHeadSize(Dk, Dv, c)]
	take := func(n int) []float32 {
		s := x[:n:n]
		x = x[n:]
		return s
	}
	var b chunkBufs
	b.st = take(Dk * Dv)
	b.kt, b.kwt = take(Dk*c), take(Dk*c)
	b.vn = take(c * Dv)
	b.ak, b.mq = take(c*c), take(c*c)
	b.beta, b.eg, b.rScale = take(c), take(c), take(c)
	return b
}

// runChunked is deltaTask.run in the chunked form, for value heads [lo, hi).
func (t *deltaTask) runChunked(lo, hi int) {
	Dk, Dv := t.o.KeyDim, t.o.ValueDim
	for j := lo; j < hi; j++ {
		b := t.chunkBufs(j)
		S := t.state[j*Dv*Dk : (j+1)*Dv*Dk]
		transpose(b.st, S, Dv, Dk)
		for t0 := 0; t0 < t.o.Rows; t0 += t.chunkLen {
			t.chunkBlock(j, t0, min(t.chunkLen, t.o.Rows-t0), &b)
		}
		transpose(S, b.st, Dk, Dv)
	}
}

// chunkBlock advances value head j over tokens [t0, t0+n) and writes their
// outputs.
func (t *deltaTask) chunkBlock(j, t0, n int, b *chunkBufs) {
	Hk, Dk, Hv, Dv := t.o.KeyHeads, t.o.KeyDim, t.o.ValueHeads, t.o.ValueDim
	kh := j / t.group
	tok := 2 * Hk * Dk // floats per token in qk
	keys := strided{t.qk[t0*tok+(Hk+kh)*Dk:], tok, 1}
	queries := strided{t.qk[t0*tok+kh*Dk:], tok, 1}
	ldo := Hv * Dv
	out := t.out[t0*ldo+j*Dv:]

	// Per-token gates. The decays stay in float64: their products below
	// are exact enough, and a product never overflows the way a quotient
	// e^G[i] / e^G[j] can.
	var g [maxDeltaChunk]float64
	negA := -math.Exp(float64(t.aLog[j]))
	G := 0.0
	for i := range n {
		r := t0 + i
		lg := negA * softplus(float64(t.aa[r*Hv+j])+float64(t.dtBias[j]))
		g[i] = math.Exp(lg)
		G += lg
		b.beta[i] = sigmoid(t.bb[r*Hv+j])
		b.eg[i] = float32(math.Exp(G))
		b.rScale[i] = -b.beta[i] * b.eg[i]
	}

	// k·k and q·k for j <= i, one row block at a time up to its diagonal.
	for c := range Dk {
		row := b.kt[c*n : (c+1)*n]
		for i := range row {
			row[i] = keys.x[i*tok+c]
		}
	}
	plain := rowScales{rAll: 1}
	for i0 := 0; i0 < n; i0 += tileRows {
		// Whole tiles past the diagonal cost less than a ragged edge.
		m, cols := min(tileRows, n-i0), min(n, (i0+tileRows+tileCols-1)/tileCols*tileCols)
		mulInto(b.ak[i0*n:], n, keys.from(i0), b.kt, n, m, cols, Dk, plain)
		mulInto(b.mq[i0*n:], n, queries.from(i0), b.kt, n, m, cols, Dk, plain)
	}

	// Decay them: drow[jj] = e^(G[i]-G[jj]) as the product of the gates
	// after jj. ak becomes -A; mq gets zeros above the diagonal, where the
	// output product reads whole tiles.
	var drow [maxDeltaChunk]float64
	for i := range n {
		for jj := range i {
			drow[jj] *= g[i]
		}
		drow[i] = 1
		ak, mq := b.ak[i*n:(i+1)*n], b.mq[i*n:(i+1)*n]
		nb := -float64(b.beta[i])
		for jj := range i {
			ak[jj] = float32(nb * float64(ak[jj]) * drow[jj])
			mq[jj] = float32(float64(mq[jj]) * drow[jj])
		}
		clear(mq[i+1:])
	}
	// drow now holds e^(G[n-1]-G[jj]), the weight of token jj in S_end.
	for c := range Dk {
		src, dst := b.kt[c*n:(c+1)*n], b.kwt[c*n:(c+1)*n]
		for jj := range dst {
			dst[jj] = float32(float64(src[jj]) * drow[jj])
		}
	}

	// R = beta*v - beta*e^G * (K·St), and the outputs' e^G * (Q·St).
	for i := range n {
		r := t0 + i
		copy(b.vn[i*Dv:(i+1)*Dv], t.qkv[r*t.width+2*Hk*Dk+j*Dv:][:Dv])
	}
	mulInto(b.vn, Dv, keys, b.st, Dv, n, Dv, Dk, rowScales{keep: true, c: b.beta, r: b.rScale})
	mulInto(out, ldo, queries, b.st, Dv, n, Dv, Dk, rowScales{r: b.eg})

	// Vn = (I+A)^-1 R: each row block takes the rows solved before it in
	// one product, then its own few rows one by one.
	sum := rowScales{keep: true, cAll: 1, rAll: 1}
	for i0 := 0; i0 < n; i0 += tileRows {
		m := min(tileRows, n-i0)
		mulInto(b.vn[i0*Dv:], Dv, strided{b.ak[i0*n:], n, 1}, b.vn, Dv, m, Dv, i0, sum)
		for i := i0 + 1; i < i0+m; i++ {
			for jj := i0; jj < i; jj++ {
				axpy(b.ak[i*n+jj], b.vn[jj*Dv:(jj+1)*Dv], b.vn[i*Dv:(i+1)*Dv])
			}
		}
	}

	// o += (decayed, masked q·k) · Vn, each row block up to its diagonal.
	for i0 := 0; i0 < n; i0 += tileRows {
		m := min(tileRows, n-i0)
		mulInto(out[i0*ldo:], ldo, strided{b.mq[i0*n:], n, 1}, b.vn, Dv, m, Dv, min(n, i0+tileRows), sum)
	}

	// St = e^G[n-1] * St + Kwᵀ · Vn.
	mulInto(b.st, Dv, strided{b.kwt, n, 1}, b.vn, Dv, Dk, Dv, n, rowScales{keep: true, cAll: b.eg[n-1], rAll: 1})
}

// transpose writes the rows x cols matrix src into dst as cols x rows, in
// square blocks so both sides stay in cache.
func transpose(dst, src []float32, rows, cols int) {
	const blk = 16
	for r0 := 0; r0 < rows; r0 += blk {
		for c0 := 0; c0 < cols; c0 += blk {
			for r := r0; r < min(r0+blk, rows); r++ {
				s := src[r*cols : (r+1)*cols]
				for c := c0; c < min(c0+blk, cols); c++ {
					dst[c*rows+r] = s[c]
				}
			}
		}
	}
}
