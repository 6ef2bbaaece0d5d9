package metal

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// lowering collects one op's dispatches and the first problem with them.
type lowering struct {
	b   *Backend
	out lowered
	err error
}

func (l *lowering) fail(format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf(format, args...)
	}
}

func (l *lowering) require(ok bool, format string, args ...any) {
	if !ok {
		l.fail(format, args...)
	}
}

// buf is the position of buf, checked to be of type t with at least n
// elements.
func (l *lowering) buf(what string, buf backend.Buffer, t backend.DType, n int) dispatch.Arg {
	if l.err != nil {
		return dispatch.Arg{}
	}
	a, err := l.b.arg(buf)
	if err != nil {
		l.fail("%s: %w", what, err)
		return dispatch.Arg{}
	}
	if err := backend.CheckOperand("Metal", what, buf, t, n); err != nil {
		l.fail("%w", err)
	}
	return a
}

// kv is the position of a KV cache, f32 or bf16.
func (l *lowering) kv(what string, buf backend.Buffer, n int) dispatch.Arg {
	if err := backend.CheckKV(what, buf); err != nil {
		l.fail("%w", err)
		return dispatch.Arg{}
	}
	return l.buf(what, buf, buf.Type, n)
}

func (l *lowering) mat(what string, m backend.Matrix) *matrix {
	if l.err != nil {
		return nil
	}
	w, err := l.b.mat(m)
	if err != nil {
		l.fail("%s: %w", what, err)
		return nil
	}
	return w
}

// dispatch adds a dispatch of entry of family.
func (l *lowering) dispatch(family, entry string, groups, threads dispatch.Size, p []byte, bufs ...dispatch.Arg) {
	if l.err != nil {
		return
	}
	k, err := l.b.kernel(family, entry)
	if err != nil {
		l.fail("%w", err)
		return
	}
	l.out.cmds = append(l.out.cmds, dispatch.Command{Kernel: k, Buffers: bufs, Params: p, Groups: groups, Threads: threads})
}

// barrier makes the op's later dispatches wait for its earlier ones.
func (l *lowering) barrier() {
	if l.err == nil {
		l.out.cmds = append(l.out.cmds, dispatch.Command{Barrier: true})
	}
}

// scratch reserves n bytes of the op's temporaries (256-byte aligned).
func (l *lowering) scratch(n int64) dispatch.Arg {
	at := (l.out.scratch + 255) &^ 255
	l.out.scratch = at + n
	return dispatch.Arg{Mem: scratchPlaceholder, Off: at}
}

// constant is data in an allocation of its own, held until Close (the
// tables the kernels read in Metal's constant address space).
func (l *lowering) constant(data []byte) dispatch.Arg {
	if l.err != nil {
		return dispatch.Arg{}
	}
	m, err := l.b.alloc(int64(len(data)))
	if err == nil {
		l.b.held = append(l.b.held, m)
		err = l.b.d.Upload(dispatch.Arg{Mem: m}, data)
	}
	if err != nil {
		l.fail("%w", err)
	}
	return dispatch.Arg{Mem: m}
}

// qbufs are a matrix's codes, scales and biases, as ops.metal binds them.
func qbufs(w *matrix) []dispatch.Arg {
	return []dispatch.Arg{w.words, w.scales, w.biases}
}

