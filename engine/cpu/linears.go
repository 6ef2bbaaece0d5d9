package cpu

import (
	"petal/engine/backend"
	"petal/engine/parallel"
	"petal/engine/quant"
)

// linearsTask runs consecutive one-row QLinear ops that read the same input
// (the projections of a decode step: q, k, v, or qkv, z, b, a) as one
// parallel loop over blocks of all their rows, with the input laid out
// once: one wait for the cores instead of one per matrix.
type linearsTask struct {
	in     quant.VecInput
	ws     []*quant.Matrix
	ys     [][]float32
	blocks []rowBlock
}

// rowBlock is rows [r0, r1) of matrix w.
type rowBlock struct{ w, r0, r1 int }

// maxGroupedLinears bounds how many consecutive ops one loop takes.
const maxGroupedLinears = 8

// sharedInputLinears is how many ops from ops[0] are one-row QLinears over
// the same input buffer with matrices of one kind (at least 1 if ops[0] is
// a QLinear).
func sharedInputLinears(ops []backend.Op) int {
	first, ok := ops[0].(*backend.QLinear)
	if !ok {
		return 0
	}
	if first.Rows != 1 || first.Y.Overlaps(first.X) {
		return 1
	}
	w0 := q(first.W)
	n := 1
	for n < len(ops) && n < maxGroupedLinears {
		o, ok := ops[n].(*backend.QLinear)
		if !ok || o.Rows != 1 || o.X != first.X || o.Y.Overlaps(o.X) || writesOverlap(ops[:n], o.Y) {
			break
		}
		w := q(o.W)
		if w.Cols != w0.Cols || w.Bits != w0.Bits || w.GroupSize != w0.GroupSize {
			break
		}
		n++
	}
	return n
}

// writesOverlap reports whether y overlaps the output of one of ops.
func writesOverlap(ops []backend.Op, y backend.Buffer) bool {
	for _, op := range ops {
		if op.(*backend.QLinear).Y.Overlaps(y) {
			return true
		}
	}
	return false
}

// linears runs ops (as chosen by sharedInputLinears) together.
func (b *Backend) linears(ops []backend.Op) {
	if len(ops) == 1 {
		o := ops[0].(*backend.QLinear)
		b.linear(q(o.W), F(o.X), o.Rows, F(o.Y))
		return
	}
	t := &b.tasks.linears
	t.ws, t.ys, t.blocks = t.ws[:0], t.ys[:0], t.blocks[:0]
	total := 0
	for _, op := range ops {
		o := op.(*backend.QLinear)
		w := q(o.W)
		t.ws = append(t.ws, w)
		t.ys = append(t.ys, F(o.Y))
		total += w.Rows * w.Experts
	}
	first := ops[0].(*backend.QLinear)
	t.in.Prepare(t.ws[0], F(first.X)[:t.ws[0].Cols])
	block := max(4, (total+8*parallel.Workers()-1)/(8*parallel.Workers()))
	for i, w := range t.ws {
		R := w.Rows * w.Experts
		for r0 := 0; r0 < R; r0 += block {
			t.blocks = append(t.blocks, rowBlock{i, r0, min(R, r0+block)})
		}
	}
	parallel.For(len(t.blocks), 1, b.tasks.linearsFn)
}

func (t *linearsTask) run(lo, hi int) {
	for _, blk := range t.blocks[lo:hi] {
		t.in.MulRows(t.ws[blk.w], blk.r0, blk.r1, t.ys[blk.w][blk.r0:blk.r1])
	}
}
