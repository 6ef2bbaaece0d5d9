package metal

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
	"petal/engine/model"
	"petal/engine/quant"
)

// The one-token decode kernels as the lowering launches them: which ops
// take them and which fall back to ops.metal, their grids, threadgroups,
// parameters and bindings as engine/metal/cudarun's tests launch them, the
// barriers inside an op, and the Gated DeltaNet fusion's liveness rule.

// shaped is a matrix of the given shape whose codes, scales and biases
// are placeholders: the recorder runs no kernel, so the lowering at the
// 35B model's shapes needs no weights (a 256-expert stack is hundreds of
// MB).
func (f fixture) shaped(experts, rows, cols, bits int) backend.Matrix {
	shape := quant.Matrix{Rows: rows, Cols: cols, Experts: experts, Bits: bits, GroupSize: 64}
	w := &matrix{b: f.b, shape: shape, q: shapeOf(&shape)}
	small := func() dispatch.Mem {
		m, err := f.b.alloc(16)
		if err != nil {
			f.t.Fatal(err)
		}
		f.b.held = append(f.b.held, m)
		return m
	}
	w.words, w.scales, w.biases = dispatch.Arg{Mem: small()}, dispatch.Arg{Mem: small()}, dispatch.Arg{Mem: small()}
	w.table = small()
	if bits == 4 {
		w.sb = small()
	}
	return w
}

// decodeShape is a model's one-token shapes: attention heads of 256,
// Gated DeltaNet heads of 128, the MoE block.
type decodeShape struct {
	name                        string
	hidden                      int
	qh, kvh, rot, maxPos        int
	hk, hv                      int
	experts, topK, inter, share int
}

var (
	shape35B  = decodeShape{"35B", 2048, 16, 2, 64, 100, 16, 32, 256, 8, 512, 512}
	shapeTiny = decodeShape{"tiny oracle model", 256, 8, 1, 64, 100, 4, 8, 32, 8, 64, 128}
)

// layer is one token through a layer's decode ops at sh: q/k preparation
// and attention, the Gated DeltaNet step and its output projection (which
// reads the step's output only), the router and the experts.
type layer struct {
	prep   *backend.QKPrep
	attn   *backend.Attention
	conv   *backend.ConvSiLU
	rule   *backend.DeltaRule
	norm   *backend.GatedRMSNorm
	out    *backend.QLinear
	route  *backend.Route
	expert *backend.Experts
}

func (l layer) ops() []backend.Op {
	return []backend.Op{l.prep, l.attn, l.conv, l.rule, l.norm, l.out, l.route, l.expert}
}

func decodeLayer(f fixture, sh decodeShape, kv backend.DType) layer {
	const D, Dg = 256, 128
	H := sh.hidden
	C, VW := (2*sh.hk+sh.hv)*Dg, sh.hv*Dg
	pos := f.buf(1, backend.I32)
	qg, q := f.f32(sh.qh*2*D), f.f32(sh.qh*D)
	kc, vc := f.buf(sh.maxPos*sh.kvh*D, kv), f.buf(sh.maxPos*sh.kvh*D, kv)
	conv, core, normed := f.f32(C), f.f32(VW), f.f32(VW)
	a := f.f32(H)
	idx, wts := f.buf(sh.topK, backend.I32), f.f32(sh.topK)
	return layer{
		prep: &backend.QKPrep{QG: qg, K: f.f32(sh.kvh * D), V: f.f32(sh.kvh * D), QNorm: f.f32(D), KNorm: f.f32(D), Q: q,
			KCache: kc, VCache: vc, Pos: pos, Rows: 1, QHeads: sh.qh, KVHeads: sh.kvh, HeadDim: D, RotaryDim: sh.rot, RopeTheta: 1e7, Eps: 1e-6},
		attn: &backend.Attention{Q: q, QG: qg, KCache: kc, VCache: vc, Out: f.f32(sh.qh * D), Pos: pos, Rows: 1, QHeads: sh.qh, KVHeads: sh.kvh, HeadDim: D},
		conv: &backend.ConvSiLU{X: f.f32(C), State: f.f32(3 * C), Weight: f.f32(4 * C), Out: conv, Rows: 1, Chans: C, K: 4},
		rule: &backend.DeltaRule{QKV: conv, B: f.f32(sh.hv), A: f.f32(sh.hv), ALog: f.f32(sh.hv), DtBias: f.f32(sh.hv),
			State: f.f32(sh.hv * Dg * Dg), Out: core, Rows: 1, KeyHeads: sh.hk, KeyDim: Dg, ValueHeads: sh.hv, ValueDim: Dg},
		norm:  &backend.GatedRMSNorm{X: core, Z: f.f32(VW), Weight: f.f32(Dg), Out: normed, Rows: 1, Heads: sh.hv, Dim: Dg, Eps: 1e-6},
		out:   &backend.QLinear{X: normed, W: f.shaped(1, H, VW, 4), Y: f.f32(H), Rows: 1},
		route: &backend.Route{X: a, Router: f.shaped(1, sh.experts, H, 8), Idx: idx, Weights: wts, Rows: 1, TopK: sh.topK, Normalize: true},
		expert: &backend.Experts{X: a, Idx: idx, Weights: wts, Gate: f.shaped(sh.experts, sh.inter, H, 4), Up: f.shaped(sh.experts, sh.inter, H, 4),
			Down: f.shaped(sh.experts, H, sh.inter, 4), SharedGate: f.shaped(1, sh.share, H, 4), SharedUp: f.shaped(1, sh.share, H, 4),
			SharedDown: f.shaped(1, H, sh.share, 4), SharedExpertGate: f.shaped(1, 1, H, 8), Out: f.f32(H),
			Rows: 1, TopK: sh.topK, Inter: sh.inter, SharedInter: sh.share},
	}
}

