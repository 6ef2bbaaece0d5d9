// Package backendtest is the conformance suite of the backend contract: the
// plain reference of every op (unfused, in float64, straight from the
// statement in engine/backend/ops.go and the spec) and Run, which a
// backend's tests call to check every op, and whole compiled programs,
// against it.
package backendtest

import (
	"math"

	"petal/engine/quant"
)

// The references below take host copies of an op's inputs and return its
// outputs in float64 (in-place state and caches are updated in place, in
// float32 as the buffers hold them). Row-major layouts as in ops.go.

// Dequantize expands every row of a (stacked) matrix.
func Dequantize(m *quant.Matrix) []float64 {
	R := m.Rows * max(m.Experts, 1)
	out := make([]float64, R*m.Cols)
	row := make([]float32, m.Cols)
	for r := range R {
		m.DequantizeRow(r, row)
		for c, v := range row {
			out[r*m.Cols+c] = float64(v)
		}
	}
	return out
}

// Linear is y = x·Wᵀ for rows rows of x, with W dequantised: [rows, R].
func Linear(w []float64, R, C int, x []float32, rows int) []float64 {
	y := make([]float64, rows*R)
	for t := range rows {
		for r := range R {
			var s float64
			for c := range C {
				s += w[r*C+c] * float64(x[t*C+c])
			}
			y[t*R+r] = s
		}
	}
	return y
}

// RMSNorm is x/sqrt(mean(x²)+eps)·w.
func RMSNorm(x []float64, w []float32, eps float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv * float64(w[i])
	}
	return out
}

// AddRMSNorm: h += delta (when given; h is updated in place, in float32),
// then the normed rows.
func AddRMSNorm(h, delta, w []float32, rows, dim int, eps float32) []float64 {
	out := make([]float64, 0, rows*dim)
	for r := range rows {
		row := h[r*dim : (r+1)*dim]
		x := make([]float64, dim)
		for i := range row {
			if delta != nil {
				row[i] += delta[r*dim+i]
			}
			x[i] = float64(row[i])
		}
		out = append(out, RMSNorm(x, w, eps)...)
	}
	return out
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu(x float64) float64    { return x * sigmoid(x) }
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// ConvSiLU: the causal depthwise conv over [state; x] then SiLU; state
// becomes the last K-1 rows of the window.
func ConvSiLU(x, state, w []float32, L, C, K int) []float64 {
	at := func(r, c int) float32 {
		if r < K-1 {
			return state[r*C+c]
		}
		return x[(r-(K-1))*C+c]
	}
	out := make([]float64, L*C)
	newState := make([]float32, (K-1)*C)
	for c := range C {
		for r := range L {
			var s float64
			for j := range K {
				s += float64(w[c*K+j]) * float64(at(r+j, c))
			}
			out[r*C+c] = silu(s)
		}
		for j := range K - 1 {
			newState[j*C+c] = at(L+j, c)
		}
	}
	copy(state, newState)
	return out
}

// DeltaRule is the gated delta rule head by head and token by token in
// float64, as ops.go states it; state is advanced (rounded to float32 at
// the end, as the buffer holds it).
func DeltaRule(qkv, bb, aa, aLog, dtBias, state []float32, rows, Hk, Dk, Hv, Dv int) []float64 {
	width := 2*Hk*Dk + Hv*Dv
	S := make([]float64, len(state))
	for i, v := range state {
		S[i] = float64(v)
	}
	l2 := func(x []float32, scale float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := scale / math.Sqrt(ss+1e-6)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = float64(v) * inv
		}
		return out
	}
	out := make([]float64, rows*Hv*Dv)
	for r := range rows {
		for j := range Hv {
			kh := j / (Hv / Hk)
			q := l2(qkv[r*width+kh*Dk:][:Dk], 1/math.Sqrt(float64(Dk)))
			k := l2(qkv[r*width+(Hk+kh)*Dk:][:Dk], 1)
			v := qkv[r*width+2*Hk*Dk+j*Dv:][:Dv]
			beta := sigmoid(float64(bb[r*Hv+j]))
			g := math.Exp(-math.Exp(float64(aLog[j])) * softplus(float64(aa[r*Hv+j])+float64(dtBias[j])))
			Sj := S[j*Dv*Dk:][:Dv*Dk]
			for i := range Sj {
				Sj[i] *= g
			}
			for a := range Dv {
				var sk float64
				for c := range Dk {
					sk += Sj[a*Dk+c] * k[c]
				}
				d := beta * (float64(v[a]) - sk)
				for c := range Dk {
					Sj[a*Dk+c] += d * k[c]
				}
			}
			for a := range Dv {
				var o float64
				for c := range Dk {
					o += Sj[a*Dk+c] * q[c]
				}
				out[(r*Hv+j)*Dv+a] = o
			}
		}
	}
	for i, v := range S {
		state[i] = float32(v)
	}
	return out
}

// GatedRMSNorm: per head of dim values, x/rms(x)·w·silu(z).
func GatedRMSNorm(x, z, w []float32, rows, heads, dim int, eps float32) []float64 {
	out := make([]float64, rows*heads*dim)
	for h := range rows * heads {
		xs := make([]float64, dim)
		for i := range xs {
			xs[i] = float64(x[h*dim+i])
		}
		n := RMSNorm(xs, w, eps)
		for i := range n {
			out[h*dim+i] = n[i] * silu(float64(z[h*dim+i]))
		}
	}
	return out
}

// RopeAngle is the angle of pair i at position pos: pos·theta^(-2i/rot),
// in float64.
func RopeAngle(pos, i, rot int, theta float64) float64 {
	return float64(pos) * math.Pow(theta, -float64(2*i)/float64(rot))
}

