package cpu

import (
	"math"

	"petal/engine/backend"
	"petal/engine/quant"
)

// route: router logits, softmax over all experts, top-k (lower index wins a
// tie), weights renormalised over the selected experts.
func (b *Backend) route(o *backend.Route) {
	x, idx, wts := F(o.X), I(o.Idx), F(o.Weights)
	router := q(o.Router)
	E := router.Rows
	logits := b.scratch.get(slotRoute, o.Rows*E)
	b.linear(router, x, o.Rows, logits)
	for t := 0; t < o.Rows; t++ {
		l := logits[t*E : (t+1)*E]
		maxL := l[0]
		for _, v := range l {
			maxL = max(maxL, v)
		}
		var sum float64
		for e, v := range l {
			p := math.Exp(float64(v - maxL))
			l[e] = float32(p)
			sum += p
		}
		for e := range l {
			l[e] = float32(float64(l[e]) / sum)
		}
		sel, w := idx[t*o.TopK:(t+1)*o.TopK], wts[t*o.TopK:(t+1)*o.TopK]
		topExperts(l, sel, w)
		var total float64
		for _, p := range w {
			total += float64(p)
		}
		if o.Normalize {
			for k := range w {
				w[k] = float32(float64(w[k]) / total)
			}
		}
	}
}

// topExperts writes the len(sel) most probable experts of probs into sel,
// best first, and their probabilities into w; it overwrites the chosen
// entries of probs. The lower index wins a tie and NaN ranks below every
// number, so a damaged router still selects distinct, valid experts, and its
// NaN weights carry the damage on to the logits, where it is caught.
func topExperts(probs []float32, sel []int32, w []float32) {
	const taken = -1 // below every probability, and not NaN
	for k := range sel {
		best := -1
		for e, p := range probs {
			if p == taken {
				continue
			}
			if best < 0 || p > probs[best] || probs[best] != probs[best] && p == p {
				best = e
			}
		}
		sel[k], w[k] = int32(best), probs[best]
		probs[best] = taken
	}
}

// linear: y = x·Wᵀ for rows rows of x; mat-vec for one row (decode), mat-mat
// otherwise (prefill).
func (b *Backend) linear(w *quant.Matrix, x []float32, rows int, y []float32) {
	if rows == 1 {
		quant.MatVec(w, x[:w.Cols], y[:w.Rows*w.Experts])
		return
	}
	quant.MatMul(w, x[:rows*w.Cols], rows, y[:rows*w.Rows*w.Experts])
}

// embed dequantises the looked-up rows of the table.
func (b *Backend) embed(o *backend.Embed) {
	tokens, out := I(o.Tokens), F(o.Out)
	t := q(o.Table)
	for i := 0; i < o.Rows; i++ {
		t.DequantizeRow(int(tokens[i]), out[i*t.Cols:(i+1)*t.Cols])
	}
}