// perOp is each op's commands as launched describes them, its own
// barriers included.
func perOp(p *program) [][]string {
	out := make([][]string, len(p.ops))
	for i, c := range p.cmds {
		op := p.opOf[i]
		if op < 0 {
			continue
		}
		if c.Barrier {
			out[op] = append(out[op], "|")
		} else {
			out[op] = append(out[op], fmt.Sprintf("%s %v %v", c.Kernel.Name(), c.Groups, c.Threads))
		}
	}
	return out
}

// commandsOf is op's dispatches.
func commandsOf(p *program, op int) []dispatch.Command {
	var out []dispatch.Command
	for i, c := range p.cmds {
		if p.opOf[i] == op && !c.Barrier {
			out = append(out, c)
		}
	}
	return out
}

// TestDecodeKernelChoice: at the 35B model's shapes and the tiny oracle
// model's, with either KV type, each one-row op takes its decode kernel,
// with the grid and threadgroup of engine/metal/cudarun's tests and a
// barrier between the dispatches that depend on each other; the tiny
// model's experts (a shared expert twice as wide as a routed one) take the
// generic kernels, as engine/cuda's do. Every dispatch matches its
// kernel's source.
func TestDecodeKernelChoice(t *testing.T) {
	want := map[string][][]string{
		"35B": {
			{"qk_prep_%s 18x1x1 256x1x1"},
			{"attn_split_%s 40x1x1 256x1x1", "|", "attn_combine 16x1x1 256x1x1"},
			{"gdn_step_s4 128x1x1 256x1x1", "|", "gdn_finish 32x1x1 256x1x1"}, nil, nil,
			{"qmv_f32_r2_sb 128x1x1 256x1x1"},
			{"route_logits8 32x1x1 256x1x1", "|", "route_select 1x1x1 256x1x1"},
			// gate/up: 4609 tasks, 8 a threadgroup with teams of 32;
			// down: 2048 rows, 16 a threadgroup with teams of 8
			{"moe_gate_up_f32_sb 577x1x1 256x1x1", "|", "moe_down_f32_sb 128x1x1 128x1x1"},
		},
		"tiny oracle model": {
			{"qk_prep_%s 9x1x1 256x1x1"},
			{"attn_split_%s 20x1x1 256x1x1", "|", "attn_combine 8x1x1 256x1x1"},
			{"gdn_step_s4 32x1x1 256x1x1", "|", "gdn_finish 8x1x1 256x1x1"}, nil, nil,
			{"qmv_f32_r2_sb 8x1x1 256x1x1"},
			{"route_logits8 4x1x1 256x1x1", "|", "route_select 1x1x1 256x1x1"},
			{"experts_gate_up 81x1x1 256x1x1", "|", "experts_down 32x1x1 256x1x1"},
		},
	}
	sc := newSourceCheck()
	for _, sh := range []decodeShape{shape35B, shapeTiny} {
		for _, kv := range []backend.DType{backend.F32, backend.BF16} {
			b, _ := newRecorded(t, Options{Fused: true, KV: kv})
			f := fixture{t, b, rand.New(rand.NewPCG(7, 7))}
			l := decodeLayer(f, sh, kv)
			p := compile(t, b, l.ops()...)
			got := perOp(p)
			for i, w := range want[sh.name] {
				var expect []string
				for _, s := range w {
					if strings.Contains(s, "%s") {
						s = fmt.Sprintf(s, kvSuffix(kv))
					}
					expect = append(expect, s)
				}
				if !slices.Equal(got[i], expect) {
					t.Errorf("%s kv=%s op %d (%s): %q, want %q", sh.name, kv, i, p.ops[i].Name(), got[i], expect)
				}
			}
			sc.program(t, p, fmt.Sprintf("%s kv=%s", sh.name, kv))
			checkOrdered(t, p)
			if n, launched := b.Kernels(p), len(p.cmds)-p.barriers; n != launched || n != 10 {
				t.Errorf("%s: Kernels %d, %d dispatches; want 10 (1+2+2+1+2+2, the three Gated DeltaNet ops as one step)", sh.name, n, launched)
			}
		}
	}
	t.Logf("entry points: %v", sc.entries())
}

