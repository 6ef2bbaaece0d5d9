package metal

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// The grouped mat-vec of a QLinearGroup of one token and the norm fusions
// (norms=fused) as the lowering launches them: the kernel choice, the
// bindings against the kernels' sources, the parameters, the barriers,
// the fallbacks, and Kernels() counting the dispatches.

// argOf is buf's binding on b.
func argOf(t *testing.T, b *Backend, buf backend.Buffer) dispatch.Arg {
	t.Helper()
	a, err := b.arg(buf)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// groupOps is the 35B model's Gated DeltaNet input norm and projections
// of one token (qkv, z, b, a: 8192, 4096, 32 and 32 rows of 2048), the
// norm's delta optional.
func groupOps(f fixture, withDelta bool) (*backend.AddRMSNorm, *backend.QLinearGroup) {
	const H = 2048
	x := f.f32(H)
	n := &backend.AddRMSNorm{H: f.f32(H), Weight: f.f32(H), Out: x, Rows: 1, Dim: H, Eps: 1e-6}
	if withDelta {
		n.Delta = f.f32(H)
	}
	g := &backend.QLinearGroup{X: x, W: []backend.Matrix{f.shaped(1, 8192, H, 4), f.shaped(1, 4096, H, 4), f.shaped(1, 32, H, 4), f.shaped(1, 32, H, 4)},
		Y: f.f32(8192 + 4096 + 64), Rows: 1}
	return n, g
}

// wantGroupBindings is words0..3, sb0..3 and y0..3 of g's matrices, the
// slots past them matrix 0's.
func wantGroupBindings(t *testing.T, b *Backend, g *backend.QLinearGroup) []dispatch.Arg {
	slot := func(m int) int {
		if m < len(g.W) {
			return m
		}
		return 0
	}
	var out []dispatch.Arg
	for m := range 4 {
		out = append(out, g.W[slot(m)].(*matrix).words)
	}
	for m := range 4 {
		out = append(out, dispatch.Arg{Mem: g.W[slot(m)].(*matrix).sb})
	}
	y, off := argOf(t, b, g.Y), g.Offsets()
	for m := range 4 {
		out = append(out, y.Add(4*int64(off[slot(m)])))
	}
	return out
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// TestQMVGroupChoice: under fused=on a QLinearGroup of one token whose
// matrices all take qmv_f32_r2_sb runs in one dispatch of
// qmv_group_f32_r2_sb (the 35B model's four Gated DeltaNet projections,
// attention's q/k/v, two odd ones), its matrices and outputs bound in
// order, the empty slots to matrix 0's buffers, the parameters the launch
// rows of each; every dispatch matches the kernel's source.
func TestQMVGroupChoice(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(11, 11))}
	sc := newSourceCheck()
	_, gdn := groupOps(f, false)
	attn := &backend.QLinearGroup{X: f.f32(2048), W: []backend.Matrix{f.shaped(1, 8192, 2048, 4), f.shaped(1, 512, 2048, 4), f.shaped(1, 512, 2048, 4)},
		Y: f.f32(9216), Rows: 1}
	odd := &backend.QLinearGroup{X: f.f32(192), W: []backend.Matrix{f.mat(1, 7, 192, 4), f.mat(1, 513, 192, 4)}, Y: f.f32(520), Rows: 1}
	for _, c := range []struct {
		name   string
		g      *backend.QLinearGroup
		launch string
		p      kernels.QmvGroupParams
	}{
		// 12352 rows, 16 a threadgroup with teams of 32
		{"35B Gated DeltaNet projections", gdn, "qmv_group_f32_r2_sb 772x1x1 256x1x1",
			kernels.QmvGroupParams{Start0: 0, Start1: 8192, Start2: 12288, Start3: 12320, End: 12352, N: 4, Cols: 2048, Team: 32}},
		{"35B q/k/v", attn, "qmv_group_f32_r2_sb 576x1x1 256x1x1",
			kernels.QmvGroupParams{Start0: 0, Start1: 8192, Start2: 8704, Start3: 9216, End: 9216, N: 3, Cols: 2048, Team: 32}},
		// 520 rows, 256 a threadgroup with teams of 2 (3 groups)
		{"7 and 513 rows of 192", odd, "qmv_group_f32_r2_sb 3x1x1 256x1x1",
			kernels.QmvGroupParams{Start0: 0, Start1: 7, Start2: 520, Start3: 520, End: 520, N: 2, Cols: 192, Team: 2}},
	} {
		p := compile(t, b, c.g)
		if got := launched(p); !slices.Equal(got, []string{c.launch}) {
			t.Errorf("%s: %q, want %q", c.name, got, c.launch)
			continue
		}
		cmd := p.cmds[0]
		if got := paramsOf[kernels.QmvGroupParams](t, cmd); got != c.p {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.p)
		}
		want := append(wantGroupBindings(t, b, c.g), argOf(t, b, c.g.X))
		if !reflect.DeepEqual(cmd.Buffers, want) {
			t.Errorf("%s: bindings %+v, want %+v", c.name, cmd.Buffers, want)
		}
		if n := b.Kernels(p); n != 1 {
			t.Errorf("%s: Kernels %d, want 1", c.name, n)
		}
		sc.program(t, p, c.name)
	}
	if !slices.Contains(sc.entries(), "qmv.qmv_group_f32_r2_sb") {
		t.Errorf("entries %v", sc.entries())
	}
}

