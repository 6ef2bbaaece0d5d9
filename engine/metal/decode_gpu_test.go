package metal_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/metal"
	"petal/engine/quant"
)

// The one-token decode kernels through the backend on a device (Metal on
// a Mac, the CUDA dialect on an NVIDIA GPU elsewhere): each one-row op at
// the 35B model's shapes and the tiny oracle model's, for several steps,
// against the CPU backend given the same data; the program is checked to
// have taken the decode kernels. (The conformance suite's shapes are too
// small for them, and the oracle model's experts do not fit moe.metal.)

// gen makes the same data on any backend from a seed.
type gen struct {
	t   *testing.T
	be  backend.Backend
	rng *rand.Rand
}

func (g gen) vals(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (g.rng.Float32()*2 - 1) * scale
	}
	return v
}

func (g gen) typed(t backend.DType, n int, scale float32) backend.Buffer {
	g.t.Helper()
	b, err := backend.AllocFloats(g.be, t, g.vals(n, scale))
	if err != nil {
		g.t.Fatal(err)
	}
	return b
}

func (g gen) f32(n int, scale float32) backend.Buffer { return g.typed(backend.F32, n, scale) }

func (g gen) ints(v ...int32) backend.Buffer {
	g.t.Helper()
	b, err := backend.AllocInts(g.be, v)
	if err != nil {
		g.t.Fatal(err)
	}
	return b
}

func (g gen) mat(experts, rows, cols, bits int) backend.Matrix {
	g.t.Helper()
	m, err := g.be.Upload(quant.RandomMatrix(g.rng, experts, rows, cols, bits, 64))
	if err != nil {
		g.t.Fatal(err)
	}
	return m
}

// output is a buffer a case compares, within tol of the largest reference
// value (ids: the expert ids of a router, exactly but for near-ties).
type output struct {
	name string
	buf  backend.Buffer
	tol  float64
	ids  bool
}

// decodeCase is one-row ops, run steps times, the entry points their
// program must dispatch, and what to compare after the last step.
type decodeCase struct {
	name    string
	steps   int
	entries []string
	build   func(g gen, kv backend.DType) ([]backend.Op, []output)
}

func attentionCase(name string, QH, KVH, pos int) decodeCase {
	return decodeCase{name: name, steps: 3, entries: []string{"qk_prep_%s", "attn_split_%s", "attn_combine", "advance"},
		build: func(g gen, kv backend.DType) ([]backend.Op, []output) {
			const D, rot = 256, 64
			maxPos := pos + 8
			kvW := KVH * D
			// rows 0..pos-1 filled, the rest zero
			kc := g.typed(kv, maxPos*kvW, 0)
			vc := g.typed(kv, maxPos*kvW, 0)
			for _, c := range []backend.Buffer{kc, vc} {
				if err := g.be.Write(c.View(0, pos*kvW), g.vals(pos*kvW, 2)); err != nil {
					g.t.Fatal(err)
				}
			}
			p := g.ints(int32(pos))
			qg, q, out := g.f32(QH*2*D, 2), g.f32(QH*D, 0), g.f32(QH*D, 0)
			qn, kn := g.f32(D, 1), g.f32(D, 1)
			ops := []backend.Op{
				&backend.QKPrep{QG: qg, K: g.f32(kvW, 2), V: g.f32(kvW, 1), QNorm: qn, KNorm: kn, Q: q, KCache: kc, VCache: vc, Pos: p, Rows: 1,
					QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e7, Eps: 1e-6},
				&backend.Attention{Q: q, QG: qg, KCache: kc, VCache: vc, Out: out, Pos: p, Rows: 1, QHeads: QH, KVHeads: KVH, HeadDim: D},
				&backend.Advance{Pos: p, By: 1},
			}
			cacheTol, outTol := 1e-5, 1e-4
			if kv == backend.BF16 {
				cacheTol, outTol = 1.0/128, 1e-3 // a key may round to the next bf16 the other side of a tie
			}
			return ops, []output{{"q", q, 1e-5, false}, {"out", out, outTol, false}, {"K cache", kc, cacheTol, false}, {"V cache", vc, 0, false}}
		}}
}