// TestDecodeKernelParams: the parameter structs and the bindings that tie
// an op's dispatches together (the partials, logits and activations the
// second dispatch reads are what the first wrote; moe_down's residual is
// zeros), at the 35B shapes.
func TestDecodeKernelParams(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(8, 8))}
	l := decodeLayer(f, shape35B, backend.F32)
	p := compile(t, b, l.ops()...)
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	arg := func(buf backend.Buffer) dispatch.Arg {
		a, err := b.arg(buf)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	prep := commandsOf(p, 0)
	check("qk_prep", paramsOf[kernels.QKPrepParams](t, prep[0]), kernels.QKPrepParams{MaxPos: 100, QH: 16, KVH: 2, Rot: 64, Eps: 1e-6})
	check("qk_prep q, caches, position", []dispatch.Arg{prep[0].Buffers[5], prep[0].Buffers[6], prep[0].Buffers[7], prep[0].Buffers[8]},
		[]dispatch.Arg{arg(l.prep.Q), arg(l.prep.KCache), arg(l.prep.VCache), arg(l.prep.Pos)})
	inv, err := at(prep[0].Buffers[9], 4*64)
	if err != nil {
		t.Fatal(err)
	}
	check("qk_prep RoPE pairs", inv, bytesOf(RopePairs(64, 1e7)))

	at2 := commandsOf(p, 1)
	check("attn_split", paramsOf[kernels.AttnSplitParams](t, at2[0]), kernels.AttnSplitParams{KVH: 2, MaxSplits: attnMaxSplits, MinChunk: attnMinChunk})
	check("attn_combine", paramsOf[kernels.AttnCombineParams](t, at2[1]), kernels.AttnCombineParams{MaxSplits: attnMaxSplits, MinChunk: attnMinChunk})
	check("attn_combine reads the partials", at2[1].Buffers[:2], at2[0].Buffers[4:6])
	po, pml := at2[0].Buffers[4], at2[0].Buffers[5]
	if po.Mem != pml.Mem || pml.Off < po.Off+4*2*attnMaxSplits*8*256 {
		t.Errorf("attention partials overlap: o at %d (%d bytes), m, l at %d", po.Off, 4*2*attnMaxSplits*8*256, pml.Off)
	}
	check("attn_combine gate, output", []dispatch.Arg{at2[1].Buffers[2], at2[1].Buffers[4]}, []dispatch.Arg{arg(l.attn.QG), arg(l.attn.Out)})

	gdn := commandsOf(p, 2)
	check("gdn_step", paramsOf[kernels.GdnParams](t, gdn[0]), kernels.GdnParams{Hk: 16, Hv: 32, Eps: 1e-6})
	check("gdn_finish binds the step's buffers", gdn[1].Buffers, gdn[0].Buffers)
	check("gdn buffers", gdn[0].Buffers, []dispatch.Arg{arg(l.conv.X), arg(l.norm.Z), arg(l.rule.B), arg(l.rule.A), arg(l.conv.Weight),
		arg(l.conv.State), arg(l.rule.ALog), arg(l.rule.DtBias), arg(l.norm.Weight), arg(l.rule.State), arg(l.norm.Out)})

	rt := commandsOf(p, 6)
	check("route_logits8", paramsOf[kernels.RouteParams](t, rt[0]), kernels.RouteParams{Experts: 256, Cols: 2048, Topk: 8, Normalize: 1})
	check("route_select", paramsOf[kernels.RouteParams](t, rt[1]), kernels.RouteParams{Experts: 256, Cols: 2048, Topk: 8, Normalize: 1})
	check("route_select reads the logits", rt[1].Buffers[0], rt[0].Buffers[4])
	router := l.route.Router.(*matrix)
	check("route_logits8 scales and biases", rt[0].Buffers[1:3], []dispatch.Arg{router.scales, router.biases})

	moe := commandsOf(p, 7)
	check("moe_gate_up", paramsOf[kernels.MoeUpParams](t, moe[0]), kernels.MoeUpParams{I: 512, H: 2048, Team: 32})
	check("moe_down", paramsOf[kernels.MoeDownParams](t, moe[1]), kernels.MoeDownParams{H: 2048, I: 512, Team: 8})
	gate := l.expert.Gate.(*matrix)
	check("moe_gate_up reads the interleaved scale/bias words", moe[0].Buffers[1], dispatch.Arg{Mem: gate.sb})
	seg := l.expert.SharedExpertGate.(*matrix)
	check("moe_gate_up's shared expert gate (8-bit)", moe[0].Buffers[12:15], qbufs(seg))
	check("moe_down reads h and the logit", []dispatch.Arg{moe[1].Buffers[9], moe[1].Buffers[8]}, moe[0].Buffers[17:19])
	check("moe ids, x, weights, out", []dispatch.Arg{moe[0].Buffers[15], moe[0].Buffers[16], moe[1].Buffers[7], moe[1].Buffers[11]},
		[]dispatch.Arg{arg(l.expert.Idx), arg(l.expert.X), arg(l.expert.Weights), arg(l.expert.Out)})
	resid, err := at(moe[1].Buffers[10], 4*2048)
	if err != nil {
		t.Fatalf("moe_down's residual: %v", err)
	}
	if slices.ContainsFunc(resid, func(b byte) bool { return b != 0 }) {
		t.Error("moe_down's residual is not zeros")
	}
	if h := moe[0].Buffers[17]; h.Mem != scratchPlaceholder && h.Mem != b.scratch.m {
		t.Errorf("moe activations outside the scratch")
	}
}

