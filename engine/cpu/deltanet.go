package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// convTask: causal depthwise conv over [state; x] then SiLU; the state
// keeps the last K-1 pre-conv rows, oldest first. One task per channel range.
type convTask struct {
	o                *backend.ConvSiLU
	x, state, w, out []float32
}

func (b *Backend) convSiLU(o *backend.ConvSiLU) {
	t := &b.tasks.conv
	t.o, t.x, t.state, t.w, t.out = o, F(o.X), F(o.State), F(o.Weight), F(o.Out)
	parallel.For(o.Chans, 256, b.tasks.convFn)
}

// at is row t of the window [state; x].
func (t *convTask) at(row, c int) float32 {
	K, C := t.o.K, t.o.Chans
	if row < K-1 {
		return t.state[row*C+c]
	}
	return t.x[(row-(K-1))*C+c]
}

func (t *convTask) run(lo, hi int) {
	C, K, L := t.o.Chans, t.o.K, t.o.Rows
	for c := lo; c < hi; c++ {
		taps := t.w[c*K : (c+1)*K]
		for r := 0; r < L; r++ {
			var s float32
			for j := 0; j < K; j++ {
				s += taps[j] * t.at(r+j, c)
			}
			t.out[r*C+c] = silu(s)
		}
		// new state = the last K-1 rows of [state; x]
		var keep [8]float32
		for j := 0; j < K-1; j++ {
			keep[j] = t.at(L+j, c)
		}
		for j := 0; j < K-1; j++ {
			t.state[j*C+c] = keep[j]
		}
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
	kq := dot(k, q)
	for r := 0; r < Dv; r++ {
		row := S[r*Dk : (r+1)*Dk]
		sk, sq := dot2(row, k, q)
		d := beta * (v[r] - g*sk)
		o[r] = g*sq + d*kq
		scaleAdd(g, d, k, row)
	}
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