func join(groups ...[]dispatch.Arg) []dispatch.Arg {
	var out []dispatch.Arg
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// convRows is CONV_ROWS of ops.metal: the rows of one threadgroup of
// conv_silu.
const convRows = 32

// gemmWideGroups is where qgemm's 64 x 64 tiles take over from qgemm_s's
// 32 x 32: at this many threadgroups of the large tiles or more, twice the
// 40 GPU cores of the largest M4 and M5 chips (engine/cuda chooses at
// twice its multiprocessors the same way; Metal does not report a core
// count).
const gemmWideGroups = 80

// qgemmShape chooses the plain GEMM's tiles for R weight rows and T
// tokens.
func qgemmShape(R, T int) (string, dispatch.Size) {
	if ceil(R, 64)*ceil(T, 64) >= gemmWideGroups {
		return "qgemm", dispatch.D2(ceil(R, 64), ceil(T, 64))
	}
	return "qgemm_s", dispatch.D2(ceil(R, 32), ceil(T, 32))
}

// lower turns one op into its dispatches.
func (b *Backend) lower(op backend.Op) (lowered, error) {
	l := &lowering{b: b}
	switch o := op.(type) {
	case *backend.Embed:
		w := l.mat("the table", o.Table)
		if w != nil {
			tok := l.buf("the tokens", o.Tokens, backend.I32, o.Rows)
			out := l.buf("the output", o.Out, backend.F32, o.Rows*w.cols())
			if o.Rows > 0 {
				l.dispatch("ops", "embed_rows", dispatch.D1(o.Rows), dispatch.D1(256), nil,
					join(qbufs(w), []dispatch.Arg{{Mem: w.table}, tok, out})...)
			}
		}
	case *backend.AddRMSNorm:
		n := o.Rows * o.Dim
		h := l.buf("h", o.H, backend.F32, n)
		delta, has := h, int32(0) // without a delta, h is bound in its place and not read
		if o.Delta.Mem != nil {
			delta, has = l.buf("the delta", o.Delta, backend.F32, n), 1
		}
		w := l.buf("the weight", o.Weight, backend.F32, o.Dim)
		out := l.buf("the output", o.Out, backend.F32, n)
		if o.Rows > 0 && o.Dim > 0 {
			l.dispatch("ops", "add_rmsnorm", dispatch.D1(o.Rows), dispatch.D1(256),
				params(kernels.NormParams{Dim: int32(o.Dim), HasDelta: has, Eps: o.Eps}), h, delta, w, out)
		}
	case *backend.QLinear:
		w := l.mat("the matrix", o.W)
		if w != nil {
			x := l.buf("x", o.X, backend.F32, o.Rows*w.cols())
			y := l.buf("y", o.Y, backend.F32, o.Rows*w.rows())
			l.linear(w, x, y, o.Rows)
		}
	case *backend.QLinearGroup:
		l.require(len(o.W) > 0, "no matrices")
		var ws []*matrix
		for i, m := range o.W {
			if w := l.mat(fmt.Sprintf("matrix %d", i), m); w != nil {
				l.require(w.cols() == ws0cols(ws, w), "matrix %d is %d wide, matrix 0 %d", i, w.cols(), ws0cols(ws, w))
				ws = append(ws, w)
			}
		}
		if l.err == nil {
			off := o.Offsets()
			x := l.buf("x", o.X, backend.F32, o.Rows*ws[0].cols())
			y := l.buf("y", o.Y, backend.F32, off[len(ws)])
			ys := make([]dispatch.Arg, len(ws))
			for i := range ws {
				ys[i] = y.Add(4 * int64(off[i]))
			}
			if l.err == nil && l.b.o.Fused && o.Rows == 1 && l.qmvGroup(ws, x, ys) {
				break
			}
			for i, w := range ws {
				l.linear(w, x, ys[i], o.Rows)
			}
		}
	case *backend.ConvSiLU:
		l.require(o.K >= 1 && o.K <= 16, "a conv of width %d; the kernel takes 1 to 16", o.K)
		x := l.buf("x", o.X, backend.F32, o.Rows*o.Chans)
		st := l.buf("the state", o.State, backend.F32, (o.K-1)*o.Chans)
		w := l.buf("the weights", o.Weight, backend.F32, o.Chans*o.K)
		out := l.buf("the output", o.Out, backend.F32, o.Rows*o.Chans)
		if o.K == 1 && l.err == nil {
			st = w // no state: bound in its place, not read or written
		}
		if o.Rows > 0 && o.Chans > 0 {
			l.dispatch("ops", "conv_silu", dispatch.D2(ceil(o.Chans, 256), ceil(o.Rows, convRows)), dispatch.D1(256),
				params(kernels.ConvParams{Rows: int32(o.Rows), C: int32(o.Chans), K: int32(o.K)}), x, st, w, out)
		}
	case *backend.DeltaRule:
		l.require(o.KeyHeads >= 1 && o.ValueHeads%max(o.KeyHeads, 1) == 0, "%d value heads over %d key heads", o.ValueHeads, o.KeyHeads)
		l.require(o.KeyDim >= 1 && o.KeyDim <= 32*8, "key heads of %d values; the kernel takes up to 256", o.KeyDim)
		width := 2*o.KeyHeads*o.KeyDim + o.ValueHeads*o.ValueDim
		qkv := l.buf("qkv", o.QKV, backend.F32, o.Rows*width)
		bb := l.buf("b", o.B, backend.F32, o.Rows*o.ValueHeads)
		aa := l.buf("a", o.A, backend.F32, o.Rows*o.ValueHeads)
		aLog := l.buf("A_log", o.ALog, backend.F32, o.ValueHeads)
		dt := l.buf("dt_bias", o.DtBias, backend.F32, o.ValueHeads)
		st := l.buf("the state", o.State, backend.F32, o.ValueHeads*o.ValueDim*o.KeyDim)
		out := l.buf("the output", o.Out, backend.F32, o.Rows*o.ValueHeads*o.ValueDim)
		if tasks := o.ValueHeads * o.ValueDim; o.Rows > 0 && tasks > 0 {
			l.dispatch("ops", "delta_rule", dispatch.D1(ceil(tasks, 8)), dispatch.D1(256),
				params(kernels.DeltaParams{Rows: int32(o.Rows), Hk: int32(o.KeyHeads), Dk: int32(o.KeyDim), Hv: int32(o.ValueHeads), Dv: int32(o.ValueDim)}),
				qkv, bb, aa, aLog, dt, st, out)
		}
	case *backend.GatedRMSNorm:
		n := o.Rows * o.Heads * o.Dim
		x := l.buf("x", o.X, backend.F32, n)
		z := l.buf("z", o.Z, backend.F32, n)
		w := l.buf("the weight", o.Weight, backend.F32, o.Dim)
		out := l.buf("the output", o.Out, backend.F32, n)
		if count := o.Rows * o.Heads; count > 0 && o.Dim > 0 {
			l.dispatch("ops", "gated_rmsnorm", dispatch.D1(ceil(count, 8)), dispatch.D1(256),
				params(kernels.GatedNormParams{Count: int32(count), Dim: int32(o.Dim), Eps: o.Eps}), x, z, w, out)
		}
	case *backend.QKPrep:
		l.qkPrep(o)
	case *backend.Attention:
		l.attention(o)
	case *backend.Route:
		l.route(o)
	case *backend.Experts:
		l.experts(o)
	case *backend.Advance:
		pos := l.buf("the position", o.Pos, backend.I32, 1)
		l.dispatch("ops", "advance", dispatch.D1(1), dispatch.D1(1), params(kernels.AdvanceParams{By: int32(o.By)}), pos)
	case *backend.Sample:
		l.sample(o)
	case *backend.Logprobs:
		l.logprobs(o)
	default:
		return lowered{}, fmt.Errorf("not implemented by the Metal backend")
	}
	return l.out, l.err
}

// ws0cols is the width of the first matrix of a group (w's own for the
// first).
func ws0cols(ws []*matrix, w *matrix) int {
	if len(ws) == 0 {
		return w.cols()
	}
	return ws[0].cols()
}

// linear is y[rows, R] = x[rows, C]·Wᵀ: the 4-bit mat-vec for one row
// where it applies (decode.go), under gemm=simd gemm.metal's GEMM for
// several rows where it applies (prefill.go), else ops.metal's GEMM.
func (l *lowering) linear(w *matrix, x, y dispatch.Arg, rows int) {
	if l.err != nil || rows == 0 || w.rows() == 0 {
		return
	}
	if l.b.o.Fused && rows == 1 && l.qmv(w, x, y) {
		return
	}
	if l.b.o.SimdGEMM && rows > 1 && l.gemmDense(w, x, y, rows) {
		return
	}
	R := w.rows()
	name, grid := qgemmShape(R, rows)
	l.dispatch("ops", name, grid, dispatch.D1(256), params(kernels.GemmParams{T: int32(rows), Ldy: int32(R)}),
		join(qbufs(w), []dispatch.Arg{{Mem: w.table}, x, y})...)
}

// qkrMaxD is QKR_MAX_D of ops.metal.
const qkrMaxD = 1024

func (l *lowering) qkPrep(o *backend.QKPrep) {
	QH, KVH, D, rot := o.QHeads, o.KVHeads, o.HeadDim, o.RotaryDim
	l.require(KVH >= 1 && QH%max(KVH, 1) == 0, "%d query heads over %d KV heads", QH, KVH)
	l.require(D >= 1 && D <= qkrMaxD, "heads of %d values; the kernel takes up to %d", D, qkrMaxD)
	l.require(rot >= 0 && rot%2 == 0 && rot <= D, "%d rotary dims of %d", rot, D)
	l.require(o.KCache.Type == o.VCache.Type, "K and V caches of element types %s and %s", o.KCache.Type, o.VCache.Type)
	kvW := KVH * D
	qg := l.buf("qg", o.QG, backend.F32, o.Rows*QH*2*D)
	k := l.buf("k", o.K, backend.F32, o.Rows*kvW)
	v := l.buf("v", o.V, backend.F32, o.Rows*kvW)
	qn := l.buf("the q norm", o.QNorm, backend.F32, D)
	kn := l.buf("the k norm", o.KNorm, backend.F32, D)
	q := l.buf("q", o.Q, backend.F32, o.Rows*QH*D)
	kc := l.kv("the K cache", o.KCache, 0)
	vc := l.kv("the V cache", o.VCache, o.KCache.Len)
	pos := l.buf("the position", o.Pos, backend.I32, 1)
	if l.err != nil || o.Rows == 0 {
		return
	}
	maxPos := o.KCache.Len / max(kvW, 1)
	inv, err := l.b.ropeTable(max(rot, 2), o.RopeTheta)
	if err != nil {
		l.fail("%w", err)
		return
	}
	invArg := dispatch.Arg{Mem: inv}
	if l.b.o.Fused && o.Rows == 1 && l.qkPrepOne(o, qg, k, v, qn, kn, invArg, q, kc, vc, pos, maxPos) {
		return
	}
	name := "qk_prep_rows_f32"
	if o.KCache.Type == backend.BF16 {
		name = "qk_prep_rows_bf16"
	}
	l.dispatch("ops", name, dispatch.D2(QH+KVH, o.Rows), dispatch.D1(32*ceil(D, 32)),
		params(kernels.QKPrepRowsParams{MaxPos: int32(maxPos), QH: int32(QH), KVH: int32(KVH), D: int32(D), Rot: int32(rot), Eps: o.Eps}),
		qg, k, v, qn, kn, q, kc, vc, pos, invArg)
}

// attnRowsJ is the J of the attn_rows entry for heads of D values: the
// values per lane, a power of two from 2 to 16 with 32·J >= D.
func attnRowsJ(D int) int {
	j := 2
	for 32*j < D {
		j *= 2
	}
	return j
}

func (l *lowering) attention(o *backend.Attention) {
	QH, KVH, D := o.QHeads, o.KVHeads, o.HeadDim
	l.require(KVH >= 1 && QH%max(KVH, 1) == 0, "%d query heads over %d KV heads", QH, KVH)
	l.require(D >= 1 && D <= 512, "heads of %d values; the kernel takes up to 512", D)
	l.require(o.KCache.Type == o.VCache.Type, "K and V caches of element types %s and %s", o.KCache.Type, o.VCache.Type)
	q := l.buf("q", o.Q, backend.F32, o.Rows*QH*D)
	qg := l.buf("qg", o.QG, backend.F32, o.Rows*QH*2*D)
	kc := l.kv("the K cache", o.KCache, 0)
	vc := l.kv("the V cache", o.VCache, o.KCache.Len)
	out := l.buf("the output", o.Out, backend.F32, o.Rows*QH*D)
	pos := l.buf("the position", o.Pos, backend.I32, 1)
	if l.err != nil || o.Rows == 0 {
		return
	}
	if l.b.o.Fused && o.Rows == 1 && l.attentionOne(o, q, qg, kc, vc, pos, out) {
		return
	}
	kv := "f32"
	if o.KCache.Type == backend.BF16 {
		kv = "bf16"
	}
	l.dispatch("ops", fmt.Sprintf("attn_rows_%s_j%d", kv, attnRowsJ(D)), dispatch.D1(ceil(o.Rows*QH, 8)), dispatch.D1(256),
		params(kernels.AttnRowsParams{Rows: int32(o.Rows), QH: int32(QH), KVH: int32(KVH), D: int32(D)}),
		q, qg, kc, vc, pos, out)
}

// routeRowsMaxE is ROUTE_ROWS_MAX_E of ops.metal.
const routeRowsMaxE = 4096

func (l *lowering) route(o *backend.Route) {
	w := l.mat("the router", o.Router)
	if w == nil {
		return
	}
	E, C := w.rows(), w.cols()
	l.require(o.TopK >= 1 && o.TopK <= E, "top-%d of %d experts", o.TopK, E)
	l.require(E <= routeRowsMaxE, "%d experts; the router kernels take up to %d", E, routeRowsMaxE)
	x := l.buf("x", o.X, backend.F32, o.Rows*C)
	idx := l.buf("the expert ids", o.Idx, backend.I32, o.Rows*o.TopK)
	wts := l.buf("the weights", o.Weights, backend.F32, o.Rows*o.TopK)
	if l.err != nil || o.Rows == 0 {
		return
	}
	norm := int32(0)
	if o.Normalize {
		norm = 1
	}
	if l.b.o.Fused && o.Rows == 1 && l.routeOne(o, w, x, idx, wts, norm) {
		return
	}
	logits := l.scratch(4 * int64(o.Rows*E))
	gemm, grid := qgemmShape(E, o.Rows)
	l.dispatch("ops", gemm, grid, dispatch.D1(256), params(kernels.GemmParams{T: int32(o.Rows), Ldy: int32(E)}),
		join(qbufs(w), []dispatch.Arg{{Mem: w.table}, x, logits})...)
	l.barrier()
	l.dispatch("ops", "route_select_rows", dispatch.D1(o.Rows), dispatch.D1(32),
		params(kernels.RouteRowsParams{E: int32(E), TopK: int32(o.TopK), Normalize: norm}), logits, idx, wts)
}

// expertsMats are the Experts op's matrices in the order of ops.metal's
// QShape table: gate, up, shared gate, shared up, shared expert gate,
// down, shared down.
func expertsMats(o *backend.Experts) ([]string, []backend.Matrix) {
	return []string{"gate", "up", "shared gate", "shared up", "shared expert gate", "down", "shared down"},
		[]backend.Matrix{o.Gate, o.Up, o.SharedGate, o.SharedUp, o.SharedExpertGate, o.Down, o.SharedDown}
}

func (l *lowering) experts(o *backend.Experts) {
	names, mats := expertsMats(o)
	var ws []*matrix
	for i, m := range mats {
		ws = append(ws, l.mat("the "+names[i]+" matrix", m))
	}
	if l.err != nil {
		return
	}
	gate := ws[0]
	E, H, I, SI := max(gate.shape.Experts, 1), gate.cols(), o.Inter, o.SharedInter
	want := [][2]int{{E * I, H}, {E * I, H}, {SI, H}, {SI, H}, {1, H}, {E * H, I}, {H, SI}}
	for i, w := range ws {
		l.require(w.rows() == want[i][0] && w.cols() == want[i][1], "the %s matrix is %dx%d, want %dx%d", names[i], w.rows(), w.cols(), want[i][0], want[i][1])
	}
	l.require(o.TopK >= 1 && o.TopK <= E, "top-%d of %d experts", o.TopK, E)
	x := l.buf("x", o.X, backend.F32, o.Rows*H)
	idx := l.buf("the expert ids", o.Idx, backend.I32, o.Rows*o.TopK)
	wts := l.buf("the weights", o.Weights, backend.F32, o.Rows*o.TopK)
	out := l.buf("the output", o.Out, backend.F32, o.Rows*H)
	if l.err != nil || o.Rows == 0 {
		return
	}
	if l.b.o.Fused && o.Rows == 1 && l.expertsOne(o, ws, x, idx, wts, out) {
		return
	}
	if l.b.o.SimdGEMM && o.Rows > 1 && l.expertsSimd(o, ws, x, idx, wts, out) {
		return
	}
	var table []byte
	for _, w := range ws {
		table = append(table, params(w.q)...)
	}
	shapes := l.constant(table)
	per := o.TopK*I + SI
	h := l.scratch(4 * int64(o.Rows*per))
	logit := l.scratch(4 * int64(o.Rows))
	p := params(kernels.ExpertsParams{Rows: int32(o.Rows), Dim: int32(H), TopK: int32(o.TopK), Inter: int32(I), Sinter: int32(SI)})
	var up []dispatch.Arg
	for _, w := range ws[:5] {
		up = append(up, qbufs(w)...)
	}
	l.dispatch("ops", "experts_gate_up", dispatch.D1(ceil(o.Rows*(per+1), 8)), dispatch.D1(256), p,
		join(up, []dispatch.Arg{shapes, idx, x, h, logit})...)
	l.barrier()
	l.dispatch("ops", "experts_down", dispatch.D1(ceil(o.Rows*H, 8)), dispatch.D1(256), p,
		join(qbufs(ws[5]), qbufs(ws[6]), []dispatch.Arg{shapes, idx, wts, h, logit, out})...)
}

// sampleThreads is SAMPLE_THREADS of sample.metal.
const sampleThreads = 1024

// sampleParts and samplePrepThreads are SAMPLE_PARTS and
// SAMPLE_PREP_THREADS of sample.metal: sample_prep's grid, each
// threadgroup leaving its best token and finite check for sample_row;
// sampleFastK is SAMPLE_FAST_K, the largest top-k of the fast path, for
// which each also leaves its k best keys in sampleFastK slots.
const (
	sampleParts       = 128
	samplePrepThreads = 256
	sampleFastK       = 64
)

func (l *lowering) sample(o *backend.Sample) {
	V := o.Vocab
	l.require(V >= 1, "a vocabulary of %d tokens", V)
	logits := l.buf("the logits", o.Logits, backend.F32, V)
	prm := l.buf("the parameters", o.Params, backend.F32, backend.SampleParamCount)
	config := l.buf("the configuration", o.Config, backend.I32, backend.SampleConfigCount)
	counts := l.buf("the counts", o.Counts, backend.I32, V)
	prompt := l.buf("the prompt flags", o.InPrompt, backend.I32, V)
	tok := l.buf("the token", o.Token, backend.I32, 1)
	status := l.buf("the status", o.Status, backend.I32, 2)
	if l.err != nil {
		return
	}
	x, w := l.scratch(4*int64(V)), l.scratch(4*int64(V))
	part, cand := l.scratch(16*sampleParts), l.scratch(8*sampleParts*sampleFastK)
	fastOn := int32(0)
	if l.b.o.SamplerTopK {
		fastOn = 1
	}
	p := params(kernels.SampleParams{V: int32(V), FastOn: fastOn})
	l.dispatch("sample", "sample_prep", dispatch.D1(sampleParts), dispatch.D1(samplePrepThreads), p,
		logits, prm, config, counts, prompt, x, part, cand)
	l.barrier()
	l.dispatch("sample", "sample_row", dispatch.D1(1), dispatch.D1(sampleThreads), p,
		prm, config, counts, tok, status, x, w, part, cand)
}

func (l *lowering) logprobs(o *backend.Logprobs) {
	V, N := o.Vocab, o.TopN
	l.require(V >= 1, "a vocabulary of %d tokens", V)
	l.require(N >= 0 && N <= V, "top %d of a %d-token vocabulary", N, V)
	logits := l.buf("the logits", o.Logits, backend.F32, V)
	tok := l.buf("the token", o.Token, backend.I32, 1)
	out := l.buf("the output", o.Out, backend.F32, 1+N)
	top := out // without top ids, out is bound in their place and not written
	if N > 0 {
		top = l.buf("the top ids", o.TopIDs, backend.I32, N)
	}
	if l.err != nil {
		return
	}
	l.dispatch("sample", "logprobs_row", dispatch.D1(1), dispatch.D1(sampleThreads),
		params(kernels.LogprobsParams{V: int32(V), TopN: int32(N)}), logits, tok, out, top)
}
