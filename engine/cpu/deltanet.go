package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// convTask: causal depthwise conv over [state; x] then SiLU; the state
// keeps the last K-1 pre-conv rows, oldest first. One task per channel
// range, walked token by token so every row is read contiguously.
type convTask struct {
	o                *backend.ConvSiLU
	x, state, w, out []float32
}

func (b *Backend) convSiLU(o *backend.ConvSiLU) {
	t := &b.tasks.conv
	t.o, t.x, t.state, t.w, t.out = o, F(o.X), F(o.State), F(o.Weight), F(o.Out)
	parallel.For(o.Chans, 256, b.tasks.convFn)
}

// window is channels [lo, hi) of row r of the window [state; x].
func (t *convTask) window(r, lo, hi int) []float32 {
	K, C := t.o.K, t.o.Chans
	if r < K-1 {
		return t.state[r*C+lo : r*C+hi]
	}
	return t.x[(r-(K-1))*C+lo : (r-(K-1))*C+hi]
}

// maxConvTaps bounds K, so the window rows of a token fit an array.
const maxConvTaps = 8

func (t *convTask) run(lo, hi int) {
	C, K, L := t.o.Chans, t.o.K, t.o.Rows
	if K > maxConvTaps {
		panic("cpu: conv kernel wider than maxConvTaps")
	}
	w := t.w[lo*K : hi*K]
	var rows [maxConvTaps][]float32
	for r := 0; r < L; r++ {
		for j := range K {
			rows[j] = t.window(r+j, lo, hi)
		}
		out := t.out[r*C+lo : r*C+hi]
		if K == 4 {
			conv4(w, rows[0], rows[1], rows[2], rows[3], out)
		} else {
			for c := range out {
				var s float32
				for j, row := range rows[:K] {
					s += w[c*K+j] * row[c]
				}
				out[c] = s
			}
		}
		siluRow(out)
	}
	// The new state is the last K-1 rows of [state; x]. Row j takes row
	// L+j, which is later, so ascending order never reads an overwritten row.
	for j := 0; j < K-1; j++ {
		copy(t.state[j*C+lo:j*C+hi], t.window(L+j, lo, hi))
	}
}

// conv4 is the sum of run for the usual 4 taps, with the window rows in
// variables so the compiler drops the bounds checks: same sums, same order.
func conv4(w, x0, x1, x2, x3, out []float32) {
	x0, x1, x2, x3 = x0[:len(out)], x1[:len(out)], x2[:len(out)], x3[:len(out)]
	for c := range out {
		taps := w[4*c : 4*c+4 : 4*c+4]
		var s float32
		s += taps[0] * x0[c]
		s += taps[1] * x1[c]
		s += taps[2] * x2[c]
		s += taps[3] * x3[c]
		out[c] = s
	}
}

// deltaTask runs the gated delta rule over a chunk: first the q and k of
// every key head are L2-normalised once (q also scaled by Dk^-1/2), then
// each value head runs its recurrence sequentially in its own task, so the
// state of a head never leaves it.
type deltaTask struct {
	o                         *backend.DeltaRule
	qkv, bb, aa, aLog, dtBias []float32
	state, out, qk            []float32
	width, group              int
	qScale                    float32

	// The chunked form (deltachunk.go): its scratch and how it is cut.
	chunk        chunkLayout
	chunkScratch []float32
}

func (b *Backend) deltaRule(o *backend.DeltaRule) {
	t := &b.tasks.delta
	t.o = o
	t.qkv, t.bb, t.aa = F(o.QKV), F(o.B), F(o.A)
	t.aLog, t.dtBias, t.state, t.out = F(o.ALog), F(o.DtBias), F(o.State), F(o.Out)
	t.width = 2*o.KeyHeads*o.KeyDim + o.ValueHeads*o.ValueDim
	t.group = o.ValueHeads / o.KeyHeads
	t.qScale = float32(1 / math.Sqrt(float64(o.KeyDim)))
	t.qk = b.scratch.get(slotDelta, o.Rows*2*o.KeyHeads*o.KeyDim)
	// Options.DeltaRule: the chunked form (deltachunk.go) where chosen.
	if b.useChunkedDelta(o.Rows) {
		b.deltaRuleChunked(o)
		return
	}
	parallel.For(o.Rows*2*o.KeyHeads, 16, b.tasks.deltaNormFn)
	parallel.For(o.ValueHeads, 1, b.tasks.deltaFn)
}

func (t *deltaTask) normalize(lo, hi int) {
	Hk, Dk := t.o.KeyHeads, t.o.KeyDim
	for i := lo; i < hi; i++ {
		r, h := i/(2*Hk), i%(2*Hk)
		scale := float32(1)
		if h < Hk {
			scale = t.qScale
		}
		l2Normalize(t.qkv[r*t.width+h*Dk:r*t.width+(h+1)*Dk], t.qk[i*Dk:(i+1)*Dk], scale)
	}
}

func (t *deltaTask) run(lo, hi int) {
	Hk, Dk, Hv, Dv := t.o.KeyHeads, t.o.KeyDim, t.o.ValueHeads, t.o.ValueDim
	for j := lo; j < hi; j++ {
		S := t.state[j*Dv*Dk : (j+1)*Dv*Dk]
		kh := j / t.group
		negA := -math.Exp(float64(t.aLog[j]))
		for r := 0; r < t.o.Rows; r++ {
			q := t.qk[(r*2*Hk+kh)*Dk : (r*2*Hk+kh+1)*Dk]
			k := t.qk[(r*2*Hk+Hk+kh)*Dk : (r*2*Hk+Hk+kh+1)*Dk]
			v := t.qkv[r*t.width+2*Hk*Dk+j*Dv : r*t.width+2*Hk*Dk+(j+1)*Dv]
			beta := sigmoid(t.bb[r*Hv+j])
			g := float32(math.Exp(negA * softplus(float64(t.aa[r*Hv+j])+float64(t.dtBias[j]))))
			deltaStep(S, q, k, v, beta, g, t.out[r*Hv*Dv+j*Dv:r*Hv*Dv+(j+1)*Dv], Dv, Dk)
		}
	}
}

// deltaStep: S = g*S; d = beta*(v - S·k); S += d⊗k; o = S·q, with S
// [Dv][Dk]. Row by row, both reads of S use the old row:
// S·k = g*(S_old·k) and S·q = g*(S_old·q) + d*(k·q), so each row is read
// once for two dot products and written once.
func deltaStep(S, q, k, v []float32, beta, g float32, o []float32, Dv, Dk int) {
	deltaRows(S[:Dv*Dk], k[:Dk], q[:Dk], v[:Dv], o[:Dv], beta, g, dot(k, q))
}

// l2Normalize writes x/sqrt(Σx²+1e-6)*scale into dst.
func l2Normalize(x, dst []float32, scale float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1/math.Sqrt(ss+1e-6)) * scale
	for i, v := range x {
		dst[i] = v * inv
	}
}

func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}