// TestQMVGroupFallbacks: a group the grouped mat-vec does not take runs a
// dispatch per matrix: one with an 8-bit matrix (qmv for the 4-bit one,
// the GEMM for the other), a single matrix, five, and every group under
// fused=off or of two rows.
func TestQMVGroupFallbacks(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(12, 12))}
	x := f.f32(2 * 192)
	m4 := func() backend.Matrix { return f.mat(1, 67, 192, 4) }
	five := &backend.QLinearGroup{X: x, W: []backend.Matrix{m4(), m4(), m4(), m4(), m4()}, Y: f.f32(5 * 67), Rows: 1}
	for _, c := range []struct {
		name string
		op   backend.Op
		want []string
	}{
		{"a 4-bit and an 8-bit matrix", &backend.QLinearGroup{X: x, W: []backend.Matrix{m4(), f.mat(1, 9, 192, 8)}, Y: f.f32(76), Rows: 1},
			[]string{"qmv_f32_r2_sb 1x1x1 256x1x1", "qgemm_s 1x1x1 256x1x1"}},
		{"one matrix", &backend.QLinearGroup{X: x, W: []backend.Matrix{m4()}, Y: f.f32(67), Rows: 1}, []string{"qmv_f32_r2_sb 1x1x1 256x1x1"}},
		{"five matrices", five, slices.Repeat([]string{"qmv_f32_r2_sb 1x1x1 256x1x1"}, 5)},
		{"two rows", &backend.QLinearGroup{X: x, W: []backend.Matrix{m4(), m4()}, Y: f.f32(2 * 134), Rows: 2},
			[]string{"qgemm_s 3x1x1 256x1x1", "qgemm_s 3x1x1 256x1x1"}},
	} {
		p := compile(t, b, c.op)
		if got := launched(p); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if n := b.Kernels(p); n != len(c.want) {
			t.Errorf("%s: Kernels %d, want %d", c.name, n, len(c.want))
		}
	}
	plain, _ := newRecorded(t, Options{Fused: false})
	pf := fixture{t, plain, f.rng}
	g := &backend.QLinearGroup{X: pf.f32(192), W: []backend.Matrix{pf.mat(1, 67, 192, 4), pf.mat(1, 9, 192, 4)}, Y: pf.f32(76), Rows: 1}
	if got := launched(compile(t, plain, g)); !slices.Equal(got, []string{"qgemm_s 3x1x1 256x1x1", "qgemm_s 1x1x1 256x1x1"}) {
		t.Errorf("fused=off: %q", got)
	}
}

