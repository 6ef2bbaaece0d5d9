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
		var total float64
		for k := range sel {
			best := -1
			for e, p := range l {
				if p >= 0 && (best < 0 || p > l[best]) {
					best = e
				}
			}
			sel[k], w[k] = int32(best), l[best]
			total += float64(l[best])
			l[best] = -1 // taken
		}
		if o.Normalize {
			for k := range w {
				w[k] = float32(float64(w[k]) / total)
			}
		}
	}
}

// experts: the routed SwiGLU experts, computed expert by expert over the rows
// routed to each (so each expert's weights are read once per chunk), plus the
// sigmoid-gated shared expert.
func (b *Backend) experts(o *backend.Experts) {
	x, idx, wts, out := F(o.X), I(o.Idx), F(o.Weights), F(o.Out)
	gate, up, down := q(o.Gate), q(o.Up), q(o.Down)
	H, I, K, n := gate.Cols, o.Inter, o.TopK, o.Rows

	// shared expert first: it writes every output row
	SI := o.SharedInter
	sg := b.scratch.get(slotExpertH, n*SI)
	su := b.scratch.get(slotExpertU, n*SI)
	b.linear(q(o.SharedGate), x, n, sg)
	b.linear(q(o.SharedUp), x, n, su)
	for i := range sg {
		sg[i] = silu(sg[i]) * su[i]
	}
	b.linear(q(o.SharedDown), sg, n, out)
	gateLogit := b.scratch.get(slotShared, n)
	b.linear(q(o.SharedExpertGate), x, n, gateLogit)
	for t := 0; t < n; t++ {
		s := sigmoid(gateLogit[t])
		row := out[t*H : (t+1)*H]
		for i := range row {
			row[i] *= s
		}
	}

	// routed experts, grouped: rows[e] lists the (token, slot) pairs of expert e
	xg := b.scratch.get(slotExpertX, n*H)
	hg := b.scratch.get(slotExpertH, n*I)
	ug := b.scratch.get(slotExpertU, n*I)
	yg := b.scratch.get(slotExpertY, n*H)
	for e := 0; e < gate.Experts; e++ {
		m := 0
		for i, v := range idx[:n*K] {
			if int(v) == e {
				copy(xg[m*H:(m+1)*H], x[(i/K)*H:(i/K+1)*H])
				m++
			}
		}
		if m == 0 {
			continue
		}
		b.views = [3]quant.Matrix{gate.Expert(e), up.Expert(e), down.Expert(e)}
		b.linear(&b.views[0], xg[:m*H], m, hg[:m*I])
		b.linear(&b.views[1], xg[:m*H], m, ug[:m*I])
		for i := range hg[:m*I] {
			hg[i] = silu(hg[i]) * ug[i]
		}
		b.linear(&b.views[2], hg[:m*I], m, yg[:m*H])
		j := 0
		for i, v := range idx[:n*K] {
			if int(v) == e {
				axpy(wts[i], yg[j*H:(j+1)*H], out[(i/K)*H:(i/K+1)*H])
				j++
			}
		}
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
