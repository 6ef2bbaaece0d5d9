package metal

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// gemm=simd as the lowering launches it: which ops of several rows take
// gemm.metal's GEMMs and which keep ops.metal's, their grids, threadgroups,
// parameters and bindings as engine/metal/cudarun's tests launch them, and
// the barriers inside an Experts op.

// prefillOps is a prefill chunk's projections and MoE at sh: a 4-bit
// QLinear (the Gated DeltaNet's output projection), an 8-bit one (the
// router's width, which the GEMM does not take), a QLinearGroup of a 4-bit
// and an 8-bit matrix, and the experts, over rows rows.
func prefillOps(f fixture, sh decodeShape, rows int) []backend.Op {
	const Dg = 128
	H, VW := sh.hidden, sh.hv*Dg
	a := f.f32(rows * H)
	idx, wts := f.buf(rows*sh.topK, backend.I32), f.f32(rows*sh.topK)
	return []backend.Op{
		&backend.QLinear{X: f.f32(rows * VW), W: f.shaped(1, H, VW, 4), Y: f.f32(rows * H), Rows: rows},
		&backend.QLinear{X: a, W: f.shaped(1, sh.experts, H, 8), Y: f.f32(rows * sh.experts), Rows: rows},
		&backend.QLinearGroup{X: a, W: []backend.Matrix{f.shaped(1, VW, H, 4), f.shaped(1, sh.hv, H, 8)}, Y: f.f32(rows * (VW + sh.hv)), Rows: rows},
		&backend.Experts{X: a, Idx: idx, Weights: wts, Gate: f.shaped(sh.experts, sh.inter, H, 4), Up: f.shaped(sh.experts, sh.inter, H, 4),
			Down: f.shaped(sh.experts, H, sh.inter, 4), SharedGate: f.shaped(1, sh.share, H, 4), SharedUp: f.shaped(1, sh.share, H, 4),
			SharedDown: f.shaped(1, H, sh.share, 4), SharedExpertGate: f.shaped(1, 1, H, 8), Out: f.f32(rows * H),
			Rows: rows, TopK: sh.topK, Inter: sh.inter, SharedInter: sh.share},
	}
}

