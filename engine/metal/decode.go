package metal

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// The one-row decode kernels (qmv.metal, route.metal, attn.metal,
// moe.metal, gdn.metal), taken where engine/cuda's lowering takes its
// siblings (engine/cuda/lower.go's conditions, with the Metal kernels'
// own limits); every other op, and these where the shapes do not fit,
// runs the generic kernels of ops.metal, which compute the same. Where a
// CUDA kernel hands work to its last block through atomic tickets, the
// Metal kernel is two dispatches with a barrier between them (the op's
// own barrier, lowering.barrier).

// qmvSimdgroups is QMV_SIMDGROUPS of qmv.metal.
const qmvSimdgroups = 8

// qmvRows is the rows per lane of the mat-vec entry used (qmv_f32_r2_sb:
// engine/cuda's default is R = 2 over the interleaved scale/bias words).
const qmvRows = 2

// teamFor is the lanes sharing a row: the largest power of two at most 32
// and at most the row's groups.
func teamFor(groups int) int {
	team := 1
	for team*2 <= min(32, groups) {
		team *= 2
	}
	return team
}

// qmv is y = W·x for one row on qmv.metal, for a 4-bit matrix in groups of
// 64; false where it does not apply.
func (l *lowering) qmv(w *matrix, x, y dispatch.Arg) bool {
	if !w.fourBit64() {
		return false
	}
	rows, cols := w.rows(), w.cols()
	team := teamFor(cols / 64)
	perGroup := qmvSimdgroups * (32 / team) * qmvRows
	l.dispatch("qmv", "qmv_f32_r2_sb", dispatch.D1(ceil(rows, perGroup)), dispatch.D1(qmvSimdgroups*32),
		params(kernels.QmvParams{Rows: int32(rows), Cols: int32(cols), Team: int32(team)}),
		w.words, dispatch.Arg{Mem: w.sb}, w.biases, x, y)
	return true
}

// qmv.metal's QMV_GROUP (the most matrices of one grouped dispatch) and
// QMV_NORM_MAX_COLS (the longest row qmv_group_norm stages).
const (
	qmvGroupMax     = 4
	qmvNormMaxCols  = 4096
	qmvGroupThreads = qmvSimdgroups * 32
)

// qmvGroupFits: qmv_group_f32_r2_sb takes ws in one dispatch: two to
// qmvGroupMax matrices of the same width, each one qmv would take
// (engine/cuda's qmvGroup conditions).
func qmvGroupFits(ws []*matrix) bool {
	if len(ws) < 2 || len(ws) > qmvGroupMax {
		return false
	}
	for _, w := range ws {
		if !w.fourBit64() || w.cols() != ws[0].cols() {
			return false
		}
	}
	return true
}

// qmvGroupLaunch is the grid, the bindings of the matrices (words0..3,
// sb0..3, y0..3: the slots past ws bound to matrix 0's buffers, which the
// kernel does not read) and the parameters of a grouped mat-vec of ws
// into ys.
func qmvGroupLaunch(ws []*matrix, ys []dispatch.Arg) (dispatch.Size, []dispatch.Arg, kernels.QmvGroupParams) {
	cols := ws[0].cols()
	team := teamFor(cols / 64)
	var start [qmvGroupMax + 1]int32
	total := 0
	for m := range qmvGroupMax {
		start[m] = int32(total)
		if m < len(ws) {
			total += ws[m].rows()
		}
	}
	start[qmvGroupMax] = int32(total)
	slot := func(m int) int {
		if m < len(ws) {
			return m
		}
		return 0
	}
	var bufs []dispatch.Arg
	for m := range qmvGroupMax {
		bufs = append(bufs, ws[slot(m)].words)
	}
	for m := range qmvGroupMax {
		bufs = append(bufs, dispatch.Arg{Mem: ws[slot(m)].sb})
	}
	for m := range qmvGroupMax {
		bufs = append(bufs, ys[slot(m)])
	}
	p := kernels.QmvGroupParams{Start0: start[0], Start1: start[1], Start2: start[2], Start3: start[3], End: start[4],
		N: int32(len(ws)), Cols: int32(cols), Team: int32(team)}
	perGroup := qmvSimdgroups * (32 / team) * qmvRows
	return dispatch.D1(ceil(total, perGroup)), bufs, p
}