func routeCase(name string, E, C int) decodeCase {
	return decodeCase{name: name, steps: 1, entries: []string{"route_logits8", "route_select"},
		build: func(g gen, _ backend.DType) ([]backend.Op, []output) {
			idx, wts := g.ints(make([]int32, 8)...), g.f32(8, 0)
			// inputs small enough that the weights spread over the experts
			return []backend.Op{&backend.Route{X: g.f32(C, 0.02), Router: g.mat(1, E, C, 8), Idx: idx, Weights: wts, Rows: 1, TopK: 8, Normalize: true}},
				[]output{{"expert ids", idx, 0, true}, {"weights", wts, 1e-5, false}}
		}}
}

func expertsCase(name string, E, H, I int) decodeCase {
	return decodeCase{name: name, steps: 1, entries: []string{"moe_gate_up_f32_sb", "moe_down_f32_sb"},
		build: func(g gen, _ backend.DType) ([]backend.Op, []output) {
			var ids []int32
			for _, e := range g.rng.Perm(E)[:8] {
				ids = append(ids, int32(e))
			}
			w := g.vals(8, 1)
			for i := range w {
				w[i] = 0.05 + float32(math.Abs(float64(w[i])))/8
			}
			wts, err := backend.AllocFloats(g.be, backend.F32, w)
			if err != nil {
				g.t.Fatal(err)
			}
			out := g.f32(H, 0)
			return []backend.Op{&backend.Experts{X: g.f32(H, 1), Idx: g.ints(ids...), Weights: wts,
				Gate: g.mat(E, I, H, 4), Up: g.mat(E, I, H, 4), Down: g.mat(E, H, I, 4),
				SharedGate: g.mat(1, I, H, 4), SharedUp: g.mat(1, I, H, 4), SharedDown: g.mat(1, H, I, 4), SharedExpertGate: g.mat(1, 1, H, 8),
				Out: out, Rows: 1, TopK: 8, Inter: I, SharedInter: I}}, []output{{"out", out, 1e-4, false}}
		}}
}

func gdnCase(name string, Hk, Hv int) decodeCase {
	return decodeCase{name: name, steps: 3, entries: []string{"gdn_step_s4", "gdn_finish"},
		build: func(g gen, _ backend.DType) ([]backend.Op, []output) {
			const D = 128
			C, VW := (2*Hk+Hv)*D, Hv*D
			aLog := make([]float32, Hv)
			for i := range aLog {
				aLog[i] = float32(math.Log(1 + 15*g.rng.Float64()))
			}
			aLogB, err := backend.AllocFloats(g.be, backend.F32, aLog)
			if err != nil {
				g.t.Fatal(err)
			}
			conv, core, normed := g.f32(C, 0), g.f32(VW, 0), g.f32(VW, 0)
			convState, state := g.f32(3*C, 1), g.f32(Hv*D*D, 0.1)
			return []backend.Op{
					&backend.ConvSiLU{X: g.f32(C, 1), State: convState, Weight: g.f32(4*C, 0.5), Out: conv, Rows: 1, Chans: C, K: 4},
					&backend.DeltaRule{QKV: conv, B: g.f32(Hv, 2), A: g.f32(Hv, 2), ALog: aLogB, DtBias: g.f32(Hv, 0.5), State: state, Out: core,
						Rows: 1, KeyHeads: Hk, KeyDim: D, ValueHeads: Hv, ValueDim: D},
					&backend.GatedRMSNorm{X: core, Z: g.f32(VW, 3), Weight: g.f32(D, 1), Out: normed, Rows: 1, Heads: Hv, Dim: D, Eps: 1e-6},
				}, []output{{"out", normed, 1e-4, false}, {"state", state, 1e-4, false},
					{"conv state", convState, 0, false}}
		}}
}