// TestSimdGEMMChoice: at the 35B model's shapes and the tiny oracle
// model's, over 100 rows, gemm=simd takes gemm.metal for the 4-bit
// projections (a 32x64 tile per threadgroup of 128 threads) and for the
// experts (grouping, shared expert and routed GEMMs, combine, with a
// barrier where a dispatch reads what an earlier one wrote), while 8-bit
// matrices keep ops.metal's GEMM; gemm=plain (the default) and one row
// take none of it. Every dispatch matches its kernel's source, and ops
// that conflict have a barrier between them.
func TestSimdGEMMChoice(t *testing.T) {
	const rows = 100
	want := map[string][][]string{
		"35B": {
			{"gemm_dense_f32 32x4x1 128x1x1"},
			{"qgemm_s 8x4x1 256x1x1"},
			{"gemm_dense_f32 64x4x1 128x1x1", "qgemm_s 1x4x1 256x1x1"},
			// 800 pairs in tiles of 32: at most 25 + 256 tiles
			{"moe_route 1x1x1 1024x1x1", "qgemm_s 1x4x1 256x1x1", "gemm_dense_f32 8x4x1 128x1x1", "gemm_dense_f32 8x4x1 128x1x1", "|",
				"moe_shared_swiglu 200x1x1 256x1x1", "gemm_gateup 16x281x1 128x1x1", "|",
				"gemm_dense_bf16 32x4x1 128x1x1", "gemm_down 32x281x1 128x1x1", "|",
				"moe_combine 100x1x1 256x1x1"},
		},
		"tiny oracle model": {
			{"gemm_dense_f32 4x4x1 128x1x1"},
			{"qgemm_s 1x4x1 256x1x1"},
			{"gemm_dense_f32 16x4x1 128x1x1", "qgemm_s 1x4x1 256x1x1"},
			{"moe_route 1x1x1 1024x1x1", "qgemm_s 1x4x1 256x1x1", "gemm_dense_f32 2x4x1 128x1x1", "gemm_dense_f32 2x4x1 128x1x1", "|",
				"moe_shared_swiglu 50x1x1 256x1x1", "gemm_gateup 2x57x1 128x1x1", "|",
				"gemm_dense_bf16 4x4x1 128x1x1", "gemm_down 4x57x1 128x1x1", "|",
				"moe_combine 100x1x1 256x1x1"},
		},
	}
	sc := newSourceCheck()
	for _, sh := range []decodeShape{shape35B, shapeTiny} {
		o := DefaultOptions()
		o.SimdGEMM = true
		b, _ := newRecorded(t, o)
		f := fixture{t, b, rand.New(rand.NewPCG(9, 9))}
		p := compile(t, b, prefillOps(f, sh, rows)...)
		got := perOp(p)
		for i, w := range want[sh.name] {
			if !slices.Equal(got[i], w) {
				t.Errorf("%s op %d (%s): %q, want %q", sh.name, i, p.ops[i].Name(), got[i], w)
			}
		}
		sc.program(t, p, sh.name+" gemm=simd")
		checkOrdered(t, p)

		for _, tc := range []struct {
			what string
			o    Options
			rows int
		}{{"gemm=plain", DefaultOptions(), rows}, {"one row", o, 1}} {
			b, _ := newRecorded(t, tc.o)
			f := fixture{t, b, rand.New(rand.NewPCG(9, 9))}
			p := compile(t, b, prefillOps(f, sh, tc.rows)...)
			for _, c := range launched(p) {
				if strings.HasPrefix(c, "gemm_") || strings.HasPrefix(c, "moe_route") || strings.HasPrefix(c, "moe_combine") || strings.HasPrefix(c, "moe_shared") {
					t.Errorf("%s %s: %s", sh.name, tc.what, c)
				}
			}
			sc.program(t, p, sh.name+" "+tc.what)
		}
	}
	t.Logf("entry points: %v", sc.entries())
}

