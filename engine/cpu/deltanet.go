package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// convSiLU: causal depthwise conv over [state; x] then SiLU; the state keeps
// the last K-1 pre-conv rows, oldest first.
func convSiLU(o *backend.ConvSiLU) {
	x, state, w, out := F(o.X), F(o.State), F(o.Weight), F(o.Out)
	C, K, L := o.Chans, o.K, o.Rows
	// row t of the window [state; x]: state rows first, then x rows
	at := func(t, c int) float32 {
		if t < K-1 {
			return state[t*C+c]
		}
		return x[(t-(K-1))*C+c]
	}
	parallel.For(C, 256, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			taps := w[c*K : (c+1)*K]
			for t := 0; t < L; t++ {
				var s float32
				for j := 0; j < K; j++ {
					s += taps[j] * at(t+j, c)
				}
				out[t*C+c] = silu(s)
			}
			// new state = the last K-1 rows of [state; x]
			var keep [8]float32
			for j := 0; j < K-1; j++ {
				keep[j] = at(L+j, c)
			}
			for j := 0; j < K-1; j++ {
				state[j*C+c] = keep[j]
			}
		}
	})
}

// deltaRule runs the gated delta rule sequentially over the chunk, one value
// head per task; the state of a head never leaves its task.
func (b *Backend) deltaRule(o *backend.DeltaRule) {
	qkv, bb, aa := F(o.QKV), F(o.B), F(o.A)
	aLog, dtBias, state, out := F(o.ALog), F(o.DtBias), F(o.State), F(o.Out)
	Hk, Dk, Hv, Dv := o.KeyHeads, o.KeyDim, o.ValueHeads, o.ValueDim
	width := 2*Hk*Dk + Hv*Dv
	group := Hv / Hk
	L := o.Rows

	// q and k of every key head, L2-normalised once (q also scaled)
	qk := b.scratch.get(slotDelta, L*2*Hk*Dk)
	qScale := float32(1 / math.Sqrt(float64(Dk)))
	parallel.For(L*2*Hk, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/(2*Hk), i%(2*Hk)
			scale := float32(1)
			if h < Hk {
				scale = qScale
			}
			src := qkv[t*width+h*Dk : t*width+(h+1)*Dk]
			l2Normalize(src, qk[i*Dk:(i+1)*Dk], scale)
		}
	})
	parallel.For(Hv, 1, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			S := state[j*Dv*Dk : (j+1)*Dv*Dk]
			kh := j / group
			negA := -math.Exp(float64(aLog[j]))
			for t := 0; t < L; t++ {
				q := qk[(t*2*Hk+kh)*Dk : (t*2*Hk+kh+1)*Dk]
				k := qk[(t*2*Hk+Hk+kh)*Dk : (t*2*Hk+Hk+kh+1)*Dk]
				v := qkv[t*width+2*Hk*Dk+j*Dv : t*width+2*Hk*Dk+(j+1)*Dv]
				beta := sigmoid(bb[t*Hv+j])
				g := float32(math.Exp(negA * softplus(float64(aa[t*Hv+j])+float64(dtBias[j]))))
				deltaStep(S, q, k, v, beta, g, out[t*Hv*Dv+j*Dv:t*Hv*Dv+(j+1)*Dv], Dv, Dk)
			}
		}
	})
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
		for c := range row {
			row[c] = g*row[c] + d*k[c]
		}
	}
}

// dot2 returns (a·x, a·y) in one pass over a.
func dot2(a, x, y []float32) (float32, float32) {
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