// qmvGroup is the mat-vecs of a QLinearGroup of one row in one dispatch of
// qmv_group_f32_r2_sb (engine/cuda's qmv_group); false where it does not
// apply (then each matrix takes its own qmv).
func (l *lowering) qmvGroup(ws []*matrix, x dispatch.Arg, ys []dispatch.Arg) bool {
	if !qmvGroupFits(ws) {
		return false
	}
	grid, bufs, p := qmvGroupLaunch(ws, ys)
	l.dispatch("qmv", "qmv_group_f32_r2_sb", grid, dispatch.D1(qmvGroupThreads), params(p), append(bufs, x)...)
	return true
}

// attn.metal's shape: heads of ATT_D values, ATT_G query heads per KV head
// (every model of the family), threadgroups of 256 threads.
const (
	attnHeadDim = 256
	attnGroup   = 8
	attnThreads = 256
)

// attnMaxSplits bounds the chunks of the cache per KV head, and
// attnMinChunk is the fewest rows a chunk takes (the chunks are
// ceil(n/attnMinChunk), at most attnMaxSplits, chosen on the device from
// the position). engine/cuda takes half its multiprocessors, filling the
// GPU once for two KV heads; Metal reports no core count, so this is half
// the 40 GPU cores of the largest M4 and M5 chips (as gemmWideGroups).
const (
	attnMaxSplits = 20
	attnMinChunk  = 64
)

// attnFits: attn.metal takes the heads (the same limit as engine/cuda's
// attention kernels).
func attnFits(QH, KVH, D int) bool { return D == attnHeadDim && KVH >= 1 && QH == attnGroup*KVH }

// kvSuffix names an entry's KV element type.
func kvSuffix(t backend.DType) string {
	if t == backend.BF16 {
		return "bf16"
	}
	return "f32"
}

// qkPrepOne is QKPrep of one row on attn.metal's qk_prep; false where it
// does not apply.
func (l *lowering) qkPrepOne(o *backend.QKPrep, qg, k, v, qn, kn, inv, q, kc, vc, pos dispatch.Arg, maxPos int) bool {
	if !attnFits(o.QHeads, o.KVHeads, o.HeadDim) {
		return false
	}
	l.dispatch("attn", "qk_prep_"+kvSuffix(o.KCache.Type), dispatch.D1(o.QHeads+o.KVHeads), dispatch.D1(attnThreads),
		params(kernels.QKPrepParams{MaxPos: int32(maxPos), QH: int32(o.QHeads), KVH: int32(o.KVHeads), Rot: int32(o.RotaryDim), Eps: o.Eps}),
		qg, k, v, qn, kn, q, kc, vc, pos, inv)
	return true
}

// attentionOne is Attention of one row on attn.metal's split kernels
// (each chunk's softmax state into the scratch, a barrier, the merge with
// the output gate); false where it does not apply.
func (l *lowering) attentionOne(o *backend.Attention, q, qg, kc, vc, pos, out dispatch.Arg) bool {
	if !attnFits(o.QHeads, o.KVHeads, o.HeadDim) {
		return false
	}
	parts := int64(o.KVHeads * attnMaxSplits * attnGroup)
	po := l.scratch(4 * parts * attnHeadDim)
	pml := l.scratch(4 * parts * 2)
	l.dispatch("attn", "attn_split_"+kvSuffix(o.KCache.Type), dispatch.D1(o.KVHeads*attnMaxSplits), dispatch.D1(attnThreads),
		params(kernels.AttnSplitParams{KVH: int32(o.KVHeads), MaxSplits: attnMaxSplits, MinChunk: attnMinChunk}),
		q, kc, vc, pos, po, pml)
	l.barrier()
	l.dispatch("attn", "attn_combine", dispatch.D1(o.QHeads), dispatch.D1(attnThreads),
		params(kernels.AttnCombineParams{MaxSplits: attnMaxSplits, MinChunk: attnMinChunk}),
		po, pml, qg, pos, out)
	return true
}