// TestSimdGEMMParams: the parameter structs and the bindings that tie an
// Experts op's dispatches together at the 35B shapes (each dispatch reads
// the buffers the earlier ones wrote: the grouping's rows, tiles and
// positions, the shared expert's activations and logit, the routed
// activations and outputs), the interleaved scale/bias words bound, and
// the dense GEMM's.
func TestSimdGEMMParams(t *testing.T) {
	o := DefaultOptions()
	o.SimdGEMM = true
	b, _ := newRecorded(t, o)
	f := fixture{t, b, rand.New(rand.NewPCG(10, 10))}
	const rows = 100
	ops := prefillOps(f, shape35B, rows)
	p := compile(t, b, ops...)
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
	sbw := func(m backend.Matrix) []dispatch.Arg {
		w := m.(*matrix)
		return []dispatch.Arg{w.words, {Mem: w.sb}}
	}

	ql := ops[0].(*backend.QLinear)
	d := commandsOf(p, 0)[0]
	check("gemm_dense_f32", paramsOf[kernels.GemmDenseParams](t, d), kernels.GemmDenseParams{M: rows, N: 2048, K: 4096})
	check("gemm_dense_f32 bindings", d.Buffers, join([]dispatch.Arg{arg(ql.X)}, sbw(ql.W), []dispatch.Arg{arg(ql.Y)}))

	g := ops[2].(*backend.QLinearGroup)
	gd := commandsOf(p, 2)
	check("the group's first matrix", gd[0].Buffers, join([]dispatch.Arg{arg(g.X)}, sbw(g.W[0]), []dispatch.Arg{arg(g.Y)}))
	check("the group's second matrix writes after the first", gd[1].Buffers[5], arg(g.Y).Add(4*rows*4096))

	e := ops[3].(*backend.Experts)
	m := commandsOf(p, 3)
	if len(m) != 9 {
		t.Fatalf("%d dispatches for the experts, want 9", len(m))
	}
	route, segc, sgc, suc, swiglu, gateup, sdc, downc, combine := m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8]
	check("moe_route", paramsOf[kernels.MoeRouteParams](t, route), kernels.MoeRouteParams{T: rows, E: 256, BM: gemmBM})
	check("moe_route reads the ids", route.Buffers[0], arg(e.Idx))
	counts, offsets, pos, rowTok, tiles, ntiles := route.Buffers[1], route.Buffers[2], route.Buffers[3], route.Buffers[4], route.Buffers[5], route.Buffers[6]
	check("shared gate", paramsOf[kernels.GemmDenseParams](t, sgc), kernels.GemmDenseParams{M: rows, N: 512, K: 2048})
	check("shared gate bindings", sgc.Buffers[:3], join([]dispatch.Arg{arg(e.X)}, sbw(e.SharedGate)))
	check("shared up bindings", suc.Buffers[:3], join([]dispatch.Arg{arg(e.X)}, sbw(e.SharedUp)))
	check("the shared expert gate's logit", segc.Buffers[:3], qbufs(e.SharedExpertGate.(*matrix)))
	check("moe_shared_swiglu", paramsOf[kernels.SharedSwigluParams](t, swiglu), kernels.SharedSwigluParams{Inter: 512, N: rows * 512})
	check("moe_shared_swiglu reads gate, up, logit", swiglu.Buffers[:3], []dispatch.Arg{sgc.Buffers[3], suc.Buffers[3], segc.Buffers[5]})
	check("gemm_gateup", paramsOf[kernels.GemmGroupParams](t, gateup), kernels.GemmGroupParams{N: 512, K: 2048})
	check("gemm_gateup bindings", gateup.Buffers, join([]dispatch.Arg{arg(e.X), rowTok}, sbw(e.Gate), sbw(e.Up),
		[]dispatch.Arg{gateup.Buffers[6], tiles, offsets, ntiles}))
	check("shared down", paramsOf[kernels.GemmDenseParams](t, sdc), kernels.GemmDenseParams{M: rows, N: 2048, K: 512})
	check("shared down reads h, writes out", sdc.Buffers, join([]dispatch.Arg{swiglu.Buffers[3]}, sbw(e.SharedDown), []dispatch.Arg{arg(e.Out)}))
	check("gemm_down", paramsOf[kernels.GemmGroupParams](t, downc), kernels.GemmGroupParams{N: 2048, K: 512})
	check("gemm_down bindings", downc.Buffers, join([]dispatch.Arg{gateup.Buffers[6]}, sbw(e.Down), []dispatch.Arg{downc.Buffers[3], tiles, offsets, ntiles}))
	check("moe_combine", paramsOf[kernels.MoeCombineParams](t, combine), kernels.MoeCombineParams{N: 2048, Add: 1})
	check("moe_combine bindings", combine.Buffers, []dispatch.Arg{downc.Buffers[3], pos, arg(e.Weights), arg(e.Out)})

	// The temporaries lie in the scratch, apart.
	type span struct {
		what     string
		off, len int64
	}
	pairs := int64(rows * 8)
	spans := []span{{"counts", counts.Off, 4 * 256}, {"offsets", offsets.Off, 4 * 257}, {"pos", pos.Off, 4 * pairs},
		{"rowTok", rowTok.Off, 4 * pairs}, {"tiles", tiles.Off, 8 * (pairs/32 + 1 + 256)}, {"ntiles", ntiles.Off, 4},
		{"status", route.Buffers[7].Off, 4}, {"h", gateup.Buffers[6].Off, 2 * pairs * 512}, {"ys", downc.Buffers[3].Off, 4 * pairs * 2048},
		{"shared g", sgc.Buffers[3].Off, 4 * rows * 512}, {"shared u", suc.Buffers[3].Off, 4 * rows * 512},
		{"shared h", swiglu.Buffers[3].Off, 2 * rows * 512}, {"logit", segc.Buffers[5].Off, 4 * rows}}
	for i, a := range spans {
		for _, c := range spans[i+1:] {
			if a.off < c.off+c.len && c.off < a.off+a.len {
				t.Errorf("temporaries %s [%d, +%d) and %s [%d, +%d) overlap", a.what, a.off, a.len, c.what, c.off, c.len)
			}
		}
	}
	if p.scratchNeed < spans[len(spans)-1].off+spans[len(spans)-1].len {
		t.Errorf("scratch %d bytes, the experts' temporaries need %d", p.scratchNeed, spans[len(spans)-1].off+spans[len(spans)-1].len)
	}
}