// TestDecodeFallbacks: a one-row op whose shape a decode kernel does not
// take runs the generic kernels, as does every op at two rows or with
// fused=off.
func TestDecodeFallbacks(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(9, 9))}
	first := func(ops ...backend.Op) []string {
		t.Helper()
		var names []string
		for _, c := range compile(t, b, ops...).cmds {
			if !c.Barrier {
				names = append(names, c.Kernel.Name())
			}
		}
		return names
	}
	sh := shapeTiny
	for _, c := range []struct {
		name string
		edit func(l *layer) []backend.Op
		want []string
	}{
		{"QKPrep heads of 128", func(l *layer) []backend.Op {
			l.prep.HeadDim = 128
			return []backend.Op{l.prep}
		}, []string{"qk_prep_rows_f32"}},
		{"QKPrep 4 query heads a KV head", func(l *layer) []backend.Op {
			l.prep.QHeads = 4
			return []backend.Op{l.prep}
		}, []string{"qk_prep_rows_f32"}},
		{"Attention heads of 128", func(l *layer) []backend.Op {
			l.attn.HeadDim = 128
			return []backend.Op{l.attn}
		}, []string{"attn_rows_f32_j4"}},
		{"Attention 4 query heads a KV head", func(l *layer) []backend.Op {
			l.attn.QHeads = 4
			return []backend.Op{l.attn}
		}, []string{"attn_rows_f32_j8"}},
		{"Attention of 2 rows", func(l *layer) []backend.Op {
			l.attn.Rows, l.attn.QHeads = 2, 4
			return []backend.Op{l.attn}
		}, []string{"attn_rows_f32_j8"}},
		{"Route over 1100 experts", func(l *layer) []backend.Op {
			l.route.Router = f.shaped(1, 1100, sh.hidden, 8)
			return []backend.Op{l.route}
		}, []string{"qgemm_s", "route_select_rows"}},
		{"Route top-33", func(l *layer) []backend.Op {
			l.route.Router, l.route.TopK = f.shaped(1, 64, sh.hidden, 8), 33
			l.route.Idx, l.route.Weights = f.buf(33, backend.I32), f.f32(33)
			return []backend.Op{l.route}
		}, []string{"qgemm_s", "route_select_rows"}},
		{"Route 4-bit: route_logits4", func(l *layer) []backend.Op {
			l.route.Router = f.shaped(1, 32, sh.hidden, 4)
			return []backend.Op{l.route}
		}, []string{"route_logits4", "route_select"}},
		{"Route of 2 rows", func(l *layer) []backend.Op {
			l.route.Rows, l.route.X = 2, f.f32(2*sh.hidden)
			l.route.Idx, l.route.Weights = f.buf(16, backend.I32), f.f32(16)
			return []backend.Op{l.route}
		}, []string{"qgemm_s", "route_select_rows"}},
		{"Experts top-6", func(l *layer) []backend.Op {
			l.expert.TopK, l.expert.SharedInter = 6, 64
			l.expert.SharedGate, l.expert.SharedUp, l.expert.SharedDown = f.shaped(1, 64, sh.hidden, 4), f.shaped(1, 64, sh.hidden, 4), f.shaped(1, sh.hidden, 64, 4)
			return []backend.Op{l.expert}
		}, []string{"experts_gate_up", "experts_down"}},
		{"Experts 8-bit up", func(l *layer) []backend.Op {
			l.expert.SharedInter = 64
			l.expert.SharedGate, l.expert.SharedUp, l.expert.SharedDown = f.shaped(1, 64, sh.hidden, 4), f.shaped(1, 64, sh.hidden, 4), f.shaped(1, sh.hidden, 64, 4)
			l.expert.Up = f.shaped(sh.experts, 64, sh.hidden, 8)
			return []backend.Op{l.expert}
		}, []string{"experts_gate_up", "experts_down"}},
		{"Experts 4-bit shared expert gate", func(l *layer) []backend.Op {
			l.expert.SharedInter = 64
			l.expert.SharedGate, l.expert.SharedUp, l.expert.SharedDown = f.shaped(1, 64, sh.hidden, 4), f.shaped(1, 64, sh.hidden, 4), f.shaped(1, sh.hidden, 64, 4)
			l.expert.SharedExpertGate = f.shaped(1, 1, sh.hidden, 4)
			return []backend.Op{l.expert}
		}, []string{"experts_gate_up", "experts_down"}},
		{"Experts whose shared expert is as wide: moe.metal", func(l *layer) []backend.Op {
			l.expert.SharedInter = 64
			l.expert.SharedGate, l.expert.SharedUp, l.expert.SharedDown = f.shaped(1, 64, sh.hidden, 4), f.shaped(1, 64, sh.hidden, 4), f.shaped(1, sh.hidden, 64, 4)
			return []backend.Op{l.expert}
		}, []string{"moe_gate_up_f32_sb", "moe_down_f32_sb"}},
		{"Gated DeltaNet conv of width 3", func(l *layer) []backend.Op {
			l.conv.K = 3
			return []backend.Op{l.conv, l.rule, l.norm}
		}, []string{"conv_silu", "delta_rule", "gated_rmsnorm"}},
		{"Gated DeltaNet value heads of 64", func(l *layer) []backend.Op {
			l.rule.ValueDim, l.norm.Dim = 64, 64
			return []backend.Op{l.conv, l.rule, l.norm}
		}, []string{"conv_silu", "delta_rule", "gated_rmsnorm"}},
		{"Gated DeltaNet not chained (the rule reads another buffer)", func(l *layer) []backend.Op {
			l.rule.QKV = l.conv.X
			return []backend.Op{l.conv, l.rule, l.norm}
		}, []string{"conv_silu", "delta_rule", "gated_rmsnorm"}},
		{"Gated DeltaNet in another order", func(l *layer) []backend.Op {
			return []backend.Op{l.rule, l.conv, l.norm}
		}, []string{"delta_rule", "conv_silu", "gated_rmsnorm"}},
	} {
		l := decodeLayer(f, sh, backend.F32)
		if got := first(c.edit(&l)...); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}

	// fused=off: every op of the layer on ops.metal
	for _, s := range []decodeShape{shape35B, shapeTiny} {
		plain, _ := newRecorded(t, Options{Fused: false})
		pf := fixture{t, plain, f.rng}
		p := compile(t, plain, decodeLayer(pf, s, backend.BF16).ops()...)
		var names []string
		for _, c := range p.cmds {
			if !c.Barrier {
				if e := c.Kernel.(entry); e.family != "ops" {
					t.Errorf("%s fused=off: %s of %s.metal", s.name, e.name, e.family)
				}
				names = append(names, c.Kernel.Name())
			}
		}
		want := []string{"qk_prep_rows_bf16", "attn_rows_bf16_j8", "conv_silu", "delta_rule", "gated_rmsnorm", "qgemm_s",
			"qgemm_s", "route_select_rows", "experts_gate_up", "experts_down"}
		if !slices.Equal(names, want) {
			t.Errorf("%s fused=off: %q, want %q", s.name, names, want)
		}
		checkOrdered(t, p)
	}
}

