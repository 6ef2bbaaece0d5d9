package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// prepTask: q/k RMSNorm, partial RoPE at the chunk's positions, K and V
// into the caches. One task per (token, head), query heads first.
type prepTask struct {
	o                           *backend.QKPrep
	qg, k, v, q, qn, kn, kc, vc []float32
}

func (b *Backend) qkPrep(o *backend.QKPrep) {
	t := &b.tasks.prep
	t.o, t.qg, t.k, t.v, t.q = o, F(o.QG), F(o.K), F(o.V), F(o.Q)
	t.qn, t.kn, t.kc, t.vc = F(o.QNorm), F(o.KNorm), F(o.KCache), F(o.VCache)
	parallel.For(o.Rows*(o.QHeads+o.KVHeads), 8, b.tasks.prepFn)
}

func (t *prepTask) run(lo, hi int) {
	o := t.o
	D, kvW, heads := o.HeadDim, o.KVHeads*o.HeadDim, o.QHeads+o.KVHeads
	for i := lo; i < hi; i++ {
		r, h := i/heads, i%heads
		pos := o.Pos0 + r
		if h < o.QHeads {
			dst := t.q[r*o.QHeads*D+h*D:][:D]
			rmsNorm(t.qg[r*o.QHeads*2*D+h*2*D:][:D], t.qn, dst, o.Eps)
			rope(dst, pos, o.RotaryDim, o.RopeTheta)
			continue
		}
		h -= o.QHeads
		dst := t.kc[pos*kvW+h*D:][:D]
		rmsNorm(t.k[r*kvW+h*D:][:D], t.kn, dst, o.Eps)
		rope(dst, pos, o.RotaryDim, o.RopeTheta)
		copy(t.vc[pos*kvW+h*D:][:D], t.v[r*kvW+h*D:][:D])
	}
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

// attnTask: causal GQA with a one-pass (online) softmax, then the sigmoid
// output gate. One task per (token, query head).
type attnTask struct {
	o                  *backend.Attention
	q, qg, kc, vc, out []float32
}

func (b *Backend) attention(o *backend.Attention) {
	t := &b.tasks.attn
	t.o, t.q, t.qg, t.kc, t.vc, t.out = o, F(o.Q), F(o.QG), F(o.KCache), F(o.VCache), F(o.Out)
	parallel.For(o.Rows*o.QHeads, 2, b.tasks.attnFn)
}

func (t *attnTask) run(lo, hi int) {
	o := t.o
	D, QH := o.HeadDim, o.QHeads
	kvW := o.KVHeads * D
	group := QH / o.KVHeads
	scale := float32(1 / math.Sqrt(float64(D)))
	for i := lo; i < hi; i++ {
		r, h := i/QH, i%QH
		kv := h / group
		qv := t.q[r*QH*D+h*D:][:D]
		acc := t.out[r*QH*D+h*D:][:D]
		clear(acc)
		maxScore, sum := float32(math.Inf(-1)), float32(0)
		for s := 0; s <= o.Pos0+r; s++ {
			score := dot(qv, t.kc[s*kvW+kv*D:][:D]) * scale
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
			axpy(p, t.vc[s*kvW+kv*D:][:D], acc)
		}
		gate := t.qg[r*QH*2*D+h*2*D+D:][:D]
		for j := range acc {
			acc[j] = acc[j] / sum * sigmoid(gate[j])
		}
	}
}