// TestSimdGEMMFallbacks: under gemm=simd, Experts of several rows whose
// shape gemm.metal does not take (top-4, a stack of 4-bit matrices in
// groups of 32, an inner size not a multiple of 64) and a 4-bit QLinear
// whose rows are not a multiple of 8 keep ops.metal's kernels.
func TestSimdGEMMFallbacks(t *testing.T) {
	o := DefaultOptions()
	o.SimdGEMM = true
	b, _ := newRecorded(t, o)
	f := fixture{t, b, rand.New(rand.NewPCG(11, 11))}
	const rows, H = 20, 256
	x := f.f32(rows * H)
	experts := func(topK, inter int, gate backend.Matrix) *backend.Experts {
		if gate == nil {
			gate = f.shaped(16, inter, H, 4)
		}
		return &backend.Experts{X: x, Idx: f.buf(rows*topK, backend.I32), Weights: f.f32(rows * topK), Gate: gate, Up: f.shaped(16, inter, H, 4),
			Down: f.shaped(16, H, inter, 4), SharedGate: f.shaped(1, 64, H, 4), SharedUp: f.shaped(1, 64, H, 4),
			SharedDown: f.shaped(1, H, 64, 4), SharedExpertGate: f.shaped(1, 1, H, 8), Out: f.f32(rows * H),
			Rows: rows, TopK: topK, Inter: inter, SharedInter: 64}
	}
	group32 := func() backend.Matrix {
		m := f.shaped(16, 64, H, 4).(*matrix)
		m.q.Group, m.shape.GroupSize, m.sb = 32, 32, nil
		return m
	}
	for i, op := range []backend.Op{
		experts(4, 64, nil), experts(8, 96, nil), experts(8, 64, group32()),
		&backend.QLinear{X: x, W: f.shaped(1, 68, H, 4), Y: f.f32(rows * 68), Rows: rows},
	} {
		p := compile(t, b, op)
		for _, c := range launched(p) {
			if strings.HasPrefix(c, "gemm_") || strings.HasPrefix(c, "moe_") {
				t.Errorf("case %d (%s): %s", i, op.Name(), c)
			}
		}
		if got := launched(p); len(got) == 0 {
			t.Errorf("case %d: nothing launched", i)
		}
	}
	// and the same Experts at top-8, inner 64, groups of 64 does take it
	p := compile(t, b, experts(8, 64, nil))
	if got := fmt.Sprint(launched(p)); !strings.Contains(got, "gemm_gateup") {
		t.Errorf("the fitting case: %s", got)
	}
}

func TestParseGEMMOption(t *testing.T) {
	if o := DefaultOptions(); o.SimdGEMM || o.TensorGEMM {
		t.Error("gemm=simd or gemm=tensor is the default before it has run on Apple hardware")
	}
	for v, want := range map[string][2]bool{"tensor": {true, true}, "simd": {true, false}, "plain": {false, false}} {
		o, err := ParseOptions([]backend.Option{{Key: "gemm", Value: "tensor"}, {Key: "gemm", Value: v}})
		if err != nil || o.SimdGEMM != want[0] || o.TensorGEMM != want[1] {
			t.Errorf("gemm=%s (after gemm=tensor): %+v %v", v, o, err)
		}
	}
	if _, err := ParseOptions([]backend.Option{{Key: "gemm", Value: "tc"}}); err == nil || !strings.Contains(err.Error(), "gemm") || !strings.Contains(err.Error(), "tensor, simd or plain") {
		t.Errorf("gemm=tc: %v", err)
	}
	if !strings.Contains(OptionsHelp, "gemm=tensor|simd|plain") {
		t.Errorf("the help does not name gemm: %s", OptionsHelp)
	}
}
