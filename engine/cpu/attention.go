package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// qkPrep: q/k RMSNorm, partial RoPE at the chunk's positions, K and V into
// the caches.
func qkPrep(o *backend.QKPrep) {
	qg, k, v, q := F(o.QG), F(o.K), F(o.V), F(o.Q)
	qn, kn, kc, vc := F(o.QNorm), F(o.KNorm), F(o.KCache), F(o.VCache)
	D, kvW := o.HeadDim, o.KVHeads*o.HeadDim
	heads := o.QHeads + o.KVHeads
	parallel.For(o.Rows*heads, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/heads, i%heads
			pos := o.Pos0 + t
			if h < o.QHeads {
				src := qg[t*o.QHeads*2*D+h*2*D:][:D]
				dst := q[t*o.QHeads*D+h*D:][:D]
				rmsNorm(src, qn, dst, o.Eps)
				rope(dst, pos, o.RotaryDim, o.RopeTheta)
				continue
			}
			h -= o.QHeads
			dst := kc[pos*kvW+h*D:][:D]
			rmsNorm(k[t*kvW+h*D:][:D], kn, dst, o.Eps)
			rope(dst, pos, o.RotaryDim, o.RopeTheta)
			copy(vc[pos*kvW+h*D:][:D], v[t*kvW+h*D:][:D])
		}
	})
}

// rope rotates pairs (i, i+rot/2) of the first rot dims by pos·theta^(-2i/rot).
func rope(x []float32, pos, rot int, theta float64) {
	half := rot / 2
	for i := 0; i < half; i++ {
		angle := float64(pos) * math.Pow(theta, -float64(2*i)/float64(rot))
		sin, cos := math.Sincos(angle)
		x1, x2 := float64(x[i]), float64(x[i+half])
		x[i] = float32(x1*cos - x2*sin)
		x[i+half] = float32(x1*sin + x2*cos)
	}
}

// attention: causal GQA with a one-pass (online) softmax, then the sigmoid
// output gate. One task per (token, query head).
func (b *Backend) attention(o *backend.Attention) {
	q, qg, kc, vc, out := F(o.Q), F(o.QG), F(o.KCache), F(o.VCache), F(o.Out)
	D, QH := o.HeadDim, o.QHeads
	kvW := o.KVHeads * D
	group := QH / o.KVHeads
	scale := float32(1 / math.Sqrt(float64(D)))
	parallel.For(o.Rows*QH, 2, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/QH, i%QH
			kv := h / group
			qv := q[t*QH*D+h*D:][:D]
			acc := out[t*QH*D+h*D:][:D]
			clear(acc)
			maxScore, sum := float32(math.Inf(-1)), float32(0)
			for s := 0; s <= o.Pos0+t; s++ {
				score := dot(qv, kc[s*kvW+kv*D:][:D]) * scale
				if score > maxScore {
					c := float32(math.Exp(float64(maxScore - score)))
					sum *= c
					for j := range acc {
						acc[j] *= c
					}
					maxScore = score
				}
				p := float32(math.Exp(float64(score - maxScore)))
				sum += p
				axpy(p, vc[s*kvW+kv*D:][:D], acc)
			}
			gate := qg[t*QH*2*D+h*2*D+D:][:D]
			for j := range acc {
				acc[j] = acc[j] / sum * sigmoid(gate[j])
			}
		}
	})
}

func dot(a, b []float32) float32 {
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

// axpy: y += a*x.
func axpy(a float32, x, y []float32) {
	for i := range y {
		y[i] += a * x[i]
	}
}
