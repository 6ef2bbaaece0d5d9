package metal

import (
	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// The one-row decode kernels (qmv.metal, route.metal, attn.metal,
// moe.metal, gdn.metal), taken where engine/cuda's lowering takes its
// siblings (engine/cuda/lower.go's conditions, with the Metal kernels'
// own limits); every other op, and these where the shapes do not fit,
// runs the generic kernels of ops.metal, which compute the same.

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
		dispatch.Arg{Mem: w.words}, dispatch.Arg{Mem: w.sb}, dispatch.Arg{Mem: w.biases}, x, y)
	return true
}

// qkPrepOne is QKPrep of one row on attn.metal's qk_prep; false where it
// does not apply.
func (l *lowering) qkPrepOne(o *backend.QKPrep, qg, k, v, qn, kn, inv, q, kc, vc, pos dispatch.Arg, maxPos int) bool {
	return false // not built yet: the generic qk_prep_rows runs
}

// attentionOne is Attention of one row on attn.metal's split kernels;
// false where it does not apply.
func (l *lowering) attentionOne(o *backend.Attention, q, qg, kc, vc, pos, out dispatch.Arg) bool {
	return false // not built yet: the generic attn_rows runs
}

// routeOne is Route of one row on route.metal; false where it does not
// apply.
func (l *lowering) routeOne(o *backend.Route, w *matrix, x, idx, wts dispatch.Arg, norm int32) bool {
	return false // not built yet: the generic qgemm and route_select_rows run
}

// expertsOne is Experts of one row on moe.metal; false where it does not
// apply.
func (l *lowering) expertsOne(o *backend.Experts, ws []*matrix, x, idx, wts, out dispatch.Arg) bool {
	return false // not built yet: the generic experts kernels run
}

// lowerFused lowers ops[i:] as one fused step where a decode kernel takes
// several ops (gdn.metal: a Gated DeltaNet step's conv, delta rule and
// gated norm), returning how many ops it covers.
func (b *Backend) lowerFused(ops []backend.Op, i int) (lowered, int, bool, error) {
	return lowered{}, 0, false, nil // not built yet: the ops run one by one
}