// TestGDNFusionLiveness: the Gated DeltaNet step is fused only where no
// other op reads the conv's or the rule's output (the kernel writes
// neither): a later reader or an earlier one (the next run's) blocks it;
// one that reads the norm's output does not, and waits behind a barrier
// for the fused step, as for any writer of what it reads.
func TestGDNFusionLiveness(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(10, 10))}
	sh := shapeTiny
	C, VW := (2*sh.hk+sh.hv)*128, sh.hv*128
	reader := func(x backend.Buffer, cols int) *backend.QLinear {
		return &backend.QLinear{X: x, W: f.shaped(1, 64, cols, 4), Y: f.f32(64), Rows: 1}
	}
	fusedStep := []string{"gdn_step_s4 32x1x1 256x1x1", "|", "gdn_finish 8x1x1 256x1x1"}
	for _, c := range []struct {
		name  string
		ops   func(l layer) []backend.Op
		fused bool
	}{
		{"alone", func(l layer) []backend.Op { return []backend.Op{l.conv, l.rule, l.norm} }, true},
		{"a later op reads the conv's output", func(l layer) []backend.Op {
			return []backend.Op{l.conv, l.rule, l.norm, reader(l.conv.Out, C)}
		}, false},
		{"a later op reads the rule's output", func(l layer) []backend.Op {
			return []backend.Op{l.conv, l.rule, l.norm, reader(l.rule.Out, VW)}
		}, false},
		{"an earlier op reads the rule's output (the next run's)", func(l layer) []backend.Op {
			return []backend.Op{reader(l.rule.Out, VW), l.conv, l.rule, l.norm}
		}, false},
		{"a later op reads part of the conv's output", func(l layer) []backend.Op {
			return []backend.Op{l.conv, l.rule, l.norm, reader(l.conv.Out.View(0, 64), 64)}
		}, false},
		{"a later op reads the norm's output", func(l layer) []backend.Op {
			return []backend.Op{l.conv, l.rule, l.norm, l.out}
		}, true},
		{"a second step over the same buffers (the next layer)", func(l layer) []backend.Op {
			conv2 := *l.conv
			rule2, norm2 := *l.rule, *l.norm
			conv2.State, rule2.State = f.f32(3*C), f.f32(sh.hv*128*128)
			return []backend.Op{l.conv, l.rule, l.norm, &conv2, &rule2, &norm2}
		}, true},
	} {
		l := decodeLayer(f, sh, backend.F32)
		ops := c.ops(l)
		p := compile(t, b, ops...)
		got := perOp(p)
		var at int
		for i, op := range ops {
			if op == backend.Op(l.conv) {
				at = i
			}
		}
		isFused := slices.Equal(got[at], fusedStep) && got[at+1] == nil && got[at+2] == nil
		if isFused != c.fused {
			t.Errorf("%s: fused %v, want %v (%q)", c.name, isFused, c.fused, got)
		}
		checkOrdered(t, p)
	}

	// the norm's reader waits for the fused step: a barrier after
	// gdn_finish, though the ConvSiLU the step stands for writes nothing
	// it reads
	l := decodeLayer(f, sh, backend.F32)
	if got, want := barriersOf(compile(t, b, l.conv, l.rule, l.norm, l.out)), []int{0, -1, 0, -1, 3}; !slices.Equal(got, want) {
		t.Errorf("the step and a projection of its output: %v, want %v", got, want)
	}
	// an op after the step that touches none of its buffers shares its
	// last stretch
	lin := &backend.QLinear{X: f.f32(256), W: f.shaped(1, 64, 256, 4), Y: f.f32(64), Rows: 1}
	if got, want := barriersOf(compile(t, b, l.conv, l.rule, l.norm, lin)), []int{0, -1, 0, 3}; !slices.Equal(got, want) {
		t.Errorf("the step and an independent projection: %v, want %v", got, want)
	}
}

