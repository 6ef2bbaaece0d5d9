package metal

import (
	"strings"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// Prefill on simdgroup matrices (Options.SimdGEMM, gemm=simd), or on Metal
// 4's tensor operations (Options.TensorGEMM, gemm=tensor: the same entries
// in gemm_tensor.metal, launched alike): ops of
// several rows whose matrices gemm.metal's GEMMs take run there, where
// engine/cuda's gemm=tc takes gemm.cu's (engine/cuda/prefill.go's
// conditions); the others keep ops.metal's plain kernels. The GEMMs take
// x in float32 and round it to bf16 as they stage it, so no conversion
// dispatch precedes them.

// gemm.metal's shape: GEMM_BM x GEMM_BN output tiles (gate/up: GEMM_BN/2
// outputs, gate and up rows interleaved), GEMM_THREADS threads; moe_route
// in one threadgroup of ROUTE_THREADS, moe_combine COMBINE_THREADS a
// token; GEMM_TOPK routed experts.
const (
	gemmBM             = 32
	gemmBN             = 64
	gemmThreads        = 128
	gemmRouteThreads   = 1024
	gemmCombineThreads = 256
	gemmTopK           = 8
	gemmMaxExperts     = gemmRouteThreads
)

// gemmFits reports whether gemm.metal's GEMMs take w: 4-bit in groups of
// 64 with the interleaved scale/bias words, rows a multiple of 8 (gemm.cu's
// condition) and columns of 64.
func gemmFits(w *matrix) bool {
	return w.fourBit64() && w.rows()%8 == 0 && w.cols()%64 == 0
}

// gemmDense is y[rows, R] = x[rows, C]·Wᵀ on gemm_dense_f32; false where
// it does not apply.
func (l *lowering) gemmDense(w *matrix, x, y dispatch.Arg, rows int) bool {
	if !gemmFits(w) {
		return false
	}
	l.denseGEMM("gemm_dense_f32", w, x, y, rows)
	return true
}

// gemmEntry is the family and entry of gemm.metal's GEMM entry, or under
// gemm=tensor (Options.TensorGEMM) its sibling in gemm_tensor.metal, which
// takes the same buffers, parameters, grid and threadgroup.
func (l *lowering) gemmEntry(entry string) (family, name string) {
	if l.b.o.TensorGEMM {
		return "gemm_tensor", "gemm_tensor_" + strings.TrimPrefix(entry, "gemm_")
	}
	return "gemm", entry
}

// denseGEMM dispatches a dense entry (gemm_dense_f32 or _bf16) of w over
// rows rows of x.
func (l *lowering) denseGEMM(entry string, w *matrix, x, y dispatch.Arg, rows int) {
	N, K := w.rows(), w.cols()
	family, entry := l.gemmEntry(entry)
	l.dispatch(family, entry, dispatch.D2(ceil(N, gemmBN), ceil(rows, gemmBM)), dispatch.D1(gemmThreads),
		params(kernels.GemmDenseParams{M: int32(rows), N: int32(N), K: int32(K)}), x, w.words, dispatch.Arg{Mem: w.sb}, y)
}

// expertsSimd lowers an Experts op of several rows to gemm.metal where it
// takes it (top-8 of 8 to 1024 experts, the six 4-bit matrices the GEMMs
// take, hidden and both inner sizes multiples of 64), reporting false
// otherwise. The routing comes from the ids on the device (the Route op's
// output): moe_route groups the pairs by expert there, and nothing waits
// for the host. The shared expert runs through the dense GEMM with its
// sigmoid gate folded into its activations, its down projection writing
// out; moe_combine then adds the routed experts in slot order. Three
// barriers: after the grouping and the shared expert's gate and up (all
// independent), after the SwiGLUs, after the down projections.
func (l *lowering) expertsSimd(o *backend.Experts, ws []*matrix, x, idx, wts, out dispatch.Arg) bool {
	gate, up, sg, su, seg, down, sd := ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
	rows, E, H, I, SI := o.Rows, max(gate.shape.Experts, 1), gate.cols(), o.Inter, o.SharedInter
	if o.TopK != gemmTopK || E < gemmTopK || E > gemmMaxExperts || H%64 != 0 || I%64 != 0 || SI%64 != 0 || SI == 0 {
		return false
	}
	for _, w := range []*matrix{gate, up, down, sg, su, sd} {
		if !gemmFits(w) {
			return false
		}
	}
	pairs := rows * gemmTopK
	maxTiles := ceil(pairs, gemmBM) + E
	counts, offsets := l.scratch(4*int64(E)), l.scratch(4*int64(E+1))
	pos, rowTok := l.scratch(4*int64(pairs)), l.scratch(4*int64(pairs))
	tiles, ntiles, status := l.scratch(8*int64(maxTiles)), l.scratch(4), l.scratch(4)
	hb, ys := l.scratch(2*int64(pairs*I)), l.scratch(4*int64(pairs*H))
	gs, us := l.scratch(4*int64(rows*SI)), l.scratch(4*int64(rows*SI))
	hs, logit := l.scratch(2*int64(rows*SI)), l.scratch(4*int64(rows))
	sbw := func(w *matrix) []dispatch.Arg { return []dispatch.Arg{w.words, {Mem: w.sb}} }

	l.dispatch("gemm", "moe_route", dispatch.D1(1), dispatch.D1(gemmRouteThreads),
		params(kernels.MoeRouteParams{T: int32(rows), E: int32(E), BM: gemmBM}),
		idx, counts, offsets, pos, rowTok, tiles, ntiles, status)
	// the shared expert gate's logit, from x in float32 (an 8-bit row)
	segGemm, segGrid := qgemmShape(1, rows)
	l.dispatch("ops", segGemm, segGrid, dispatch.D1(256), params(kernels.GemmParams{T: int32(rows), Ldy: 1}),
		join(qbufs(seg), []dispatch.Arg{{Mem: seg.table}, x, logit})...)
	l.denseGEMM("gemm_dense_f32", sg, x, gs, rows)
	l.denseGEMM("gemm_dense_f32", su, x, us, rows)
	l.barrier()
	l.dispatch("gemm", "moe_shared_swiglu", dispatch.D1(ceil(rows*SI, 256)), dispatch.D1(256),
		params(kernels.SharedSwigluParams{Inter: int32(SI), N: int32(rows * SI)}), gs, us, logit, hs)
	gateupFamily, gateup := l.gemmEntry("gemm_gateup")
	l.dispatch(gateupFamily, gateup, dispatch.D2(ceil(I, gemmBN/2), maxTiles), dispatch.D1(gemmThreads),
		params(kernels.GemmGroupParams{N: int32(I), K: int32(H)}),
		join([]dispatch.Arg{x, rowTok}, sbw(gate), sbw(up), []dispatch.Arg{hb, tiles, offsets, ntiles})...)
	l.barrier()
	l.denseGEMM("gemm_dense_bf16", sd, hs, out, rows)
	downFamily, downEntry := l.gemmEntry("gemm_down")
	l.dispatch(downFamily, downEntry, dispatch.D2(ceil(H, gemmBN), maxTiles), dispatch.D1(gemmThreads),
		params(kernels.GemmGroupParams{N: int32(H), K: int32(I)}),
		join([]dispatch.Arg{hb}, sbw(down), []dispatch.Arg{ys, tiles, offsets, ntiles})...)
	l.barrier()
	l.dispatch("gemm", "moe_combine", dispatch.D1(rows), dispatch.D1(gemmCombineThreads),
		params(kernels.MoeCombineParams{N: int32(H), Add: 1}), ys, pos, wts, out)
	return true
}
