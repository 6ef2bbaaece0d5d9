package cpu

import (
	"petal/engine/backend"
	"petal/engine/parallel"
	"petal/engine/quant"
)

// expertsTask computes the mixture of experts as one grouped pass: the rows
// routed to each expert are gathered, then every (expert, block of weight
// rows) pair is a task of one parallel loop, so the cores share the work
// of all experts at once instead of splitting each small matrix among
// themselves (a decode step has eight experts of one row each). The shared
// expert is one more group, of every row.
type expertsTask struct {
	o                 *backend.Experts
	groups            []expertGroup
	tasks             []weightBlock
	views             []quant.Matrix   // one per task: the block's rows of the weight
	inputs            []quant.VecInput // per group of one row: its input, laid out once
	xg, h, y, tmp     []float32
	gate, up, down    *quant.Matrix
	sGate, sUp, sDown *quant.Matrix
	H                 int
	phase             int // 1: gate and up, 2: down
}

// expertGroup is one expert and the chunk rows routed to it.
type expertGroup struct {
	expert     int // -1: the shared expert
	row0, rows int // its gathered rows: xg[row0 : row0+rows]
	inter      int // intermediate size
	hOff       int // its hidden activations: h[hOff : hOff+rows*inter]
}

// weightBlock is rows [r0, r1) of one group's weight, and where its
// [rows, r1-r0] result goes in tmp.
type weightBlock struct {
	group, r0, r1, tmp int
}

func (b *Backend) experts(o *backend.Experts) {
	t := &b.tasks.experts
	x, idx, wts, out := F(o.X), I(o.Idx), F(o.Weights), F(o.Out)
	t.o, t.gate, t.up, t.down = o, q(o.Gate), q(o.Up), q(o.Down)
	t.sGate, t.sUp, t.sDown = q(o.SharedGate), q(o.SharedUp), q(o.SharedDown)
	H, K, n := t.gate.Cols, o.TopK, o.Rows
	t.H = H

	// group the routed rows by expert (expert order), then the shared expert
	t.groups = t.groups[:0]
	var count [1024]int32 // rows routed to each expert (on the stack for up to 1024 experts)
	var counts []int32
	if t.gate.Experts <= len(count) {
		counts = count[:t.gate.Experts]
	} else {
		counts = make([]int32, t.gate.Experts)
	}
	for _, e := range idx[:n*K] {
		counts[e]++
	}
	rows, hOff := 0, 0
	for e, c := range counts {
		if c > 0 {
			t.groups = append(t.groups, expertGroup{expert: e, row0: rows, rows: int(c), inter: o.Inter, hOff: hOff})
			rows += int(c)
			hOff += int(c) * o.Inter
		}
	}
	t.groups = append(t.groups, expertGroup{expert: -1, row0: rows, rows: n, inter: o.SharedInter, hOff: hOff})
	hOff += n * o.SharedInter
	rows += n

	t.xg = b.scratch.get(slotExpertX, rows*H)
	for g := range t.groups[:len(t.groups)-1] {
		gr := &t.groups[g]
		m := 0
		for i, e := range idx[:n*K] {
			if int(e) == gr.expert {
				copy(t.xg[(gr.row0+m)*H:(gr.row0+m+1)*H], x[(i/K)*H:(i/K+1)*H])
				m++
			}
		}
	}
	copy(t.xg[t.groups[len(t.groups)-1].row0*H:], x[:n*H])
	t.h = b.scratch.get(slotExpertH, hOff)
	t.y = b.scratch.get(slotExpertY, rows*H)

	// gate and up, then down, each as one parallel loop over weight blocks
	for len(t.inputs) < len(t.groups) {
		t.inputs = append(t.inputs, quant.VecInput{})
	}
	t.phase = 1
	t.prepareInputs(func(gr *expertGroup) ([]float32, *quant.Matrix) {
		return t.xg[gr.row0*H : (gr.row0+1)*H], t.gate
	})
	t.plan(b, func(g *expertGroup) int { return g.inter })
	parallel.For(len(t.tasks), 1, b.tasks.expertsFn)
	t.phase = 2
	t.prepareInputs(func(gr *expertGroup) ([]float32, *quant.Matrix) {
		return t.h[gr.hOff : gr.hOff+gr.inter], t.down
	})
	t.plan(b, func(*expertGroup) int { return H })
	parallel.For(len(t.tasks), 1, b.tasks.expertsFn)

	// weighted sum: the shared expert gated by sigmoid, the routed experts
	gl := b.scratch.get(slotShared, n)
	b.linear(q(o.SharedExpertGate), x, n, gl)
	shared := t.groups[len(t.groups)-1]
	for tok := 0; tok < n; tok++ {
		s := sigmoid(gl[tok])
		dst, src := out[tok*H:(tok+1)*H], t.y[(shared.row0+tok)*H:]
		for i := range dst {
			dst[i] = s * src[i]
		}
	}
	for g := range t.groups[:len(t.groups)-1] {
		gr := &t.groups[g]
		m := 0
		for i, e := range idx[:n*K] {
			if int(e) == gr.expert {
				axpy(wts[i], t.y[(gr.row0+m)*H:(gr.row0+m+1)*H], out[(i/K)*H:(i/K+1)*H])
				m++
			}
		}
	}
}

