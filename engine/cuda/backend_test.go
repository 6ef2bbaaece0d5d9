package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/kernels"
	"petal/engine/quant"
	"petal/engine/sample"
)

// testBackend is a backend with options o, skipping the test where this
// machine has no CUDA GPU (PETAL_CUDA_REQUIRE=1 makes that a failure).
func testBackend(t *testing.T, o Options) *Backend {
	t.Helper()
	gpu(t)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestConformance: the backend passes the suite every backend must, with
// graphs, the decode kernels and the tensor-core GEMMs on (the default),
// graphs off, the plain kernels for one-row ops, and the plain kernels for
// ops of several rows. (The suite's matrices of 67 rows and its top-3
// experts are off the tensor-core GEMMs' shapes, so its ops of several
// rows take the plain kernels under gemm=tc too: the tensor-core path is
// checked by TestTensorCoreOpsMatchReferences.)
func TestConformance(t *testing.T) {
	variants := map[string]func(*Options){
		"default":                   func(*Options) {},
		"graphs=off":                func(o *Options) { o.Graphs = false },
		"fused=off":                 func(o *Options) { o.Fused = false },
		"gemm=plain":                func(o *Options) { o.TensorCores = false },
		"pdl=some":                  func(o *Options) { o.PDL, o.PDLSome = true, true },
		"pdl=some,graphs=off":       func(o *Options) { o.PDL, o.PDLSome, o.Graphs = true, true, false },
		"pdl=off":                   func(o *Options) { o.PDL, o.PDLSome = false, false },
		"sampler=row":               func(o *Options) { o.SamplerTopK = false },
		"gdnnorm=ticket,router=f64": func(o *Options) { o.GDNCluster, o.Router = false, RouterF64 },
		"kvshadow=off":              func(o *Options) { o.KVShadow = false },
		"pool=off":                  func(o *Options) { o.Pool = false },
	}
	for _, name := range []string{"default", "graphs=off", "fused=off", "gemm=plain", "pdl=some", "pdl=some,graphs=off", "pdl=off", "sampler=row", "gdnnorm=ticket,router=f64", "kvshadow=off", "pool=off"} {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			variants[name](&o)
			backendtest.Run(t, testBackend(t, o))
		})
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions([]backend.Option{{Key: "device", Value: "1"}, {Key: "graphs", Value: "off"}, {Key: "qmv", Value: "fast"}, {Key: "kv", Value: "bf16"}, {Key: "fused", Value: "off"}, {Key: "sync", Value: "op"}, {Key: "gemm", Value: "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Device != 1 || o.Graphs || !o.FastQMV || o.KV != backend.BF16 || o.Fused || !o.SyncEach || o.TensorCores {
		t.Errorf("options %+v", o)
	}
	if o, _ := ParseOptions([]backend.Option{{Key: "gemm", Value: "tc"}}); !o.TensorCores || !DefaultOptions().TensorCores {
		t.Errorf("gemm=tc gives %+v; the defaults %+v", o, DefaultOptions())
	}
	if !strings.Contains(OptionsHelp, "gemm=wgrp|wgrs|wgr3|wgr|wg|tc|plain") {
		t.Errorf("the options' help does not list gemm: %s", OptionsHelp)
	}
	for v, want := range map[string]RouterKernel{"f64": RouterF64, "plain": RouterPlain, "i8": RouterI8, "i8w": RouterI8W, "i8wg": RouterI8WG, "cert": RouterCert} {
		if o, err := ParseOptions([]backend.Option{{Key: "router", Value: v}}); err != nil || o.Router != want {
			t.Errorf("router=%s gives %v (%v), want %v", v, o.Router, err, want)
		}
	}
	if o, _ := ParseOptions(nil); !reflect.DeepEqual(o, DefaultOptions()) {
		t.Errorf("no options give %+v, not the defaults", o)
	}
	for _, bad := range []backend.Option{{Key: "kv", Value: "f16"}, {Key: "graphs", Value: "maybe"}, {Key: "device", Value: "-1"}, {Key: "qmv", Value: "slow"}, {Key: "gemm", Value: "wgmma"}, {Key: "router", Value: "tf32"}, {Key: "warp", Value: "9"}} {
		_, err := ParseOptions([]backend.Option{bad})
		if err == nil || !strings.Contains(err.Error(), bad.Key) {
			t.Errorf("%s=%s: error %v, want one naming %s", bad.Key, bad.Value, err, bad.Key)
		}
	}
}

// fusedCase is one op at a shape of the model family, where a decode
// kernel takes it when fused is on.
type fusedCase struct {
	name    string
	kernels []string // the kernels of the op with fused on
	build   func(b *Backend, rng *rand.Rand) (op backend.Op, check func(t *testing.T))
	// chain, when set, builds several ops instead (kernels are the first's)
	chain func(b *Backend, rng *rand.Rand) (ops []backend.Op, check func(t *testing.T))
}

// TestFusedMatchReferences: at the model family's shapes (heads of 256, 8
// query heads per KV head, top-8 routing, 4-bit groups of 64) one-row ops
// run on the decode kernels, and those match the float64 references as
// the plain kernels do, outputs poisoned first.
func TestFusedMatchReferences(t *testing.T) {
	for _, fused := range []bool{true, false} {
		o := DefaultOptions()
		o.Fused = fused
		b := testBackend(t, o)
		for i, c := range fusedCases() {
			t.Run(fmt.Sprintf("%s fused=%v", c.name, fused), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, uint64(i)))
				var ops []backend.Op
				var check func(*testing.T)
				if c.chain != nil {
					ops, check = c.chain(b, rng)
				} else {
					op, chk := c.build(b, rng)
					ops, check = []backend.Op{op}, chk
				}
				p, err := b.Compile(ops)
				if err != nil {
					t.Fatal(err)
				}
				got := p.(*program).kernelNames()[0]
				if fused && !slices.Equal(got, c.kernels) {
					t.Errorf("kernels %v, want %v", got, c.kernels)
				}
				if !fused && slices.ContainsFunc(got, func(n string) bool { return slices.Contains(c.kernels, n) }) {
					t.Errorf("fused=off ran %v", got)
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				check(t)
			})
		}
	}
}