// routeOps is the 35B model's post-attention norm and router of one
// token, the experts reading the norm's output after them.
func routeOps(f fixture, withDelta bool) (*backend.AddRMSNorm, *backend.Route, *backend.Experts) {
	l := decodeLayer(f, shape35B, backend.F32)
	n := &backend.AddRMSNorm{H: f.f32(2048), Weight: f.f32(2048), Out: l.route.X, Rows: 1, Dim: 2048, Eps: 1e-6}
	if withDelta {
		n.Delta = f.f32(2048)
	}
	return n, l.route, l.expert
}

// TestNormsFusedChoice: under norms=fused the add-and-norm before the
// router takes route_logits_norm8, a barrier and route_select_norm (two
// dispatches where apart takes three), and the one before the Gated
// DeltaNet projections qmv_group_norm_f32_r2_sb, a barrier and
// add_rmsnorm's write-back; the bindings tie the dispatches together and
// are the ops' buffers (h in the delta's place where there is none), the
// parameters carry the norm's delta flag and eps, a later reader of the
// normed row waits for the write-back, and every dispatch matches its
// kernel's source.
func TestNormsFusedChoice(t *testing.T) {
	o := DefaultOptions()
	o.FusedNorms = true
	b, _ := newRecorded(t, o)
	f := fixture{t, b, rand.New(rand.NewPCG(13, 13))}
	sc := newSourceCheck()
	for _, withDelta := range []bool{true, false} {
		n, r, ex := routeOps(f, withDelta)
		p := compile(t, b, n, r, ex)
		want := []string{"route_logits_norm8 32x1x1 256x1x1", "|", "route_select_norm 1x1x1 256x1x1",
			"|", "moe_gate_up_f32_sb 577x1x1 256x1x1", "|", "moe_down_f32_sb 128x1x1 128x1x1"}
		if got := launched(p); !slices.Equal(got, want) {
			t.Fatalf("norm, router, experts (delta %v): %q, want %q", withDelta, got, want)
		}
		if k := b.Kernels(p); k != 4 {
			t.Errorf("Kernels %d, want 4 (2 + 2)", k)
		}
		sc.program(t, p, "norm+route")
		checkOrdered(t, p)
		has := int32(btoi(withDelta))
		wantP := kernels.RouteNormParams{Experts: 256, Cols: 2048, Topk: 8, Normalize: 1, HasDelta: has, Eps: 1e-6}
		lg, sel := p.cmds[0], p.cmds[2]
		for _, c := range []dispatch.Command{lg, sel} {
			if got := paramsOf[kernels.RouteNormParams](t, c); got != wantP {
				t.Errorf("%s: %+v, want %+v", c.Kernel.Name(), got, wantP)
			}
		}
		h, delta := argOf(t, b, n.H), argOf(t, b, n.H)
		if withDelta {
			delta = argOf(t, b, n.Delta)
		}
		router := r.Router.(*matrix)
		wantLg := []dispatch.Arg{router.words, router.scales, router.biases, h, delta, argOf(t, b, n.Weight), lg.Buffers[6]}
		if !reflect.DeepEqual(lg.Buffers, wantLg) {
			t.Errorf("route_logits_norm8 bindings %+v, want %+v", lg.Buffers, wantLg)
		}
		wantSel := []dispatch.Arg{lg.Buffers[6], argOf(t, b, r.Idx), argOf(t, b, r.Weights), h, delta, argOf(t, b, n.Weight), argOf(t, b, n.Out)}
		if !reflect.DeepEqual(sel.Buffers, wantSel) {
			t.Errorf("route_select_norm bindings %+v, want %+v", sel.Buffers, wantSel)
		}
		if lg.Buffers[6].Mem != b.scratch.m {
			t.Errorf("the logits are not in the scratch")
		}

		gn, g := groupOps(f, withDelta)
		p = compile(t, b, gn, g)
		want = []string{"qmv_group_norm_f32_r2_sb 772x1x1 256x1x1", "|", "add_rmsnorm 1x1x1 256x1x1"}
		if got := launched(p); !slices.Equal(got, want) {
			t.Fatalf("norm, projections (delta %v): %q, want %q", withDelta, got, want)
		}
		if k := b.Kernels(p); k != 2 {
			t.Errorf("Kernels %d, want 2", k)
		}
		sc.program(t, p, "norm+group")
		h, delta = argOf(t, b, gn.H), argOf(t, b, gn.H)
		if withDelta {
			delta = argOf(t, b, gn.Delta)
		}
		wantGP := kernels.QmvGroupParams{Start0: 0, Start1: 8192, Start2: 12288, Start3: 12320, End: 12352, N: 4, Cols: 2048, Team: 32, HasDelta: has, Eps: 1e-6}
		if got := paramsOf[kernels.QmvGroupParams](t, p.cmds[0]); got != wantGP {
			t.Errorf("qmv_group_norm: %+v, want %+v", got, wantGP)
		}
		if want := append(wantGroupBindings(t, b, g), h, delta, argOf(t, b, gn.Weight)); !reflect.DeepEqual(p.cmds[0].Buffers, want) {
			t.Errorf("qmv_group_norm bindings %+v, want %+v", p.cmds[0].Buffers, want)
		}
		if got := paramsOf[kernels.NormParams](t, p.cmds[2]); got != (kernels.NormParams{Dim: 2048, HasDelta: has, Eps: 1e-6}) {
			t.Errorf("add_rmsnorm write-back: %+v", got)
		}
		if want := []dispatch.Arg{h, delta, argOf(t, b, gn.Weight), argOf(t, b, gn.Out)}; !reflect.DeepEqual(p.cmds[2].Buffers, want) {
			t.Errorf("add_rmsnorm write-back bindings %+v, want %+v", p.cmds[2].Buffers, want)
		}
	}
	t.Logf("entry points: %v", sc.entries())
}