// prepareInputs lays out, once, the input of every group of a single row
// (a decode step's experts), which its blocks then share.
func (t *expertsTask) prepareInputs(input func(*expertGroup) ([]float32, *quant.Matrix)) {
	for g := range t.groups {
		gr := &t.groups[g]
		if gr.rows != 1 {
			continue
		}
		x, kind := input(gr)
		if gr.expert < 0 {
			kind = t.sGate
			if t.phase == 2 {
				kind = t.sDown
			}
		}
		t.inputs[g].Prepare(kind, x)
	}
}

// stackRows is the row range of expert e's rows [r0, r1) in a stack (e < 0:
// a plain matrix).
func stackRows(m *quant.Matrix, e, r0, r1 int) (int, int) {
	if e < 0 {
		return r0, r1
	}
	return e*m.Rows + r0, e*m.Rows + r1
}

// plan cuts every group's weight (outRows(group) rows) into blocks, about
// eight per worker in all, and sizes the temporary results.
func (t *expertsTask) plan(b *Backend, outRows func(*expertGroup) int) {
	total := 0
	for g := range t.groups {
		total += outRows(&t.groups[g])
	}
	block := max(8, (total+8*parallel.Workers()-1)/(8*parallel.Workers()))
	t.tasks = t.tasks[:0]
	tmp := 0
	for g := range t.groups {
		gr := &t.groups[g]
		R := outRows(gr)
		for r0 := 0; r0 < R; r0 += block {
			r1 := min(R, r0+block)
			t.tasks = append(t.tasks, weightBlock{group: g, r0: r0, r1: r1, tmp: tmp})
			tmp += gr.rows * (r1 - r0) * 2 // gate and up share a block
		}
	}
	if cap(t.views) < len(t.tasks) {
		t.views = make([]quant.Matrix, len(t.tasks))
	}
	t.views = t.views[:len(t.tasks)]
	t.tmp = b.scratch.get(slotExpertTmp, tmp)
}

// rowsOf is rows [r0, r1) of expert e's matrix of a stack (e < 0: m itself).
func rowsOf(m *quant.Matrix, e, r0, r1 int) quant.Matrix {
	v := *m
	if e >= 0 {
		v = m.Expert(e)
	}
	wr, gr := v.WordsPerRow(), v.GroupsPerRow()
	v.Words, v.Scales, v.Biases = v.Words[r0*wr:r1*wr], v.Scales[r0*gr:r1*gr], v.Biases[r0*gr:r1*gr]
	v.Rows, v.Experts = r1-r0, 1
	return v
}

func (t *expertsTask) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		blk := t.tasks[i]
		gr := &t.groups[blk.group]
		w := blk.r1 - blk.r0
		res := t.tmp[blk.tmp : blk.tmp+gr.rows*w]
		gate, up, down := t.gate, t.up, t.down
		if gr.expert < 0 {
			gate, up, down = t.sGate, t.sUp, t.sDown
		}
		in := &t.inputs[blk.group]
		if t.phase == 1 {
			x := t.xg[gr.row0*t.H : (gr.row0+gr.rows)*t.H]
			res2 := t.tmp[blk.tmp+gr.rows*w : blk.tmp+2*gr.rows*w]
			if gr.rows == 1 {
				r0, r1 := stackRows(gate, gr.expert, blk.r0, blk.r1)
				in.MulRows(gate, r0, r1, res)
				in.MulRows(up, r0, r1, res2)
			} else {
				t.views[i] = rowsOf(gate, gr.expert, blk.r0, blk.r1)
				quant.MatMul(&t.views[i], x, gr.rows, res)
				t.views[i] = rowsOf(up, gr.expert, blk.r0, blk.r1)
				quant.MatMul(&t.views[i], x, gr.rows, res2)
			}
			for r := 0; r < gr.rows; r++ {
				h := t.h[gr.hOff+r*gr.inter+blk.r0 : gr.hOff+r*gr.inter+blk.r1]
				g, u := res[r*w:(r+1)*w], res2[r*w:(r+1)*w]
				for j := range h {
					h[j] = silu(g[j]) * u[j]
				}
			}
			continue
		}
		h := t.h[gr.hOff : gr.hOff+gr.rows*gr.inter]
		if gr.rows == 1 {
			r0, r1 := stackRows(down, gr.expert, blk.r0, blk.r1)
			in.MulRows(down, r0, r1, res)
		} else {
			t.views[i] = rowsOf(down, gr.expert, blk.r0, blk.r1)
			quant.MatMul(&t.views[i], h, gr.rows, res)
		}
		for r := 0; r < gr.rows; r++ {
			copy(t.y[(gr.row0+r)*t.H+blk.r0:(gr.row0+r)*t.H+blk.r1], res[r*w:(r+1)*w])
		}
	}
}