func fusedCases() []fusedCase {
	cases := []fusedCase{
		{name: "QLinear", kernels: []string{"qmv"}, build: func(b *Backend, rng *rand.Rand) (backend.Op, func(*testing.T)) {
			const R, C = 301, 512
			w, ref := upload(b, rng, 1, R, C, 4)
			x := randoms(rng, C, 1)
			o := &backend.QLinear{X: floats(b, x), W: w, Y: floats(b, nans(R)), Rows: 1}
			return o, func(t *testing.T) {
				within(t, "QLinear", read(t, b, o.Y), backendtest.Linear(ref, R, C, x, 1))
			}
		}},
		{name: "QLinearGroup", kernels: []string{"qmv_group"}, build: func(b *Backend, rng *rand.Rand) (backend.Op, func(*testing.T)) {
			// the Gated DeltaNet's four projections in miniature: rows off
			// the rows a team takes (2), a matrix of 32 rows, one of 3
			const C = 512
			rows := []int{301, 96, 32, 3}
			var ws []backend.Matrix
			var refs [][]float64
			total := 0
			for _, R := range rows {
				w, ref := upload(b, rng, 1, R, C, 4)
				ws, refs = append(ws, w), append(refs, ref)
				total += R
			}
			x := randoms(rng, C, 1)
			o := &backend.QLinearGroup{X: floats(b, x), W: ws, Y: floats(b, nans(total+5)), Rows: 1}
			return o, func(t *testing.T) {
				got := read(t, b, o.Y)
				at := 0
				for i, R := range rows {
					withinBar(t, fmt.Sprintf("QLinearGroup matrix %d", i), got[at:at+R], backendtest.Linear(refs[i], R, C, x, 1),
						backendtest.Tolerances["QLinearGroup"][backend.F32])
					at += R
				}
				for i, v := range got[at:] {
					if !math.IsNaN(float64(v)) {
						t.Fatalf("element %d past the %d written is %v", at+i, at, v)
					}
				}
			}
		}},
		{name: "Route", kernels: []string{"route"}, build: func(b *Backend, rng *rand.Rand) (backend.Op, func(*testing.T)) {
			const E, C, K = 64, 256, 8
			w, ref := upload(b, rng, 1, E, C, 8)
			x := randoms(rng, C, 1)
			o := &backend.Route{X: floats(b, x), Router: w, Idx: ints(b, make([]int32, K)), Weights: floats(b, nans(K)), Rows: 1, TopK: K, Normalize: true}
			return o, func(t *testing.T) {
				idx, wts := backendtest.Route(ref, E, C, x, 1, K, true)
				if got := readInts(t, b, o.Idx); !slices.Equal(got, idx) {
					t.Errorf("experts %v, want %v", got, idx)
				}
				within(t, "Route", read(t, b, o.Weights), wts)
			}
		}},
		{name: "Experts", kernels: []string{"moe_gate_up", "moe_down"}, build: func(b *Backend, rng *rand.Rand) (backend.Op, func(*testing.T)) {
			const E, H, I, K = 16, 256, 128, 8
			gate, gRef := upload(b, rng, E, I, H, 4)
			up, uRef := upload(b, rng, E, I, H, 4)
			down, dRef := upload(b, rng, E, H, I, 4)
			sg, sgRef := upload(b, rng, 1, I, H, 4)
			su, suRef := upload(b, rng, 1, I, H, 4)
			sd, sdRef := upload(b, rng, 1, H, I, 4)
			seg, segRef := upload(b, rng, 1, 1, H, 8)
			x, wts := randoms(rng, H, 1), randoms(rng, K, 1)
			var idx []int32
			for _, e := range rng.Perm(E)[:K] {
				idx = append(idx, int32(e))
			}
			o := &backend.Experts{X: floats(b, x), Idx: ints(b, idx), Weights: floats(b, wts), Gate: gate, Up: up, Down: down,
				SharedGate: sg, SharedUp: su, SharedDown: sd, SharedExpertGate: seg, Out: floats(b, nans(H)),
				Rows: 1, TopK: K, Inter: I, SharedInter: I}
			return o, func(t *testing.T) {
				want := make([]float64, H)
				for k, e := range idx {
					y := backendtest.SwiGLU(gRef[int(e)*I*H:][:I*H], uRef[int(e)*I*H:][:I*H], dRef[int(e)*H*I:][:H*I], I, H, x)
					for i, v := range y {
						want[i] += float64(wts[k]) * v
					}
				}
				s := 1 / (1 + math.Exp(-backendtest.Linear(segRef, 1, H, x, 1)[0]))
				for i, v := range backendtest.SwiGLU(sgRef, suRef, sdRef, I, H, x) {
					want[i] += s * v
				}
				within(t, "Experts", read(t, b, o.Out), want)
			}
		}},
	}
	cases = append(cases, fusedCase{name: "Gated DeltaNet step", kernels: []string{gdnKernel},
		chain: func(b *Backend, rng *rand.Rand) ([]backend.Op, func(*testing.T)) {
			const Hk, Hv, D, K = 2, 4, 128, 4
			C, VW := (2*Hk+Hv)*D, Hv*D
			x, z := randoms(rng, C, 1), randoms(rng, VW, 2)
			convW, convState := randoms(rng, C*K, 0.5), randoms(rng, (K-1)*C, 1)
			bb, aa, dt, state := randoms(rng, Hv, 2), randoms(rng, Hv, 2), randoms(rng, Hv, 0.5), randoms(rng, Hv*D*D, 0.1)
			aLog := randoms(rng, Hv, 1)
			for i := range aLog {
				aLog[i] += 1.5
			}
			normW := randoms(rng, D, 1)
			conv, core := floats(b, nans(C)), floats(b, nans(VW))
			cs, st := floats(b, convState), floats(b, state)
			out := floats(b, nans(VW))
			ops := []backend.Op{
				&backend.ConvSiLU{X: floats(b, x), State: cs, Weight: floats(b, convW), Out: conv, Rows: 1, Chans: C, K: K},
				&backend.DeltaRule{QKV: conv, B: floats(b, bb), A: floats(b, aa), ALog: floats(b, aLog), DtBias: floats(b, dt),
					State: st, Out: core, Rows: 1, KeyHeads: Hk, KeyDim: D, ValueHeads: Hv, ValueDim: D},
				&backend.GatedRMSNorm{X: core, Z: floats(b, z), Weight: floats(b, normW), Out: out, Rows: 1, Heads: Hv, Dim: D, Eps: 1e-6},
			}
			return ops, func(t *testing.T) {
				c64 := backendtest.ConvSiLU(x, convState, convW, 1, C, K)
				c32 := make([]float32, C)
				for i, v := range c64 {
					c32[i] = float32(v)
				}
				r64 := backendtest.DeltaRule(c32, bb, aa, aLog, dt, state, 1, Hk, D, Hv, D)
				r32 := make([]float32, VW)
				for i, v := range r64 {
					r32[i] = float32(v)
				}
				within(t, "DeltaRule", read(t, b, out), backendtest.GatedRMSNorm(r32, z, normW, 1, Hv, D, 1e-6))
				within(t, "DeltaRule", read(t, b, st), widen64(state))
				withinBar(t, "conv state", read(t, b, cs), widen64(convState), 0)
			}
		}})
	for _, kv := range []backend.DType{backend.F32, backend.BF16} {
		cases = append(cases,
			fusedCase{name: "QKPrep " + kv.String(), kernels: qkPrepKernels(kv), build: func(b *Backend, rng *rand.Rand) (backend.Op, func(*testing.T)) {
				const QH, KVH, D, rot, pos = 16, 2, 256, 64, 1000
				kvW := KVH * D
				qg, k, v := randoms(rng, QH*2*D, 2), randoms(rng, kvW, 2), randoms(rng, kvW, 1)
				qn, kn := randoms(rng, D, 1), randoms(rng, D, 1)
				kc, vc := nans((pos+3)*kvW), nans((pos+3)*kvW)
				o := &backend.QKPrep{QG: floats(b, qg), K: floats(b, k), V: floats(b, v), QNorm: floats(b, qn), KNorm: floats(b, kn),
					Q: floats(b, nans(QH*D)), KCache: typed(b, kv, kc), VCache: typed(b, kv, vc), Pos: ints(b, []int32{pos}), Rows: 1,
					QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e7, Eps: 1e-6}
				return o, func(t *testing.T) {
					q, keys := backendtest.QKPrep(qg, k, v, qn, kn, kc, vc, pos, 1, QH, KVH, D, rot, 1e7, 1e-6)
					within(t, "QKPrep", read(t, b, o.Q), q)
					gotK, gotV := read(t, b, o.KCache), read(t, b, o.VCache)
					bar := 2e-6
					if kv == backend.BF16 {
						bar = 1e-2 // one bf16 rounding of each element, up to 2^-9 of it
					}
					withinBar(t, "QKPrep keys", gotK[pos*kvW:(pos+1)*kvW], keys, bar)
					withinBar(t, "QKPrep values", gotV[pos*kvW:(pos+1)*kvW], widen64(v), bar)
					if !math.IsNaN(float64(gotK[(pos+1)*kvW])) || !math.IsNaN(float64(gotK[pos*kvW-1])) {
						t.Error("QKPrep wrote past its cache row")
					}
				}
			}},
			fusedCase{name: "Attention " + kv.String(), kernels: []string{"attn_split+attn_combine"}, build: func(b *Backend, rng *rand.Rand) (backend.Op, func(*testing.T)) {
				const QH, KVH, D, pos = 16, 2, 256, 1000
				kvW, n := KVH*D, pos+1
				q, qg := randoms(rng, QH*D, 1), randoms(rng, QH*2*D, 2)
				kc, vc := append(randoms(rng, n*kvW, 3), nans(3*kvW)...), append(randoms(rng, n*kvW, 1), nans(3*kvW)...)
				for i := range kc {
					kc[i], vc[i] = backend.Round(kv, kc[i]), backend.Round(kv, vc[i])
				}
				o := &backend.Attention{Q: floats(b, q), QG: floats(b, qg), KCache: typed(b, kv, kc), VCache: typed(b, kv, vc),
					Out: floats(b, nans(QH*D)), Pos: ints(b, []int32{pos}), Rows: 1, QHeads: QH, KVHeads: KVH, HeadDim: D}
				return o, func(t *testing.T) {
					if kv == backend.F32 && b.o.Fused && b.KVShadowed() {
						// the decode kernels read the caches' bf16 shadows: the
						// reference over the caches rounded, to the bf16 bar
						withinBar(t, "Attention", read(t, b, o.Out), backendtest.Attention(q, qg, roundBF16(kc), roundBF16(vc), pos, 1, QH, KVH, D),
							backendtest.Tolerances["Attention"][backend.BF16])
						return
					}
					within(t, "Attention", read(t, b, o.Out), backendtest.Attention(q, qg, kc, vc, pos, 1, QH, KVH, D))
				}
			}})
	}
	return cases
}