// TestNormsApartAndFallbacks: norms=apart (the default) takes the old
// path: add_rmsnorm, a barrier, the router's or the grouped mat-vec's
// dispatches; under norms=fused so does every pair the fused kernels do
// not take: a router reading another buffer, two rows, a row longer than
// the kernels stage, a router of more experts than route.metal takes, a
// group with an 8-bit matrix, and fused=off.
func TestNormsApartAndFallbacks(t *testing.T) {
	apart, _ := newRecorded(t, DefaultOptions())
	af := fixture{t, apart, rand.New(rand.NewPCG(14, 14))}
	n, r, _ := routeOps(af, true)
	p := compile(t, apart, n, r)
	if got, want := launched(p), []string{"add_rmsnorm 1x1x1 256x1x1", "|", "route_logits8 32x1x1 256x1x1", "|", "route_select 1x1x1 256x1x1"}; !slices.Equal(got, want) {
		t.Errorf("norms=apart, norm and router: %q, want %q", got, want)
	}
	if k := apart.Kernels(p); k != 3 {
		t.Errorf("norms=apart: Kernels %d, want 3", k)
	}
	gn, g := groupOps(af, true)
	if got, want := launched(compile(t, apart, gn, g)), []string{"add_rmsnorm 1x1x1 256x1x1", "|", "qmv_group_f32_r2_sb 772x1x1 256x1x1"}; !slices.Equal(got, want) {
		t.Errorf("norms=apart, norm and projections: %q, want %q", got, want)
	}

	o := DefaultOptions()
	o.FusedNorms = true
	b, _ := newRecorded(t, o)
	f := fixture{t, b, rand.New(rand.NewPCG(15, 15))}
	const H = 192
	mkNorm := func(rows, dim int) *backend.AddRMSNorm {
		return &backend.AddRMSNorm{H: f.f32(rows * dim), Delta: f.f32(rows * dim), Weight: f.f32(dim), Out: f.f32(rows * dim), Rows: rows, Dim: dim, Eps: 1e-6}
	}
	route := func(x backend.Buffer, rows, E, cols int) *backend.Route {
		return &backend.Route{X: x, Router: f.shaped(1, E, cols, 8), Idx: f.buf(rows*8, backend.I32), Weights: f.f32(rows * 8), Rows: rows, TopK: 8, Normalize: true}
	}
	group := func(x backend.Buffer, rows, cols, bits2 int) *backend.QLinearGroup {
		return &backend.QLinearGroup{X: x, W: []backend.Matrix{f.shaped(1, 64, cols, 4), f.shaped(1, 64, cols, bits2)}, Y: f.f32(rows * 128), Rows: rows}
	}
	n1 := mkNorm(1, H)
	n2 := mkNorm(2, H)
	long := mkNorm(1, 4160)
	for _, c := range []struct {
		name  string
		ops   []backend.Op
		first string // the first dispatch: add_rmsnorm where the norm stays apart
	}{
		{"router reading another buffer", []backend.Op{n1, route(f.f32(H), 1, 64, H)}, "add_rmsnorm"},
		{"router of two rows", []backend.Op{n2, route(n2.Out, 2, 64, H)}, "add_rmsnorm"},
		{"router over a row of 4160", []backend.Op{long, route(long.Out, 1, 64, 4160)}, "add_rmsnorm"},
		{"router of 2048 experts", []backend.Op{n1, route(n1.Out, 1, 2048, H)}, "add_rmsnorm"},
		{"group with an 8-bit matrix", []backend.Op{n1, group(n1.Out, 1, H, 8)}, "add_rmsnorm"},
		{"group of two rows", []backend.Op{n2, group(n2.Out, 2, H, 4)}, "add_rmsnorm"},
		{"group over a row of 4160", []backend.Op{long, group(long.Out, 1, 4160, 4)}, "add_rmsnorm"},
		{"a router the fused kernels take", []backend.Op{n1, route(n1.Out, 1, 64, H)}, "route_logits_norm8"},
		{"a group the fused kernel takes", []backend.Op{n1, group(n1.Out, 1, H, 4)}, "qmv_group_norm_f32_r2_sb"},
	} {
		p := compile(t, b, c.ops...)
		got := launched(p)
		if len(got) == 0 || !strings.HasPrefix(got[0], c.first+" ") {
			t.Errorf("%s: %q, want %s first", c.name, got, c.first)
		}
		checkOrdered(t, p)
	}
	plain, _ := newRecorded(t, Options{Fused: false, FusedNorms: true})
	pf := fixture{t, plain, f.rng}
	pn := &backend.AddRMSNorm{H: pf.f32(H), Weight: pf.f32(H), Out: pf.f32(H), Rows: 1, Dim: H, Eps: 1e-6}
	pr := &backend.Route{X: pn.Out, Router: pf.shaped(1, 64, H, 8), Idx: pf.buf(8, backend.I32), Weights: pf.f32(8), Rows: 1, TopK: 8}
	if got := launched(compile(t, plain, pn, pr)); len(got) == 0 || got[0] != "add_rmsnorm 1x1x1 256x1x1" {
		t.Errorf("fused=off, norms=fused: %q", got)
	}
}

func TestParseNormsOption(t *testing.T) {
	if o, err := ParseOptions(nil); err != nil || o.FusedNorms {
		t.Errorf("default: %+v %v; want norms=apart", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "norms", Value: "fused"}}); err != nil || !o.FusedNorms || !o.Fused {
		t.Errorf("norms=fused: %+v %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "norms", Value: "fused"}, {Key: "norms", Value: "apart"}}); err != nil || o.FusedNorms {
		t.Errorf("norms=apart: %+v %v", o, err)
	}
	if _, err := ParseOptions([]backend.Option{{Key: "norms", Value: "on"}}); err == nil || !strings.Contains(err.Error(), "norms") {
		t.Errorf("norms=on: %v", err)
	}
	if !strings.Contains(OptionsHelp, "norms=fused|apart") || !strings.Contains(OptionsHelp, "default is apart") {
		t.Errorf("the help does not say norms=fused|apart and its default: %s", OptionsHelp)
	}
}
