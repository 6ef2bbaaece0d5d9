package metal_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/metal"
)

// simdBars bound gemm=simd's ops of several rows against the CPU backend's
// float32 results: the largest difference over the RMS of the reference,
// engine/cuda's bars for gemm=tc (its prefill_test.go's tcBars: what bf16
// inputs with float32 sums cost on those ops).
var simdBars = map[string]float64{"QLinear": 1.5e-2, "QLinearGroup": 1.5e-2, "Experts": 4e-2}

// TestSimdGEMMOpsMatchReferences runs 4-bit QLinear, QLinearGroup and
// Experts of several rows at the 35B model's widths and the tiny oracle
// model's on the Metal backend with gemm=simd (checked to dispatch
// gemm.metal's kernels) and on the CPU backend from the same data, outputs
// poisoned with NaN, within simdBars of the CPU's.
func TestSimdGEMMOpsMatchReferences(t *testing.T) {
	o := metal.DefaultOptions()
	o.SimdGEMM = true
	testGEMMOps(t, o, "")
}

// TestTensorGEMMOpsMatchReferences is TestSimdGEMMOpsMatchReferences under
// gemm=tensor (checked to dispatch gemm_tensor.metal's kernels where the
// device has tensor operations, as the CUDA dialect has), within the same
// bars: the same bf16 operands with float32 sums.
func TestTensorGEMMOpsMatchReferences(t *testing.T) {
	o := metal.DefaultOptions()
	o.TensorGEMM = true
	testGEMMOps(t, o, "gemm_tensor_")
}

// testGEMMOps runs the cases of TestSimdGEMMOpsMatchReferences on a
// backend with options o, each case's GEMM entry named with prefix in
// place of "gemm_" where the backend kept gemm=tensor.
func testGEMMOps(t *testing.T, o metal.Options, prefix string) {
	dev := openBackend(t, o)
	if !dev.Options().TensorGEMM {
		prefix = ""
	}
	ref, err := cpu.NewWithOptions(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type built struct {
		op  backend.Op
		out backend.Buffer
	}
	nan := float32(math.NaN())
	poisoned := func(g gen, n int) backend.Buffer {
		b, err := backend.AllocFloats(g.be, backend.F32, slices.Repeat([]float32{nan}, n))
		if err != nil {
			g.t.Fatal(err)
		}
		return b
	}
	experts := func(rows, E, H, I, SI int) func(g gen) built {
		return func(g gen) built {
			ids, w := make([]int32, 0, rows*8), make([]float32, 0, rows*8)
			for range rows {
				for _, e := range g.rng.Perm(E)[:8] {
					ids = append(ids, int32(e))
					w = append(w, 0.05+g.rng.Float32()/8)
				}
			}
			wts, err := backend.AllocFloats(g.be, backend.F32, w)
			if err != nil {
				g.t.Fatal(err)
			}
			out := poisoned(g, rows*H)
			return built{&backend.Experts{X: g.f32(rows*H, 1), Idx: g.ints(ids...), Weights: wts,
				Gate: g.mat(E, I, H, 4), Up: g.mat(E, I, H, 4), Down: g.mat(E, H, I, 4),
				SharedGate: g.mat(1, SI, H, 4), SharedUp: g.mat(1, SI, H, 4), SharedDown: g.mat(1, H, SI, 4), SharedExpertGate: g.mat(1, 1, H, 8),
				Out: out, Rows: rows, TopK: 8, Inter: I, SharedInter: SI}, out}
		}
	}
	cases := []struct {
		name, op string
		entry    string // a gemm.metal kernel the program must dispatch
		build    func(g gen) built
	}{
		{"QLinear 100 rows of 4096 to 2048", "QLinear", "gemm_dense_f32", func(g gen) built {
			y := poisoned(g, 100*2048)
			return built{&backend.QLinear{X: g.f32(100*4096, 1), W: g.mat(1, 2048, 4096, 4), Y: y, Rows: 100}, y}
		}},
		{"QLinearGroup 37 rows of 256 to 136+64", "QLinearGroup", "gemm_dense_f32", func(g gen) built {
			y := poisoned(g, 37*200)
			return built{&backend.QLinearGroup{X: g.f32(37*256, 1), W: []backend.Matrix{g.mat(1, 136, 256, 4), g.mat(1, 64, 256, 4)}, Y: y, Rows: 37}, y}
		}},
		{"Experts 64 rows, 35B widths (16 of 512 x 2048)", "Experts", "gemm_gateup", experts(64, 16, 2048, 512, 512)},
		{"Experts 45 rows, the tiny model's (32 of 64 x 256, shared 128)", "Experts", "gemm_gateup", experts(45, 32, 256, 64, 128)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seed := uint64(200 + i)
			got := c.build(gen{t, dev, rand.New(rand.NewPCG(seed, 1))})
			want := c.build(gen{t, ref, rand.New(rand.NewPCG(seed, 1))})
			p, err := dev.Compile([]backend.Op{got.op})
			if err != nil {
				t.Fatal(err)
			}
			entry := c.entry
			if prefix != "" {
				entry = prefix + strings.TrimPrefix(entry, "gemm_")
			}
			if !slices.Contains(metal.Entries(p), entry) {
				t.Fatalf("dispatches %q, no %s", metal.Entries(p), entry)
			}
			q, err := ref.Compile([]backend.Op{want.op})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			if err := q.Run(); err != nil {
				t.Fatal(err)
			}
			g, w := make([]float32, got.out.Len), make([]float32, want.out.Len)
			if err := dev.Read(got.out, g); err != nil {
				t.Fatal(err)
			}
			if err := ref.Read(want.out, w); err != nil {
				t.Fatal(err)
			}
			var worst, ss float64
			for k := range w {
				d := math.Abs(float64(g[k]) - float64(w[k]))
				if math.IsNaN(d) {
					d = math.Inf(1)
				}
				worst = max(worst, d)
				ss += float64(w[k]) * float64(w[k])
			}
			rel := worst / math.Sqrt(ss/float64(len(w)))
			t.Logf("max difference %.2g of the RMS", rel)
			if !(rel <= simdBars[c.op]) {
				t.Errorf("off the CPU by %.2g of the RMS (bar %g)", rel, simdBars[c.op])
			}
		})
	}
}