// qkPrepKernels is what a decoded token's QKPrep runs under the defaults:
// over an f32 cache with its bf16 shadow (kvshadow=on) the kernel that
// writes both.
func qkPrepKernels(kv backend.DType) []string {
	if kv == backend.F32 && DefaultOptions().KVShadow {
		return []string{"qk_prep_f32_shadow"}
	}
	return []string{"qk_prep"}
}

func upload(b *Backend, rng *rand.Rand, experts, rows, cols, bits int) (backend.Matrix, []float64) {
	m := quant.RandomMatrix(rng, experts, rows, cols, bits, 64)
	w, err := b.Upload(m)
	if err != nil {
		panic(err)
	}
	return w, backendtest.Dequantize(&m)
}

func randoms(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (rng.Float32()*2 - 1) * scale
	}
	return v
}

func nans(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

func floats(b *Backend, x []float32) backend.Buffer { return typed(b, backend.F32, x) }

func typed(b *Backend, t backend.DType, x []float32) backend.Buffer {
	buf, err := backend.AllocFloats(b, t, x)
	if err != nil {
		panic(err)
	}
	return buf
}

func ints(b *Backend, x []int32) backend.Buffer {
	buf, err := backend.AllocInts(b, x)
	if err != nil {
		panic(err)
	}
	return buf
}

func read(t *testing.T, b *Backend, buf backend.Buffer) []float32 {
	t.Helper()
	v := make([]float32, buf.Len)
	if err := b.Read(buf, v); err != nil {
		t.Fatal(err)
	}
	return v
}

func readInts(t *testing.T, b *Backend, buf backend.Buffer) []int32 {
	t.Helper()
	v := make([]int32, buf.Len)
	if err := b.ReadInts(buf, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// within checks got against want under the conformance suite's float32
// bar for op.
func within(t *testing.T, op string, got []float32, want []float64) {
	t.Helper()
	bar, ok := backendtest.Tolerances[op][backend.F32]
	if !ok {
		t.Fatalf("no float32 tolerance for %q", op)
	}
	withinBar(t, op, got, want, bar)
}

// rmsOf is the root mean square of v.
func rmsOf(v []float64) float64 {
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	return math.Sqrt(ss / float64(len(v)))
}

// withinBar: the largest |got - want| over the RMS of want is at most bar,
// and nothing is NaN.
func withinBar(t *testing.T, what string, got []float32, want []float64, bar float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var worst float64
	rms := rmsOf(want)
	for i, g := range got {
		if g != g {
			t.Fatalf("%s: element %d is NaN (unwritten?), want %g", what, i, want[i])
		}
		worst = max(worst, math.Abs(float64(g)-want[i]))
	}
	t.Logf("%s: error %.3g of the RMS %.3g", what, worst/rms, rms)
	if worst/rms > bar {
		t.Errorf("%s: error %.3g of the RMS, bar %g", what, worst/rms, bar)
	}
}

// TestGraphOutlivesBackend: a program is captured on its second run, and
// one whose graph is released after its
// backend was closed (a cleanup run by the collector, as when bench opens
// a second backend for an ablation) does nothing and fails nothing, and a
// backend opened after it works.
func TestGraphOutlivesBackend(t *testing.T) {
	gpu(t)
	b, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	pos, err := backend.AllocInts(b, []int32{5})
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Compile([]backend.Op{&backend.Advance{Pos: pos, By: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	if p.(*program).exec != nil {
		t.Fatal("the program was captured before its second run")
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	exec := p.(*program).exec
	if exec == nil {
		t.Fatal("the program has no graph after its second run with graphs=on")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Close(); err != nil {
		t.Errorf("releasing a graph after its backend's Close: %v", err)
	}
	if err := p.Run(); err == nil {
		t.Error("a program of a closed backend ran")
	}
	b2 := testBackend(t, DefaultOptions())
	pos2 := ints(b2, []int32{7})
	p2, err := b2.Compile([]backend.Op{&backend.Advance{Pos: pos2, By: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 1)
	if err := b2.ReadInts(pos2, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 10 {
		t.Errorf("position %d after Advance by 3 from 7, want 10", got[0])
	}
}

// TestConvRowsMatchKernel: the launcher's rows per block of conv_silu are
// ops.cu's CONV_ROWS, at least the widest conv's K-1 (15).
// TestSamplePartsMatchKernel: the launcher gives sample_prep as many blocks,
// and reserves as many parts and fast-path keys, as sample_row reads.
func TestSamplePartsMatchKernel(t *testing.T) {
	src, err := os.ReadFile("kernels/sample.cu")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define SAMPLE_PARTS (\d+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("sample.cu does not define SAMPLE_PARTS")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != sampleParts {
		t.Errorf("sample.cu has SAMPLE_PARTS %d, the launcher %d", n, sampleParts)
	}
	m = regexp.MustCompile(`(?m)^#define SAMPLE_FAST_K (\d+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("sample.cu does not define SAMPLE_FAST_K")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != sampleFastK {
		t.Errorf("sample.cu has SAMPLE_FAST_K %d, the launcher %d", n, sampleFastK)
	}
}

// TestFamilyKernelsInPTX: every kernel familyKernels names for a family
// is an entry point of that family's PTX, so that an option loading the
// family finds it (a family's kernel missing from the table leaves its
// option without effect, which only a GPU run would show).
func TestFamilyKernelsInPTX(t *testing.T) {
	for fam, names := range familyKernels {
		ptx, err := kernels.PTX(fam)
		if err != nil {
			t.Fatal(err)
		}
		for name := range names {
			if !strings.Contains(string(ptx), ".visible .entry "+name+"(") {
				t.Errorf("no entry point %s in %s's PTX", name, fam)
			}
		}
	}
	for fam, want := range map[string]string{"norm_comb": normCombKernel} {
		if _, ok := familyKernels[fam][want]; !ok {
			t.Errorf("familyKernels has no %s for %s", want, fam)
		}
	}
}

func TestConvRowsMatchKernel(t *testing.T) {
	src, err := os.ReadFile("kernels/ops.cu")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define CONV_ROWS (\d+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("ops.cu does not define CONV_ROWS")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != convRows || n < 15 {
		t.Errorf("ops.cu has CONV_ROWS %d, the launcher %d (and at least 15 are needed)", n, convRows)
	}
}

// TestPlainGEMMTiles: QLinear of several rows under gemm=plain takes
// qgemm's 64 × 64 tiles where those make two blocks per multiprocessor
// and qgemm_s's 32 × 32 below that (the router's shape), each matching
// the float64 reference within QLinear's bar, outputs poisoned first.
func TestPlainGEMMTiles(t *testing.T) {
	o := DefaultOptions()
	o.TensorCores = false
	b := testBackend(t, o)
	sms := b.ctx.Device().SMs
	for _, c := range []struct {
		R, C, rows int
		kernel     string
		bits       int
	}{
		{256, 192, 512, "qgemm_s", 8},        // the router's 256 logits of a chunk
		{1, 128, 77, "qgemm_rows", 8},        // the shared expert's gate
		{1, 2048, 512, "qgemm_rows", 8},      // at the 35B model's width, a chunk of 512
		{3, 192, 65, "qgemm_rows", 4},        // a few rows
		{9, 128, 40, "qgemm_s", 4},           // one row too many for qgemm_rows
		{64 * sms, 128, 100, "qgemm", 4},     // 2·SMs blocks of 64 × 64
		{64*sms - 64, 128, 65, "qgemm_s", 4}, // just under
	} {
		t.Run(fmt.Sprintf("%dx%d %d rows", c.R, c.C, c.rows), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.R), uint64(c.rows)))
			w, ref := upload(b, rng, 1, c.R, c.C, c.bits)
			x := randoms(rng, c.rows*c.C, 1)
			y := floats(b, nans(c.rows*c.R))
			p, err := b.Compile([]backend.Op{&backend.QLinear{X: floats(b, x), W: w, Y: y, Rows: c.rows}})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.(*program).kernelNames()[0]; !slices.Equal(got, []string{c.kernel}) {
				t.Errorf("kernels %v, want %s", got, c.kernel)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			withinBar(t, "y", read(t, b, y), backendtest.Linear(ref, c.R, c.C, x, c.rows), backendtest.Tolerances["QLinear"][backend.F32])
		})
	}
}

// TestNormRouteMatchesApart: an AddRMSNorm of one row followed by the
// Route that reads it runs as one route_norm launch under norms=fused,
// and leaves h, the normed row, the expert ids and their weights bit for
// bit as norms=apart does (add_rmsnorm, then route), with and without a
// delta, for 4- and 8-bit routers, on replays of the captured graph too;
// the ids and weights also match the float64 reference over the normed
// row.
func TestNormRouteMatchesApart(t *testing.T) {
	fo := DefaultOptions()
	fo.FusedNorms = true
	fused := testBackend(t, fo)
	o := DefaultOptions()
	o.FusedNorms = false
	apart := testBackend(t, o)
	const E, C, K = 256, 2048, 8
	for _, bits := range []int{8, 4} {
		for _, withDelta := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d-bit delta=%v", bits, withDelta), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(bits), map[bool]uint64{true: 1, false: 2}[withDelta]))
				m := quant.RandomMatrix(rng, 1, E, C, bits, 64)
				h, delta, w := randoms(rng, C, 2), randoms(rng, C, 1), randoms(rng, C, 1)
				type result struct {
					h, a, wts []float32
					ids       []int32
					kernels   []string
				}
				run := func(b *Backend) result {
					router, err := b.Upload(m)
					if err != nil {
						t.Fatal(err)
					}
					n := &backend.AddRMSNorm{H: floats(b, h), Weight: floats(b, w), Out: floats(b, nans(C)), Rows: 1, Dim: C, Eps: 1e-6}
					if withDelta {
						n.Delta = floats(b, delta)
					}
					r := &backend.Route{X: n.Out, Router: router, Idx: ints(b, make([]int32, K)), Weights: floats(b, nans(K)), Rows: 1, TopK: K, Normalize: true}
					p, err := b.Compile([]backend.Op{n, r})
					if err != nil {
						t.Fatal(err)
					}
					runWith(t, b, p, 3, map[backend.Buffer][]float32{n.H: h}) // the second and third runs replay the captured graph
					names := p.(*program).kernelNames()
					return result{read(t, b, n.H), read(t, b, n.Out), read(t, b, r.Weights), readInts(t, b, r.Idx), append(names[0], names[1]...)}
				}
				f, a := run(fused), run(apart)
				if !slices.Equal(f.kernels, []string{normRouteKernel}) || slices.Contains(a.kernels, normRouteKernel) {
					t.Errorf("kernels %v fused, %v apart", f.kernels, a.kernels)
				}
				sameBits(t, "h", f.h, a.h)
				sameBits(t, "the normed row", f.a, a.a)
				sameBits(t, "the weights", f.wts, a.wts)
				if !slices.Equal(f.ids, a.ids) {
					t.Errorf("experts %v fused, %v apart", f.ids, a.ids)
				}
				ids, wts := backendtest.Route(backendtest.Dequantize(&m), E, C, f.a, 1, K, true)
				if !slices.Equal(f.ids, ids) {
					t.Errorf("experts %v, the reference's %v", f.ids, ids)
				}
				within(t, "Route", f.wts, wts)
			})
		}
	}
}

// TestNormGroupMatchesApart: an AddRMSNorm of one row followed by the
// QLinearGroup that reads it runs as one qmv_group_norm launch under
// norms=fused, and leaves h, the normed row and every projection bit for bit
// as norms=apart does (add_rmsnorm, then qmv_group), with and without a
// delta, on replays too; the projections also match the float64
// reference over the normed row.
func TestNormGroupMatchesApart(t *testing.T) {
	fo := DefaultOptions()
	fo.FusedNorms = true
	fused := testBackend(t, fo)
	o := DefaultOptions()
	o.FusedNorms = false
	apart := testBackend(t, o)
	const C = 2048
	rows := []int{1024, 301, 32, 3}
	for _, withDelta := range []bool{true, false} {
		t.Run(fmt.Sprintf("delta=%v", withDelta), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, map[bool]uint64{true: 1, false: 2}[withDelta]))
			var ms []quant.Matrix
			total := 0
			for _, R := range rows {
				ms = append(ms, quant.RandomMatrix(rng, 1, R, C, 4, 64))
				total += R
			}
			h, delta, w := randoms(rng, C, 2), randoms(rng, C, 1), randoms(rng, C, 1)
			type result struct {
				h, a, y []float32
				kernels []string
			}
			run := func(b *Backend) result {
				var ws []backend.Matrix
				for _, m := range ms {
					u, err := b.Upload(m)
					if err != nil {
						t.Fatal(err)
					}
					ws = append(ws, u)
				}
				n := &backend.AddRMSNorm{H: floats(b, h), Weight: floats(b, w), Out: floats(b, nans(C)), Rows: 1, Dim: C, Eps: 1e-6}
				if withDelta {
					n.Delta = floats(b, delta)
				}
				g := &backend.QLinearGroup{X: n.Out, W: ws, Y: floats(b, nans(total)), Rows: 1}
				p, err := b.Compile([]backend.Op{n, g})
				if err != nil {
					t.Fatal(err)
				}
				runWith(t, b, p, 3, map[backend.Buffer][]float32{n.H: h}) // the second and third runs replay the captured graph
				names := p.(*program).kernelNames()
				return result{read(t, b, n.H), read(t, b, n.Out), read(t, b, g.Y), append(names[0], names[1]...)}
			}
			f, a := run(fused), run(apart)
			if !slices.Equal(f.kernels, []string{normGroupKernel}) || slices.Contains(a.kernels, normGroupKernel) {
				t.Errorf("kernels %v fused, %v apart", f.kernels, a.kernels)
			}
			sameBits(t, "h", f.h, a.h)
			sameBits(t, "the normed row", f.a, a.a)
			sameBits(t, "the projections", f.y, a.y)
			at := 0
			for j, R := range rows {
				withinBar(t, fmt.Sprintf("matrix %d", j), f.y[at:at+R], backendtest.Linear(backendtest.Dequantize(&ms[j]), R, C, f.a, 1),
					backendtest.Tolerances["QLinearGroup"][backend.F32])
				at += R
			}
		})
	}
}

// runWith runs p times times on b, writing each of inputs' buffers its
// values before each run (ops that update a buffer in place, a poisoned
// output), and waits for each run.
func runWith(t *testing.T, b *Backend, p backend.Program, times int, inputs map[backend.Buffer][]float32) {
	t.Helper()
	for range times {
		for buf, v := range inputs {
			if err := b.Write(buf, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// sameBits fails t where fused and apart differ in any bit (the first
// element that does).
func sameBits(t *testing.T, what string, fused, apart []float32) {
	t.Helper()
	if len(fused) != len(apart) {
		t.Errorf("%s: %d values fused, %d apart", what, len(fused), len(apart))
		return
	}
	for i := range fused {
		if math.Float32bits(fused[i]) != math.Float32bits(apart[i]) {
			t.Errorf("%s[%d]: %v fused, %v apart", what, i, fused[i], apart[i])
			return
		}
	}
}

// TestRouterTensorCoresMatchReference: under router=f64 the Route of
// several tokens computes its logits with qgemm_f64 (and, forced, with
// qgemm_f64_w), under router=i8 with qgemm_i8, then route_select; its
// expert ids are the float64 reference's, and its weights are at least as close to the reference's as router=plain's (the
// float32 kernels, run on the same data) and within the kernel's bar, for
// 8- and 4-bit routers at the 35B and tiny widths, rows off the tiles.
func TestRouterTensorCoresMatchReference(t *testing.T) {
	backends := map[RouterKernel]*Backend{}
	for _, k := range []RouterKernel{RouterF64, RouterPlain, RouterI8} {
		o := DefaultOptions()
		o.Router = k
		backends[k] = testBackend(t, o)
	}
	const K = 8
	// the 35B model's router, the tiny model's, one off the 32-row tiles
	for _, sh := range []struct{ E, C int }{{256, 2048}, {32, 256}, {40, 320}} {
		for _, bits := range []int{8, 4} {
			for _, rows := range []int{7, 100, 512, 2100} { // qgemm_f64's columns split 16, 16, 4 ways and not at all at the 35B shape; 2 ways (unevenly for 5 groups) at the small ones
				E, C := sh.E, sh.C
				t.Run(fmt.Sprintf("%dx%d %d-bit %d rows", E, C, bits, rows), func(t *testing.T) {
					m := quant.RandomMatrix(rand.New(rand.NewPCG(uint64(bits), uint64(rows))), 1, E, C, bits, 64)
					x := randoms(rand.New(rand.NewPCG(uint64(rows), uint64(bits))), rows*C, 1)
					ids, wts := backendtest.Route(backendtest.Dequantize(&m), E, C, x, rows, K, true)
					route := func(b *Backend, kernel string) ([]int32, []float32) { return runRoute(t, b, m, x, rows, K, kernel) }
					plainKernel, _ := backends[RouterPlain].qgemmShape(E, rows)
					_, plainW := route(backends[RouterPlain], plainKernel)
					// qgemm_f64, then the 64 x 64 kernels (their blocks forced)
					for _, kernel := range append([]string{"qgemm_f64"}, routerWideKernels...) {
						gotIDs, got := func() ([]int32, []float32) {
							defer func(f func(int, int) bool, k string) { routerWide, routerWideKernel = f, k }(routerWide, routerWideKernel)
							routerWide = func(int, int) bool { return kernel != "qgemm_f64" }
							if kernel != "qgemm_f64" {
								routerWideKernel = kernel
							}
							return route(backends[RouterF64], kernel)
						}()
						if !slices.Equal(gotIDs, ids) {
							t.Errorf("%s: experts differ from the reference's", kernel)
						}
						e, ep := relErr(got, wts), relErr(plainW, wts)
						t.Logf("weights: error %.3g of the RMS under %s, %.3g under router=plain", e, kernel, ep)
						if e > max(ep, routerF64Bar) {
							t.Errorf("%s: error %.3g of the RMS, above router=plain's %.3g and the bar %g", kernel, e, ep, routerF64Bar)
						}
					}
					// router=i8: qgemm_i8, as exact
					for _, c := range []struct {
						k     RouterKernel
						first string
					}{{RouterI8, "qgemm_i8"}} {
						gotIDs, got := route(backends[c.k], c.first)
						if !slices.Equal(gotIDs, ids) {
							t.Errorf("%s: experts differ from the reference's", c.first)
						}
						e, ep := relErr(got, wts), relErr(plainW, wts)
						t.Logf("weights: error %.3g of the RMS under %s, %.3g under router=plain", e, c.first, ep)
						if e > max(ep, routerF64Bar) {
							t.Errorf("%s: error %.3g of the RMS, above router=plain's %.3g and the bar %g", c.first, e, ep, routerF64Bar)
						}
					}
				})
			}
		}
	}
}

// routerBackends are a backend of the defaults under each router of ks.
func routerBackends(t *testing.T, ks ...RouterKernel) map[RouterKernel]*Backend {
	t.Helper()
	backends := map[RouterKernel]*Backend{}
	for _, k := range ks {
		o := DefaultOptions()
		o.Router = k
		backends[k] = testBackend(t, o)
	}
	return backends
}

// integerRouters are qgemm_i8's shapes in router='s order, qgemm_i8's own
// first.
func integerRouters() []RouterKernel {
	var ks []RouterKernel
	for _, v := range routerValues {
		if v.k.integer() {
			ks = append(ks, v.k)
		}
	}
	return ks
}

// runRoute runs the Route of rows of x by the router m, top-k normalised,
// on b, its weights poisoned first, and returns its expert ids and
// weights; the program's first kernel must be kernel.
func runRoute(t *testing.T, b *Backend, m quant.Matrix, x []float32, rows, k int, kernel string) ([]int32, []float32) {
	t.Helper()
	return runRouteNorm(t, b, m, x, rows, k, kernel, true)
}

// runRouteNorm is runRoute with the weights renormalised over the chosen
// or not.
func runRouteNorm(t *testing.T, b *Backend, m quant.Matrix, x []float32, rows, k int, kernel string, normalize bool) ([]int32, []float32) {
	t.Helper()
	w, err := b.Upload(m)
	if err != nil {
		t.Fatal(err)
	}
	r := &backend.Route{X: floats(b, x), Router: w, Idx: ints(b, make([]int32, rows*k)), Weights: floats(b, nans(rows*k)),
		Rows: rows, TopK: k, Normalize: normalize}
	p, err := b.Compile([]backend.Op{r})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*program).kernelNames()[0]; got[0] != kernel {
		t.Fatalf("kernels %v, want %s first", got, kernel)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	return readInts(t, b, r.Idx), read(t, b, r.Weights)
}

// TestRouterShapesMatchI8: router=i8w and i8wg (qgemm_i8 in route_i8w.cu's
// block shapes) choose the experts qgemm_i8 chooses and give
// the same weights bit for bit, so the same logits: for 8- and 4-bit
// routers at the 35B and small widths, rows off every tile, in one split
// of the columns and in as many as routerSplits makes at 8 blocks a
// multiprocessor, the weights poisoned first.
func TestRouterShapesMatchI8(t *testing.T) {
	defer func(f func(int) int) { routerBlocks = f }(routerBlocks)
	kernels := integerRouters() // qgemm_i8 first
	backends := routerBackends(t, kernels...)
	const K = 8
	for _, sh := range []struct{ E, C int }{{256, 2048}, {40, 320}} {
		for _, bits := range []int{8, 4} {
			for _, rows := range []int{7, 100, 555, 4096} {
				for _, per := range []int{0, 8} {
					E, C := sh.E, sh.C
					t.Run(fmt.Sprintf("%dx%d %d-bit %d rows %d blocks an SM", E, C, bits, rows, per), func(t *testing.T) {
						routerBlocks = func(sms int) int { return per * sms }
						rng := freshRNG(t)
						m := quant.RandomMatrix(rng, 1, E, C, bits, 64)
						x := randoms(rng, rows*C, 1)
						var ids [][]int32
						var wts [][]float32
						for _, k := range kernels {
							id, w := runRoute(t, backends[k], m, x, rows, K, qiShapes[k].kernel)
							ids, wts = append(ids, id), append(wts, w)
						}
						for i, k := range kernels[1:] {
							if !slices.Equal(ids[i+1], ids[0]) {
								t.Errorf("%s: experts differ from qgemm_i8's", qiShapes[k].kernel)
							}
							for j := range wts[0] {
								if math.Float32bits(wts[i+1][j]) != math.Float32bits(wts[0][j]) {
									t.Errorf("%s: weight %d %v, qgemm_i8's %v", qiShapes[k].kernel, j, wts[i+1][j], wts[0][j])
									break
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestRouterCertMatchesI8: router=cert (route_cert.cu) chooses the experts
// router=i8wg's qgemm_i8_wg2 and route_select choose, in the same order,
// with the weights within one float32 unit in the last place of theirs
// (the same bits but where a float64 rounding of its sum over the
// candidates, not over all experts, crosses a float32 one), through each
// of certShapes' approximate kernels: 8- and 4-bit routers at the 35B and
// small widths, rows off every tile, one split of the columns and as many
// as routerSplits makes at 8 blocks a multiprocessor; routers with rows in
// equal pairs (exact ties, to the lower id); tokens of zeros (every logit
// tied: every expert a candidate, over several batches of 32) and a token
// holding a NaN (its bounds not finite: every expert exact, route_select's
// weights bit for bit). The weights poisoned first.
func TestRouterCertMatchesI8(t *testing.T) {
	defer func(f func(int) int) { routerBlocks = f }(routerBlocks)
	defer func(sh qiShape) { certShape = sh }(certShape)
	backends := routerBackends(t, RouterI8WG, RouterCert)
	const K = 8
	for _, sh := range []struct{ E, C int }{{256, 2048}, {40, 320}} {
		for _, bits := range []int{8, 4} {
			for _, rows := range []int{7, 100, 555, 4096} {
				for _, per := range []int{0, 8} {
					for _, ties := range []bool{false, true} {
						E, C := sh.E, sh.C
						t.Run(fmt.Sprintf("%dx%d %d-bit %d rows %d blocks an SM ties %v", E, C, bits, rows, per, ties), func(t *testing.T) {
							routerBlocks = func(sms int) int { return per * sms }
							rng := freshRNG(t)
							m := quant.RandomMatrix(rng, 1, E, C, bits, 64)
							if ties {
								backendtest.PairRows(&m)
							}
							x := randoms(rng, rows*C, 1)
							clear(x[:C]) // token 0: zeros
							if rows > 3 {
								x[2*C+5] = float32(math.NaN()) // token 2: a NaN
							}
							wantIDs, wantW := runRoute(t, backends[RouterI8WG], m, x, rows, K, qiShapes[RouterI8WG].kernel)
							for _, cs := range certShapes {
								certShape = cs
								ids, w := runRoute(t, backends[RouterCert], m, x, rows, K, cs.kernel)
								certMatches(t, cs.kernel, ids, w, wantIDs, wantW, K, rows > 3)
							}
						})
					}
				}
			}
		}
	}
}

// TestRouterCertFallsBack: a Route router=cert does not take (weights not
// renormalised over the chosen, which need every exact logit) runs as
// router=i8wg's, qgemm_i8_wg2 and route_select, with its bits.
func TestRouterCertFallsBack(t *testing.T) {
	const E, C, K, rows = 256, 2048, 8, 100
	rng := freshRNG(t)
	m := quant.RandomMatrix(rng, 1, E, C, 8, 64)
	x := randoms(rng, rows*C, 1)
	var got [2][]float32
	var ids [2][]int32
	backends := routerBackends(t, RouterI8WG, RouterCert)
	for i, k := range []RouterKernel{RouterI8WG, RouterCert} {
		// runRouteNorm fails unless the first kernel is qgemm_i8_wg2's
		ids[i], got[i] = runRouteNorm(t, backends[k], m, x, rows, K, qiShapes[RouterI8WG].kernel, false)
	}
	if !slices.Equal(ids[0], ids[1]) {
		t.Fatal("router=cert's fallback: experts differ from router=i8wg's")
	}
	for j := range got[0] {
		if math.Float32bits(got[0][j]) != math.Float32bits(got[1][j]) {
			t.Fatalf("router=cert's fallback: weight %d %v, router=i8wg's %v", j, got[1][j], got[0][j])
		}
	}
}

// certMatches fails t unless router=cert's experts ids (through kernel)
// are router=i8wg's wantIDs and its weights w wantW's within a float32
// unit in the last place; with nanToken, token 2's (a NaN: every expert
// exact) bit for bit.
func certMatches(t *testing.T, kernel string, ids []int32, w []float32, wantIDs []int32, wantW []float32, K int, nanToken bool) {
	t.Helper()
	for i := range ids {
		if ids[i] != wantIDs[i] {
			t.Fatalf("%s: token %d: experts %v, router=i8wg's %v", kernel, i/K, ids[i/K*K:i/K*K+K], wantIDs[i/K*K:i/K*K+K])
		}
	}
	ulps := 0
	for i := range w {
		a, b := math.Float32bits(w[i]), math.Float32bits(wantW[i])
		nan := math.IsNaN(float64(w[i])) && math.IsNaN(float64(wantW[i]))
		switch {
		case a == b || nan:
		case a == b+1 || a+1 == b:
			ulps++
		default:
			t.Fatalf("%s: token %d: weight %d %v, router=i8wg's %v", kernel, i/K, i%K, w[i], wantW[i])
		}
		if i/K == 2 && nanToken && a != b && !nan {
			t.Fatalf("%s: token 2 (a NaN, every expert exact): weight %d %v, router=i8wg's %v", kernel, i%K, w[i], wantW[i])
		}
	}
	t.Logf("%s: %d of %d weights one unit in the last place off", kernel, ulps, len(w))
}

// TestMeasureRouterCert: the Route of several tokens at the 35B router's
// shape (8-bit, 256 x 2048, top-8, x uniform in ±1) under router=i8wg
// (qgemm_i8_wg2 and route_select) and router=cert (each of certShapes'
// kernels, then route_cert_select), the columns split as routerSplits
// makes them.
func TestMeasureRouterCert(t *testing.T) {
	benchOnly(t)
	defer func(sh qiShape) { certShape = sh }(certShape)
	const E, C, K = 256, 2048, 8
	rng := freshRNG(t)
	m := quant.RandomMatrix(rng, 1, E, C, 8, 64)
	type form struct {
		k  RouterKernel
		sh qiShape // router=cert's approximate kernel
	}
	runs := []form{{RouterI8WG, certShapes[0]}}
	for _, sh := range certShapes {
		runs = append(runs, form{RouterCert, sh})
	}
	for _, run := range runs {
		k := run.k
		certShape = run.sh
		o := DefaultOptions()
		o.Router = k
		b := testBackend(t, o)
		w, err := b.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, rows := range []int{64, 512, 1024, 4096, 16384} {
			r := &backend.Route{X: floats(b, randoms(rng, rows*C, 1)), Router: w, Idx: ints(b, make([]int32, rows*K)),
				Weights: floats(b, nans(rows*K)), Rows: rows, TopK: K, Normalize: true}
			p, err := b.Compile([]backend.Op{r})
			if err != nil {
				t.Fatal(err)
			}
			d := timeLaunches(t, b.ctx, b.s, 20, p.Run)
			name := map[RouterKernel]string{RouterI8WG: "i8wg", RouterCert: "cert"}[k]
			t.Logf("router %5d rows, %-5s %v: %7.1f µs", rows, name, p.(*program).kernelNames()[0], d.Seconds()*1e6)
		}
	}
}

// TestMeasureRouter: the Route of several tokens (qgemm_f64 or, 64 x 64
// blocks, qgemm_f64_w or qgemm_f64_h, and qgemm_i8 under router=i8, then
// route_select) at the 35B router's shape, its
// columns split as routerSplits would for a target of 0 (one split) to 16
// blocks a multiprocessor.
func TestMeasureRouter(t *testing.T) {
	benchOnly(t)
	o := DefaultOptions()
	o.Router = RouterF64 // the f64 kernels' lines (router=i8 is the default)
	b := testBackend(t, o)
	defer func(f func(int) int) { routerBlocks = f }(routerBlocks)
	const E, C, K = 256, 2048, 8
	rng := freshRNG(t)
	m := quant.RandomMatrix(rng, 1, E, C, 8, 64)
	w, err := b.Upload(m)
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func(int, int) bool, k string) { routerWide, routerWideKernel = f, k }(routerWide, routerWideKernel)
	type i8Backend struct {
		name string
		b    *Backend
		w    backend.Matrix
	}
	var i8s []i8Backend // qgemm_i8's shapes, in the order their launches come (ncu's --launch-skip)
	for _, k := range integerRouters() {
		bi := testBackend(t, func() Options { o := DefaultOptions(); o.Router = k; return o }())
		wi, err := bi.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		i8s = append(i8s, i8Backend{qiShapes[k].kernel, bi, wi})
	}
	for _, rows := range []int{16, 64, 512, 1024, 4096, 16384} {
		x := floats(b, randoms(rng, rows*C, 1))
		for _, ib := range i8s {
			bi := ib.b
			xi := floats(bi, randoms(rng, rows*C, 1))
			for _, per := range []int{0, 1, 2, 4, 8} {
				routerBlocks = func(sms int) int { return per * sms }
				r := &backend.Route{X: xi, Router: ib.w, Idx: ints(bi, make([]int32, rows*K)), Weights: floats(bi, nans(rows*K)), Rows: rows, TopK: K, Normalize: true}
				p, err := bi.Compile([]backend.Op{r})
				if err != nil {
					t.Fatal(err)
				}
				d := timeLaunches(t, bi.ctx, bi.s, 20, p.Run)
				sh := qiShapes[bi.o.Router]
				splits := routerSplits(sh.weight*ceil(E, sh.rows)*ceil(rows, sh.tokens), C/64, bi.ctx.Device().SMs)
				t.Logf("router %4d rows, %-12s %dx%d blocks, %2d blocks an SM: %2d splits, %7.1f µs", rows, ib.name, sh.tokens, sh.rows, per, splits, d.Seconds()*1e6)
			}
		}
		for _, kernel := range append([]string{"qgemm_f64"}, routerWideKernels...) {
			tile := 32
			if kernel != "qgemm_f64" {
				tile, routerWideKernel = 64, kernel
			}
			routerWide = func(int, int) bool { return tile == 64 }
			for _, per := range []int{0, 1, 2, 4, 8, 16} {
				routerBlocks = func(sms int) int { return per * sms }
				r := &backend.Route{X: x, Router: w, Idx: ints(b, make([]int32, rows*K)), Weights: floats(b, nans(rows*K)), Rows: rows, TopK: K, Normalize: true}
				p, err := b.Compile([]backend.Op{r})
				if err != nil {
					t.Fatal(err)
				}
				d := timeLaunches(t, b.ctx, b.s, 20, p.Run)
				weight := 1
				if tile == 64 {
					weight = routerWideWeight
				}
				splits := routerSplits(weight*ceil(E, tile)*ceil(rows, tile), C/64, b.ctx.Device().SMs)
				t.Logf("router %4d rows, %-12s %dx%d blocks, %2d blocks an SM: %2d splits, %7.1f µs", rows, kernel, tile, tile, per, splits, d.Seconds()*1e6)
			}
		}
	}
}

// routerF64Bar: qgemm_f64's logits are float64's, rounded once to float32;
// that rounding, which exp carries into the weights, is what is left: up to
// 3e-6 of the RMS for the 35B router at 512 rows on the H200 (router4), the
// same as the tf32 kernel it replaced, a bar that one met at 5e-6.
const routerF64Bar = 5e-6

// TestSampleFullVocabulary: the Sample op at the 35B model's vocabulary,
// where sample_prep's blocks each take a part of the row, chooses the
// reference's ids (near-ties excepted) and flags a NaN that only a late
// block sees; under sampler=topk a top-k of 1 to 64 chooses the
// reference's id always (the host's arithmetic, in its order).
func TestSampleFullVocabulary(t *testing.T) {
	for _, topk := range []bool{false, true} {
		o := DefaultOptions()
		o.SamplerTopK = topk
		t.Run(map[bool]string{false: "sampler=row", true: "sampler=topk"}[topk], func(t *testing.T) { sampleFullVocabulary(t, testBackend(t, o), topk) })
	}
}

func sampleFullVocabulary(t *testing.T, b *Backend, topk bool) {
	const V = 248320
	rng := freshRNG(t)
	cases := backendtest.SampleCases([]int{V}, func(n int) []float32 { return randoms(rng, n, 6) })
	far := randoms(rng, V, 6)
	far[V-17] = float32(math.NaN())
	cases = append(cases, backendtest.SampleCase{Name: "NaN far", Logits: far, Counts: make([]int32, V), InPrompt: make([]int32, V)})
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			V := len(c.Logits) // the cases of non-finite rows are short
			config := ints(b, []int32{c.S.TopK, int32(uint32(c.S.Seed)), int32(uint32(c.S.Seed >> 32)), 0})
			counts := ints(b, c.Counts)
			token, status := ints(b, []int32{-7}), ints(b, []int32{-7, -7})
			p, err := b.Compile([]backend.Op{&backend.Sample{Logits: floats(b, c.Logits),
				Params: floats(b, []float32{c.S.Temperature, c.S.TopP, c.S.MinP, c.S.Presence, c.S.Frequency, c.S.Repetition}),
				Config: config, Counts: counts, InPrompt: ints(b, c.InPrompt), Token: token, Status: status, Vocab: V}})
			if err != nil {
				t.Fatal(err)
			}
			wantCounts := slices.Clone(c.Counts)
			for draw := range 4 {
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				want := backendtest.Sample(c.Logits, wantCounts, c.InPrompt, c.S, sample.Uniform(c.S.Seed, uint64(draw)))
				got, st := readInts(t, b, token)[0], readInts(t, b, status)
				if st[0] != got || st[1] != map[bool]int32{true: 0, false: 1}[want.Finite] {
					t.Fatalf("draw %d: status %v for token %d, want the id and non-finite flag %v", draw, st, got, !want.Finite)
				}
				if got != want.ID && want.Margin > 1e-5 {
					t.Fatalf("draw %d: chose %d, the reference %d (margin %.3g: not a near-tie)", draw, got, want.ID, want.Margin)
				}
				if fast := topk && want.Finite && c.S.Temperature > 0 && c.S.TopK > 0 && c.S.TopK <= sampleFastK && int(c.S.TopK) < V; fast && got != want.ID {
					t.Fatalf("draw %d: the top-k fast path chose %d, the reference %d", draw, got, want.ID)
				}
				wantCounts[got]++
			}
			if !slices.Equal(readInts(t, b, counts), wantCounts) {
				t.Errorf("counts after 4 draws differ from the chosen ids'")
			}
		})
	}
}

// TestMoELayerMatchesApart: the post-attention AddRMSNorm, the Route and
// the Experts of one token run as one moe_layer launch under
// moelayer=one, and leave h, the normed row, the expert ids, their
// weights and the MoE's output bit for bit as moelayer=three does
// (route_norm, moe_gate_up, moe_down), with and without a delta, for 8-bit
// routers (a 4-bit one takes the three kernels under either), at the 35B
// shape and a small one, over several
// launches of the captured graph (the grid barrier's state carries from
// one to the next); the output also matches the float64 reference over
// the normed row and the chosen experts.
func TestMoELayerMatchesApart(t *testing.T) {
	o := DefaultOptions()
	o.MoELayer = true
	one := testBackend(t, o)
	o.MoELayer = false
	three := testBackend(t, o)
	type shape struct{ E, H, I int }
	for _, sh := range []shape{{256, 2048, 512}, {16, 256, 128}} {
		for _, bits := range []int{8, 4} {
			for _, withDelta := range []bool{true, false} {
				name := fmt.Sprintf("E=%d H=%d I=%d %d-bit delta=%v", sh.E, sh.H, sh.I, bits, withDelta)
				t.Run(name, func(t *testing.T) {
					E, H, I, K := sh.E, sh.H, sh.I, MoETopK
					rng := freshRNG(t)
					ms := randomMoEMatrices(rng, E, H, I, bits)
					h, delta, w := randoms(rng, H, 2), randoms(rng, H, 1), randoms(rng, H, 1)
					if !withDelta {
						delta = nil
					}
					type result struct {
						h, a, wts, out []float32
						ids            []int32
						kernels        []string
					}
					run := func(b *Backend) result {
						n, r, e := newMoEBlock(t, b, ms, I, h, delta, w)
						p, err := b.Compile([]backend.Op{n, r, e})
						if err != nil {
							t.Fatal(err)
						}
						// the second and third runs replay the captured graph
						runWith(t, b, p, 3, map[backend.Buffer][]float32{n.H: h, e.Out: nans(H)})
						names := p.(*program).kernelNames()
						return result{read(t, b, n.H), read(t, b, n.Out), read(t, b, r.Weights), read(t, b, e.Out), readInts(t, b, r.Idx),
							slices.Concat(names...)}
					}
					f, a := run(one), run(three)
					// moe_layer is built for 8-bit routers, the family's; a
					// 4-bit one takes the three kernels under moelayer=one too
					if slices.Equal(f.kernels, []string{moeLayerKernel}) != (bits == 8) || slices.Contains(a.kernels, moeLayerKernel) {
						t.Fatalf("kernels %v under moelayer=one, %v under three", f.kernels, a.kernels)
					}
					sameBits(t, "h", f.h, a.h)
					sameBits(t, "the normed row", f.a, a.a)
					sameBits(t, "the weights", f.wts, a.wts)
					if !slices.Equal(f.ids, a.ids) {
						t.Errorf("experts %v under moelayer=one, %v under three", f.ids, a.ids)
					}
					sameBits(t, "the output", f.out, a.out)

					ids, _ := backendtest.Route(backendtest.Dequantize(&ms[0]), E, H, f.a, 1, K, true)
					if !slices.Equal(f.ids, ids) {
						t.Errorf("experts %v, the reference's %v", f.ids, ids)
					}
					g, up, d := backendtest.Dequantize(&ms[1]), backendtest.Dequantize(&ms[2]), backendtest.Dequantize(&ms[3])
					want := make([]float64, H)
					for k, id := range f.ids {
						y := backendtest.SwiGLU(g[int(id)*I*H:][:I*H], up[int(id)*I*H:][:I*H], d[int(id)*H*I:][:H*I], I, H, f.a)
						for i, v := range y {
							want[i] += float64(f.wts[k]) * v
						}
					}
					s := 1 / (1 + math.Exp(-backendtest.Linear(backendtest.Dequantize(&ms[7]), 1, H, f.a, 1)[0]))
					for i, v := range backendtest.SwiGLU(backendtest.Dequantize(&ms[4]), backendtest.Dequantize(&ms[5]), backendtest.Dequantize(&ms[6]), I, H, f.a) {
						want[i] += s * v
					}
					within(t, "Experts", f.out, want)
				})
			}
		}
	}
}

// randomMoEMatrices are a decoded token's MoE block's matrices: the
// router (of routerBits), the routed experts' gate, up and down stacks, the
// shared expert's gate, up and down, and its 8-bit gate row.
func randomMoEMatrices(rng *rand.Rand, E, H, I, routerBits int) []quant.Matrix {
	return []quant.Matrix{
		quant.RandomMatrix(rng, 1, E, H, routerBits, 64),
		quant.RandomMatrix(rng, E, I, H, 4, 64), quant.RandomMatrix(rng, E, I, H, 4, 64), quant.RandomMatrix(rng, E, H, I, 4, 64),
		quant.RandomMatrix(rng, 1, I, H, 4, 64), quant.RandomMatrix(rng, 1, I, H, 4, 64), quant.RandomMatrix(rng, 1, H, I, 4, 64),
		quant.RandomMatrix(rng, 1, 1, H, 8, 64),
	}
}

// newMoEBlock uploads ms (randomMoEMatrices' order) to b and gives the ops
// of the MoE block of one token over them: the AddRMSNorm of h and delta
// (none where nil) by w, the Route of its output to the top-8 experts and
// the Experts, outputs poisoned.
func newMoEBlock(t *testing.T, b *Backend, ms []quant.Matrix, I int, h, delta, w []float32) (*backend.AddRMSNorm, *backend.Route, *backend.Experts) {
	t.Helper()
	return newMoEBlockRows(t, b, ms, I, 1, h, delta, w)
}

// newMoEBlockRows is newMoEBlock over rows rows: h and delta [rows, H], w [H].
func newMoEBlockRows(t *testing.T, b *Backend, ms []quant.Matrix, I, rows int, h, delta, w []float32) (*backend.AddRMSNorm, *backend.Route, *backend.Experts) {
	t.Helper()
	var u []backend.Matrix
	for _, m := range ms {
		x, err := b.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		u = append(u, x)
	}
	H, K := len(w), MoETopK
	n := &backend.AddRMSNorm{H: floats(b, h), Weight: floats(b, w), Out: floats(b, nans(rows*H)), Rows: rows, Dim: H, Eps: 1e-6}
	if delta != nil {
		n.Delta = floats(b, delta)
	}
	r := &backend.Route{X: n.Out, Router: u[0], Idx: ints(b, make([]int32, rows*K)), Weights: floats(b, nans(rows*K)), Rows: rows, TopK: K, Normalize: true}
	e := &backend.Experts{X: n.Out, Idx: r.Idx, Weights: r.Weights, Gate: u[1], Up: u[2], Down: u[3],
		SharedGate: u[4], SharedUp: u[5], SharedDown: u[6], SharedExpertGate: u[7], Out: floats(b, nans(rows*H)),
		Rows: rows, TopK: K, Inter: I, SharedInter: I}
	return n, r, e
}

// unknownOp is an op chunkRows does not know.
type unknownOp struct{}

func (unknownOp) Name() string                             { return "unknown" }
func (unknownOp) Access() (reads, writes []backend.Buffer) { return nil, nil }

// TestChunkRows: a program's rows are its ops' most, 0 without any, and an
// op it does not know counts as too many to capture.
func TestChunkRows(t *testing.T) {
	for _, c := range []struct {
		ops  []backend.Op
		want int
	}{
		{[]backend.Op{&backend.Embed{Rows: 1}, &backend.QLinear{Rows: 1}, &backend.Experts{Rows: 1}}, 1},
		{[]backend.Op{&backend.AddRMSNorm{Rows: 17}, &backend.Attention{Rows: 4096}, &backend.Advance{}}, 4096},
		{[]backend.Op{&backend.DeltaRule{Rows: 64}, &backend.GatedRMSNorm{Rows: 64}, &backend.Route{Rows: 9}}, 64},
		{[]backend.Op{&backend.Advance{}}, 0},
		{[]backend.Op{&backend.Embed{Rows: 1}, unknownOp{}}, math.MaxInt}, // not captured until named
	} {
		if got := chunkRows(c.ops); got != c.want {
			t.Errorf("chunkRows of %d ops: %d, want %d", len(c.ops), got, c.want)
		}
	}
}

// TestGraphOnlyShortChunks: with graphs=on a program of graphMaxRows rows
// is captured on its second run, one of a row more never (it keeps
// launching its kernels, and computes the same).
func TestGraphOnlyShortChunks(t *testing.T) {
	b := testBackend(t, DefaultOptions())
	const dim = 64
	for _, rows := range []int{graphMaxRows, graphMaxRows + 1} {
		h := floats(b, make([]float32, rows*dim))
		w := floats(b, make([]float32, dim))
		out := floats(b, make([]float32, rows*dim))
		p, err := b.Compile([]backend.Op{&backend.AddRMSNorm{H: h, Weight: w, Out: out, Rows: rows, Dim: dim, Eps: 1e-6}})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if captured, want := p.(*program).exec != nil, rows <= graphMaxRows; captured != want {
			t.Errorf("%d rows: captured %v after three runs, want %v", rows, captured, want)
		}
	}
}

// TestPoolOption: pool=on|off parse, on is the default, and the help says so.
func TestPoolOption(t *testing.T) {
	if !DefaultOptions().Pool {
		t.Error("the default takes no memory pool")
	}
	if o, err := ParseOptions([]backend.Option{{Key: "pool", Value: "off"}}); err != nil || o.Pool {
		t.Errorf("pool=off: %+v, %v", o, err)
	}
	if _, err := ParseOptions([]backend.Option{{Key: "pool", Value: "maybe"}}); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Errorf("pool=maybe: error %v, want one naming pool", err)
	}
	if !strings.Contains(OptionsHelp, "pool=on|off") || !strings.Contains(OptionsHelp, "default on), ") {
		t.Errorf("the help does not describe pool: %s", OptionsHelp)
	}
}

// TestPoolReusesFreedMemory: with pool=on a buffer freed and one of the same
// size allocated after it take the same memory (the pool kept it mapped),
// the new one zeroed, and a state's buffers can be freed while work that
// reads them is still queued (the free waits for it in the stream's order).
func TestPoolReusesFreedMemory(t *testing.T) {
	b := testBackend(t, DefaultOptions())
	const n = 1 << 20
	a, err := b.Alloc(n, backend.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(a, make([]float32, n)); err != nil {
		t.Fatal(err)
	}
	one := make([]float32, n)
	for i := range one {
		one[i] = 1
	}
	src := floats(b, one)
	if err := b.Copy(a, src); err != nil { // queued: the free below must wait for it
		t.Fatal(err)
	}
	pa := a.Mem.(*memory).p
	b.Free(a)
	c, err := b.Alloc(n, backend.F32)
	if err != nil {
		t.Fatal(err)
	}
	if pc := c.Mem.(*memory).p; pc != pa {
		t.Logf("the pool gave %#x after freeing %#x (not the same memory: allowed, but not expected)", uint64(pc), uint64(pa))
	}
	got := make([]float32, n)
	if err := b.Read(c, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("a new buffer's element %d is %g, not zero", i, v)
		}
	}
}

// TestMoEGroupOption: moegroup=one|blocks parse, blocks is the default,
// and a bad value is named.
func TestMoEGroupOption(t *testing.T) {
	if !DefaultOptions().MoEGroupBlocks {
		t.Error("the default groups the MoE's pairs in one block")
	}
	if o, err := ParseOptions([]backend.Option{{Key: "moegroup", Value: "one"}}); err != nil || o.MoEGroupBlocks {
		t.Errorf("moegroup=one: %+v, %v", o, err)
	}
	if _, err := ParseOptions([]backend.Option{{Key: "moegroup", Value: "many"}}); err == nil || !strings.Contains(err.Error(), "moegroup") {
		t.Errorf("moegroup=many: error %v, want one naming moegroup", err)
	}
	if !strings.Contains(OptionsHelp, "moegroup=one|blocks") || !strings.Contains(OptionsHelp, "default blocks") {
		t.Errorf("the help does not describe moegroup: %s", OptionsHelp)
	}
}

// TestSlowestKinds: the verbose line's op kinds, slowest first, at most n.
func TestSlowestKinds(t *testing.T) {
	got := slowestKinds(map[string]time.Duration{"qk_prep": 900 * time.Microsecond, "experts": 400 * time.Microsecond, "advance": time.Microsecond}, 2)
	if want := ": qk_prep 0.90, experts 0.40"; got != want {
		t.Errorf("slowestKinds: %q, want %q", got, want)
	}
	if got := slowestKinds(nil, 3); got != "" {
		t.Errorf("slowestKinds of none: %q", got)
	}
}