// TestDecodeKernels runs each decode case on the Metal backend (fused=on)
// and on the CPU backend from the same data, with f32 and bf16 KV caches.
func TestDecodeKernels(t *testing.T) {
	cases := []decodeCase{
		attentionCase("attention 35B (16 query heads on 2)", 16, 2, 700),
		attentionCase("attention tiny model (8 on 1)", 8, 1, 20),
		routeCase("router 35B (256 x 2048)", 256, 2048),
		routeCase("router tiny model (32 x 256)", 32, 256),
		expertsCase("experts at the 35B widths (16 of 512 x 2048)", 16, 2048, 512),
		expertsCase("experts 9 of 576 x 2112", 9, 2112, 576),
		gdnCase("Gated DeltaNet 35B (16/32 heads)", 16, 32),
		gdnCase("Gated DeltaNet tiny model (4/8 heads)", 4, 8),
	}
	for _, kv := range []backend.DType{backend.F32, backend.BF16} {
		t.Run("kv="+kv.String(), func(t *testing.T) {
			dev, ref := decodeBackends(t, kv)
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) { runDecodeCaseOn(t, dev, ref, c, kv, uint64(100+i)) })
			}
		})
	}
}

// decodeBackends are the Metal backend (fused=on) and the CPU backend,
// with KV caches of kv.
func decodeBackends(t *testing.T, kv backend.DType) (*metal.Backend, backend.Backend) {
	o := metal.DefaultOptions()
	o.KV = kv
	dev := openBackend(t, o)
	ref, err := cpu.NewWithOptions(cpu.Options{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	return dev, ref
}

// runDecodeCase runs c on backends of its own with an f32 KV cache (for
// cases whose ops have none).
func runDecodeCase(t *testing.T, c decodeCase) {
	dev, ref := decodeBackends(t, backend.F32)
	runDecodeCaseOn(t, dev, ref, c, backend.F32, 300)
}

// runDecodeCaseOn runs c on dev and on ref from the same data (seed),
// checking that dev's program dispatches c's entries and comparing c's
// outputs.
func runDecodeCaseOn(t *testing.T, dev *metal.Backend, ref backend.Backend, c decodeCase, kv backend.DType, seed uint64) {
	gotOps, gotOut := c.build(gen{t, dev, rand.New(rand.NewPCG(seed, 1))}, kv)
	refOps, refOut := c.build(gen{t, ref, rand.New(rand.NewPCG(seed, 1))}, kv)
	p, err := dev.Compile(gotOps)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range c.entries {
		if e[len(e)-2:] == "%s" {
			e = fmt.Sprintf(e, kv)
		}
		want = append(want, e)
	}
	if got := metal.Entries(p); !slices.Equal(got, want) {
		t.Fatalf("dispatches %q, want the decode kernels %q", got, want)
	}
	recordLaunched(t, want)
	q, err := ref.Compile(refOps)
	if err != nil {
		t.Fatal(err)
	}
	for range c.steps {
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		if err := q.Run(); err != nil {
			t.Fatal(err)
		}
	}
	for k, o := range gotOut {
		compareOutput(t, dev, ref, o, refOut[k])
	}
}

func compareOutput(t *testing.T, dev, ref backend.Backend, got, want output) {
	t.Helper()
	if got.ids {
		g, w := make([]int32, got.buf.Len), make([]int32, want.buf.Len)
		if err := dev.ReadInts(got.buf, g); err != nil {
			t.Fatal(err)
		}
		if err := ref.ReadInts(want.buf, w); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g, w) {
			t.Errorf("%s: %v, the CPU %v", got.name, g, w)
		}
		return
	}
	g, w := make([]float32, got.buf.Len), make([]float32, want.buf.Len)
	if err := dev.Read(got.buf, g); err != nil {
		t.Fatal(err)
	}
	if err := ref.Read(want.buf, w); err != nil {
		t.Fatal(err)
	}
	var worst, top float64
	for i := range w {
		top = max(top, math.Abs(float64(w[i])))
	}
	for i := range w {
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if math.IsNaN(float64(g[i])) {
			d = math.Inf(1)
		}
		worst = max(worst, d)
	}
	rel := worst / max(top, 1e-30)
	t.Logf("%s: max difference %.2g of max|ref| %.3g", got.name, rel, top)
	if !(rel <= got.tol) {
		t.Errorf("%s: off the CPU by %.2g of max|ref| (tolerance %g)", got.name, rel, got.tol)
	}
}
