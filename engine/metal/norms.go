package metal

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// The add-and-norm of one token inside the kernel that reads it
// (Options.FusedNorms, norms=fused), as engine/cuda's route_norm and
// qmv_group_norm: an AddRMSNorm of one row and the Route or QLinearGroup
// of one token that reads its output lower to one step whose first
// dispatch forms the normed row in every threadgroup, bit for bit as
// add_rmsnorm does, and writes nothing else of the norm's. CUDA's last
// block then writes h and x back; Metal has no grid-wide ticket here, so
// that is a dispatch after a barrier: route_select_norm for the router
// (the selection and the write-back in one threadgroup: two dispatches and
// one barrier where apart takes three and two), add_rmsnorm itself for the
// grouped mat-vec (two dispatches and one barrier either way: the fusion
// only moves the norm's single threadgroup off the start of the step).

// normOf is the AddRMSNorm's buffers as the fused kernels bind them: h,
// delta (h in its place where there is none, not read), the weight, the
// output, and whether there is a delta.
func (l *lowering) normOf(n *backend.AddRMSNorm) (h, delta, w, out dispatch.Arg, has int32) {
	h = l.buf("h", n.H, backend.F32, n.Dim)
	delta = h
	if n.Delta.Mem != nil {
		delta, has = l.buf("the delta", n.Delta, backend.F32, n.Dim), 1
	}
	return h, delta, l.buf("the weight", n.Weight, backend.F32, n.Dim), l.buf("the output", n.Out, backend.F32, n.Dim), has
}

// normRouteStep lowers ops[i:i+2] to route_logits_norm and
// route_select_norm when they are an AddRMSNorm of one row and the Route
// of one token reading its output, with a router route.metal takes and a
// row it stages (engine/cuda's normRouteStep conditions, with
// route.metal's limits).
func (b *Backend) normRouteStep(ops []backend.Op, i int) (lowered, bool, error) {
	if i+1 >= len(ops) {
		return lowered{}, false, nil
	}
	n, ok1 := ops[i].(*backend.AddRMSNorm)
	r, ok2 := ops[i+1].(*backend.Route)
	if !ok1 || !ok2 || n.Rows != 1 || r.Rows != 1 || n.Out != r.X {
		return lowered{}, false, nil
	}
	l := &lowering{b: b}
	w := l.mat("the router", r.Router)
	if w == nil || !routeFits(w, r.TopK) || r.TopK < 1 || r.TopK > w.rows() || n.Dim != w.cols() || n.Dim > routeNormMaxCols {
		return lowered{}, false, nil
	}
	E, C := w.rows(), w.cols()
	h, delta, nw, out, has := l.normOf(n)
	idx := l.buf("the expert ids", r.Idx, backend.I32, r.TopK)
	wts := l.buf("the weights", r.Weights, backend.F32, r.TopK)
	if l.err != nil {
		return lowered{}, false, nil // the ops one by one say what is wrong
	}
	norm := int32(0)
	if r.Normalize {
		norm = 1
	}
	p := params(kernels.RouteNormParams{Experts: int32(E), Cols: int32(C), Topk: int32(r.TopK), Normalize: norm, HasDelta: has, Eps: n.Eps})
	logits := l.scratch(4 * int64(E))
	l.dispatch("route", fmt.Sprintf("route_logits_norm%d", w.q.Bits), dispatch.D1(ceil(E, routeSimdgroups)), dispatch.D1(routeSimdgroups*32), p,
		w.words, w.scales, w.biases, h, delta, nw, logits)
	l.barrier()
	l.dispatch("route", "route_select_norm", dispatch.D1(1), dispatch.D1(routeSimdgroups*32), p, logits, idx, wts, h, delta, nw, out)
	if l.err != nil {
		return lowered{}, false, l.err
	}
	l.out.op = fused(ops[i : i+2])
	return l.out, true, nil
}

// normGroupStep lowers ops[i:i+2] to qmv_group_norm_f32_r2_sb and
// add_rmsnorm's write-back when they are an AddRMSNorm of one row and the
// QLinearGroup of one token reading its output, the grouped mat-vec
// taking the matrices and the row no longer than it stages.
func (b *Backend) normGroupStep(ops []backend.Op, i int) (lowered, bool, error) {
	if i+1 >= len(ops) {
		return lowered{}, false, nil
	}
	n, ok1 := ops[i].(*backend.AddRMSNorm)
	g, ok2 := ops[i+1].(*backend.QLinearGroup)
	if !ok1 || !ok2 || n.Rows != 1 || g.Rows != 1 || n.Out != g.X || n.Dim > qmvNormMaxCols {
		return lowered{}, false, nil
	}
	l := &lowering{b: b}
	var ws []*matrix
	for j, m := range g.W {
		ws = append(ws, l.mat(fmt.Sprintf("matrix %d", j), m))
	}
	if l.err != nil || !qmvGroupFits(ws) || ws[0].cols() != n.Dim {
		return lowered{}, false, nil
	}
	h, delta, nw, out, has := l.normOf(n)
	off := g.Offsets()
	y := l.buf("y", g.Y, backend.F32, off[len(ws)])
	if l.err != nil {
		return lowered{}, false, nil
	}
	ys := make([]dispatch.Arg, len(ws))
	for j := range ws {
		ys[j] = y.Add(4 * int64(off[j]))
	}
	grid, bufs, p := qmvGroupLaunch(ws, ys)
	p.HasDelta, p.Eps = has, n.Eps
	l.dispatch("qmv", "qmv_group_norm_f32_r2_sb", grid, dispatch.D1(qmvGroupThreads), params(p), append(bufs, h, delta, nw)...)
	l.barrier()
	l.dispatch("ops", "add_rmsnorm", dispatch.D1(1), dispatch.D1(256),
		params(kernels.NormParams{Dim: int32(n.Dim), HasDelta: has, Eps: n.Eps}), h, delta, nw, out)
	if l.err != nil {
		return lowered{}, false, l.err
	}
	l.out.op = fused(ops[i : i+2])
	return l.out, true, nil
}