// route.metal's limits: ROUTE_MAX_EXPERTS, ROUTE_MAX_TOPK, its
// ROUTE_SIMDGROUPS simdgroups a threadgroup (one expert row each), and
// ROUTE_NORM_MAX_COLS (the longest row route_logits_norm stages).
const (
	routeMaxExperts  = 1024
	routeMaxTopK     = 32
	routeSimdgroups  = 8
	routeNormMaxCols = 4096
)

// routeFits: route.metal takes a router of w for top-k.
func routeFits(w *matrix, topK int) bool {
	return w.q.Group == 64 && (w.q.Bits == 4 || w.q.Bits == 8) && topK <= routeMaxTopK && w.rows() <= routeMaxExperts
}

// routeOne is Route of one row on route.metal: the logits (a simdgroup per
// expert) into the scratch, a barrier, the selection in one threadgroup;
// false where it does not apply.
func (l *lowering) routeOne(o *backend.Route, w *matrix, x, idx, wts dispatch.Arg, norm int32) bool {
	E, C := w.rows(), w.cols()
	if !routeFits(w, o.TopK) {
		return false
	}
	logits := l.scratch(4 * int64(E))
	p := params(kernels.RouteParams{Experts: int32(E), Cols: int32(C), Topk: int32(o.TopK), Normalize: norm})
	l.dispatch("route", fmt.Sprintf("route_logits%d", w.q.Bits), dispatch.D1(ceil(E, routeSimdgroups)), dispatch.D1(routeSimdgroups*32), p,
		w.words, w.scales, w.biases, x, logits)
	l.barrier()
	l.dispatch("route", "route_select", dispatch.D1(1), dispatch.D1(routeSimdgroups*32), p, logits, idx, wts)
	return true
}

// moe.metal's shape: MOE_TOPK routed experts, threadgroups of
// MOE_UP_SIMDGROUPS and MOE_DOWN_SIMDGROUPS simdgroups.
const (
	moeTopK          = 8
	moeUpSimdgroups  = 8
	moeDownSimdgroup = 4
)

// expertsOne is Experts of one row on moe.metal: gate and up of the routed
// and shared experts (and the shared expert gate's logit) into the
// scratch, a barrier, down and the weighted sum; false where it does not
// apply. The conditions are engine/cuda's: top-8 routing, a shared expert
// as wide as a routed one (it is the ninth slot of the activations), 4-bit
// matrices in groups of 64 and an 8-bit shared expert gate.
func (l *lowering) expertsOne(o *backend.Experts, ws []*matrix, x, idx, wts, out dispatch.Arg) bool {
	gate, up, sg, su, seg, down, sd := ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
	H, I := gate.cols(), o.Inter
	if o.TopK != moeTopK || o.SharedInter != I || H%64 != 0 || I%64 != 0 ||
		!gate.fourBit64() || !up.fourBit64() || !down.fourBit64() || !sg.fourBit64() || !su.fourBit64() || !sd.fourBit64() ||
		seg.q.Bits != 8 || seg.q.Group != 64 {
		return false
	}
	zeros, err := l.b.grow(&l.b.zeros, 4*int64(H))
	if err != nil {
		l.fail("%w", err)
		return true
	}
	h := l.scratch(4 * int64((moeTopK+1)*I))
	logit := l.scratch(16)
	sb := func(w *matrix) []dispatch.Arg { return []dispatch.Arg{w.words, {Mem: w.sb}, w.biases} }
	upTeam, downTeam := teamFor(H/64), teamFor(I/64)
	tasks := (moeTopK+1)*I + 1 // the last task is the shared expert gate
	l.dispatch("moe", "moe_gate_up_f32_sb", dispatch.D1(ceil(tasks, moeUpSimdgroups*(32/upTeam))), dispatch.D1(moeUpSimdgroups*32),
		params(kernels.MoeUpParams{I: int32(I), H: int32(H), Team: int32(upTeam)}),
		join(sb(gate), sb(up), sb(sg), sb(su), qbufs(seg), []dispatch.Arg{idx, x, h, logit})...)
	l.barrier()
	// the residual is zeros: the op's output is the block's alone
	l.dispatch("moe", "moe_down_f32_sb", dispatch.D1(ceil(H, moeDownSimdgroup*(32/downTeam))), dispatch.D1(moeDownSimdgroup*32),
		params(kernels.MoeDownParams{H: int32(H), I: int32(I), Team: int32(downTeam)}),
		join(sb(down), sb(sd), []dispatch.Arg{idx, wts, logit, h, {Mem: zeros}, out})...)
	return true
}