// TestOracleModelDecodeStep compiles the tiny oracle model's one-token
// step on the recorder: each layer's ops take the decode kernels as
// TestDecodeKernelChoice expects (the Gated DeltaNet steps fused, the
// model's layers sharing their intermediates), every dispatch matches its
// source, conflicting ops are ordered, and Kernels counts the dispatches
// submitted.
func TestOracleModelDecodeStep(t *testing.T) {
	ck, err := checkpoint.Open("../../fixtures/tiny-qwen36-moe-4bit")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, fused := range []bool{true, false} {
		b, r := newRecorded(t, Options{Fused: fused, KV: backend.F32})
		m, err := model.Load(ck, b, 4)
		if err != nil {
			t.Fatal(err)
		}
		s := m.NewState(64)
		before := len(r.submitted)
		if err := m.Forward(s, []int32{17}, model.LastLogits, func(int, []float32) {}); err != nil {
			t.Fatal(err)
		}
		p := b.last
		if p == nil || len(r.submitted) != before+1 {
			t.Fatalf("fused=%v: %d command buffers for one token, want 1", fused, len(r.submitted)-before)
		}
		dispatched := 0
		for _, c := range r.submitted[before] {
			if !c.Barrier {
				dispatched++
			}
		}
		if n := b.Kernels(p); n != dispatched {
			t.Errorf("fused=%v: Kernels %d, %d dispatches submitted", fused, n, dispatched)
		}
		sc := newSourceCheck()
		sc.program(t, p, fmt.Sprintf("the oracle model's step, fused=%v", fused))
		checkOrdered(t, p)
		byLabel := map[string][]string{}
		for i, cmds := range perOp(p) {
			byLabel[backend.LabelOf(p.ops[i])] = cmds
		}
		want := map[string][]string{
			"L0.delta.conv":   {"gdn_step_s4 32x1x1 256x1x1", "|", "gdn_finish 8x1x1 256x1x1"},
			"L0.delta.rule":   nil,
			"L0.delta.norm":   nil,
			"L3.attn.qk_prep": {"qk_prep_f32 9x1x1 256x1x1"},
			"L3.attn.sdpa":    {"attn_split_f32 20x1x1 256x1x1", "|", "attn_combine 8x1x1 256x1x1"},
			"L7.moe.router":   {"route_logits8 4x1x1 256x1x1", "|", "route_select 1x1x1 256x1x1"},
			"L7.moe.experts":  {"experts_gate_up 81x1x1 256x1x1", "|", "experts_down 32x1x1 256x1x1"},
		}
		if !fused {
			want = map[string][]string{
				"L0.delta.conv":   {"conv_silu 8x1x1 256x1x1"},
				"L0.delta.rule":   {"delta_rule 128x1x1 256x1x1"},
				"L0.delta.norm":   {"gated_rmsnorm 1x1x1 256x1x1"},
				"L3.attn.qk_prep": {"qk_prep_rows_f32 9x1x1 256x1x1"},
				"L3.attn.sdpa":    {"attn_rows_f32_j8 1x1x1 256x1x1"},
				"L7.moe.router":   {"qgemm_s 1x1x1 256x1x1", "|", "route_select_rows 1x1x1 32x1x1"},
				"L7.moe.experts":  {"experts_gate_up 81x1x1 256x1x1", "|", "experts_down 32x1x1 256x1x1"},
			}
		}
		for label, w := range want {
			if _, ok := byLabel[label]; !ok {
				t.Errorf("fused=%v: no op %s in the step", fused, label)
				continue
			}
			if got := byLabel[label]; !slices.Equal(got, w) {
				t.Errorf("fused=%v %s: %q, want %q", fused, label, got, w)
			}
		}
		s.Free(b)
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