// Rope rotates pairs (i, i+rot/2) of the first rot values of x at pos.
func Rope(x []float64, pos, rot int, theta float64) {
	half := rot / 2
	for i := range half {
		sin, cos := math.Sincos(RopeAngle(pos, i, rot, theta))
		x1, x2 := x[i], x[i+half]
		x[i] = x1*cos - x2*sin
		x[i+half] = x1*sin + x2*cos
	}
}

// QKPrep returns the prepared queries and writes k (normed, rotated) and v
// into the caches at rows pos..pos+rows-1 (in float32, as they hold them);
// it also returns the rotated keys in float64.
func QKPrep(qg, k, v, qn, kn, kc, vc []float32, pos, rows, QH, KVH, D, rot int, theta float64, eps float32) (q, keys []float64) {
	kvW := KVH * D
	for r := range rows {
		for h := range QH {
			x := RMSNorm(widen(qg[(r*QH+h)*2*D:][:D]), qn, eps)
			Rope(x, pos+r, rot, theta)
			q = append(q, x...)
		}
		for h := range KVH {
			x := RMSNorm(widen(k[r*kvW+h*D:][:D]), kn, eps)
			Rope(x, pos+r, rot, theta)
			keys = append(keys, x...)
			for i, f := range x {
				kc[(pos+r)*kvW+h*D+i] = float32(f)
			}
			copy(vc[(pos+r)*kvW+h*D:][:D], v[r*kvW+h*D:][:D])
		}
	}
	return q, keys
}

func widen(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Attention is causal GQA per (token, head) in float64: row r at position
// pos+r attends to cache rows 0..pos+r; the output gated by sigmoid of the
// gate that follows each query in qg.
func Attention(q, qg, kc, vc []float32, pos, rows, QH, KVH, D int) []float64 {
	kvW, group := KVH*D, QH/KVH
	out := make([]float64, rows*QH*D)
	for r := range rows {
		n := pos + r + 1
		for h := range QH {
			kv := h / group
			scores := make([]float64, n)
			maxScore := math.Inf(-1)
			for s := range scores {
				for j := range D {
					scores[s] += float64(q[(r*QH+h)*D+j]) * float64(kc[s*kvW+kv*D+j])
				}
				scores[s] /= math.Sqrt(float64(D))
				maxScore = max(maxScore, scores[s])
			}
			var sum float64
			for s := range scores {
				scores[s] = math.Exp(scores[s] - maxScore)
				sum += scores[s]
			}
			for j := range D {
				var acc float64
				for s, p := range scores {
					acc += p * float64(vc[s*kvW+kv*D+j])
				}
				out[(r*QH+h)*D+j] = acc / sum * sigmoid(float64(qg[(r*QH+h)*2*D+D+j]))
			}
		}
	}
	return out
}

// Route: softmax over the router logits, the topK most probable experts
// (the lower index first on ties), their probabilities, renormalised when
// normalize.
func Route(router []float64, E, C int, x []float32, rows, topK int, normalize bool) (idx []int32, wts []float64) {
	return RouteLogits(Linear(router, E, C, x, rows), E, rows, topK, normalize)
}

// RouteLogits is Route from given logits [rows, E].
func RouteLogits(logits []float64, E, rows, topK int, normalize bool) (idx []int32, wts []float64) {
	for t := range rows {
		l := logits[t*E : (t+1)*E]
		m := math.Inf(-1)
		for _, v := range l {
			m = max(m, v)
		}
		var sum float64
		p := make([]float64, E)
		for e, v := range l {
			p[e] = math.Exp(v - m)
			sum += p[e]
		}
		taken := make([]bool, E)
		var sel []float64
		for range topK {
			best := -1
			for e := range p {
				if !taken[e] && (best < 0 || p[e] > p[best]) {
					best = e
				}
			}
			taken[best] = true
			idx = append(idx, int32(best))
			sel = append(sel, p[best]/sum)
		}
		if normalize {
			var total float64
			for _, v := range sel {
				total += v
			}
			for i := range sel {
				sel[i] /= total
			}
		}
		wts = append(wts, sel...)
	}
	return idx, wts
}

// SwiGLU is down(silu(gate·x) ⊙ up·x) for one row x, the matrices
// dequantised: gate, up [inter, dim], down [dim, inter].
func SwiGLU(gate, up, down []float64, inter, dim int, x []float32) []float64 {
	g := Linear(gate, inter, dim, x, 1)
	u := Linear(up, inter, dim, x, 1)
	hs := make([]float64, inter)
	for i := range hs {
		hs[i] = silu(g[i]) * u[i]
	}
	out := make([]float64, dim)
	for r := range dim {
		var s float64
		for c := range inter {
			s += down[r*inter+c] * hs[c]
		}
		out[r] = s
	}
	return out
}

// PairRows makes each odd row of m (its stacked matrices taken as one)
// a copy of the row before it, codes, scales and biases, so that a router
// over m has exact ties in pairs: the tests of the top-k choice check that
// the lower id wins them.
func PairRows(m *quant.Matrix) {
	wpr, gpr := m.WordsPerRow(), m.GroupsPerRow()
	for r := 1; r < max(m.Experts, 1)*m.Rows; r += 2 {
		copy(m.Words[r*wpr:(r+1)*wpr], m.Words[(r-1)*wpr:r*wpr])
		copy(m.Scales[r*gpr:(r+1)*gpr], m.Scales[(r-1)*gpr:r*gpr])
		copy(m.Biases[r*gpr:(r+1)*gpr], m.Biases[(r-1)*gpr:r*gpr])
	}
}