// gdn.metal's shape: heads of GDN_D values, a conv of width 4, threadgroups
// of GDN_THREADS; gdnSplit is the threadgroups per value head
// (gdn_step_s<split>), engine/cuda's default.
const (
	gdnHeadDim = 128
	gdnConvK   = 4
	gdnThreads = 256
	gdnSplit   = 4
)

// fused is the ops a fused step covers, as one op: its accesses are all
// theirs, so that the barriers around it are placed as for the three.
type fused []backend.Op

func (f fused) Name() string { return f[0].Name() + "+" + f[len(f)-1].Name() }

func (f fused) Access() (r, w []backend.Buffer) {
	for _, op := range f {
		or, ow := op.Access()
		r, w = append(r, or...), append(w, ow...)
	}
	return r, w
}

// lowerFused lowers ops[i:] as one fused step where a decode kernel takes
// several ops (gdn.metal: a Gated DeltaNet step's conv, delta rule and
// gated norm; under norms=fused an add-and-norm with the router or the
// grouped mat-vec reading it, norms.go), returning how many ops it
// covers.
func (b *Backend) lowerFused(ops []backend.Op, i int) (lowered, int, bool, error) {
	if !b.o.Fused {
		return lowered{}, 0, false, nil
	}
	if b.o.FusedNorms {
		for _, step := range []func([]backend.Op, int) (lowered, bool, error){b.normRouteStep, b.normGroupStep} {
			if l, ok, err := step(ops, i); err != nil || ok {
				return l, 2, ok, err
			}
		}
	}
	c, d, g, ok := backend.DeltaNetStep(ops, i, gdnHeadDim, gdnConvK)
	if !ok {
		return lowered{}, 0, false, nil
	}
	C, Hk, Hv := c.Chans, d.KeyHeads, d.ValueHeads
	l := &lowering{b: b}
	bufs := []dispatch.Arg{
		l.buf("qkv", c.X, backend.F32, C), l.buf("z", g.Z, backend.F32, Hv*gdnHeadDim),
		l.buf("b", d.B, backend.F32, Hv), l.buf("a", d.A, backend.F32, Hv),
		l.buf("the conv weights", c.Weight, backend.F32, C*gdnConvK),
		l.buf("the conv state", c.State, backend.F32, (gdnConvK-1)*C),
		l.buf("A_log", d.ALog, backend.F32, Hv), l.buf("dt_bias", d.DtBias, backend.F32, Hv),
		l.buf("the norm weight", g.Weight, backend.F32, gdnHeadDim),
		l.buf("the state", d.State, backend.F32, Hv*gdnHeadDim*gdnHeadDim),
		l.buf("the output", g.Out, backend.F32, Hv*gdnHeadDim),
	}
	if l.err != nil {
		return lowered{}, 0, false, nil // the ops one by one say what is wrong
	}
	p := params(kernels.GdnParams{Hk: int32(Hk), Hv: int32(Hv), Eps: g.Eps})
	l.dispatch("gdn", fmt.Sprintf("gdn_step_s%d", gdnSplit), dispatch.D1(Hv*gdnSplit), dispatch.D1(gdnThreads), p, bufs...)
	l.barrier()
	l.dispatch("gdn", "gdn_finish", dispatch.D1(Hv), dispatch.D1(gdnThreads), p, bufs...)
	if l.err != nil {
		return lowered{}, 0, false, l.err
	}
	l.out.op = fused(ops[i : i+3])
	return l.out, 3, true, nil
}
