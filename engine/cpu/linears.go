package cpu

import (
	"petal/engine/backend"
	"petal/engine/parallel"
	"petal/engine/quant"
)

// linearsTask runs a one-row QLinearGroup (the projections of a decode
// step: q, k, v, or qkv, z, b, a) as one parallel loop over blocks of all
// its rows, with the input laid out once: one wait for the cores instead of
// one per matrix.
type linearsTask struct {
	in     quant.VecInput
	ws     []*quant.Matrix
	ys     [][]float32
	blocks []rowBlock
}

// rowBlock is rows [r0, r1) of matrix w.
type rowBlock struct{ w, r0, r1 int }

// linearGroup runs o: one row through the shared loop (matrices of another
// kind than the first, which cannot share its laid-out input, alone), more
// rows as one mat-mat per matrix. Each output is the same bits as a
// QLinear's.
func (b *Backend) linearGroup(o *backend.QLinearGroup) {
	x, y := F(o.X), F(o.Y)
	if o.Rows != 1 || len(o.W) == 1 {
		off := 0
		for _, m := range o.W {
			w := q(m)
			n := o.Rows * w.Rows * w.Experts
			b.linear(w, x, o.Rows, y[off:off+n])
			off += n
		}
		return
	}
	t := &b.tasks.linears
	t.ws, t.ys, t.blocks = t.ws[:0], t.ys[:0], t.blocks[:0]
	first := q(o.W[0])
	t.in.Prepare(first, x[:first.Cols])
	off, total := 0, 0
	for _, m := range o.W {
		w := q(m)
		R := w.Rows * w.Experts
		if t.in.Fits(w) {
			t.ws = append(t.ws, w)
			t.ys = append(t.ys, y[off:off+R])
			total += R
		}
		off += R
	}
	block := max(4, (total+8*parallel.Workers()-1)/(8*parallel.Workers()))
	for i, w := range t.ws {
		R := w.Rows * w.Experts
		for r0 := 0; r0 < R; r0 += block {
			t.blocks = append(t.blocks, rowBlock{i, r0, min(R, r0+block)})
		}
	}
	parallel.For(len(t.blocks), 1, b.tasks.linearsFn)
	off = 0
	for _, m := range o.W {
		w := q(m)
		R := w.Rows * w.Experts
		if !t.in.Fits(w) {
			quant.MatVec(w, x[:w.Cols], y[off:off+R])
		}
		off += R
	}
}

func (t *linearsTask) run(lo, hi int) {
	for _, blk := range t.blocks[lo:hi] {
		t.in.MulRows(t.ws[blk.w], blk.r0, blk.r1, t.ys[blk.w][blk.r0:blk.r1])
	}
}
