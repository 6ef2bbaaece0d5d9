package model_test

import (
	"fmt"
	"math"
	"testing"

	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/oracle"
	"petal/engine/sample"
)

// loadOracleOn is loadOracle on a CPU backend with the given options.
func loadOracleOn(t testing.TB, o cpu.Options, chunk int) (*model.Model, *oracle.Reference) {
	t.Helper()
	modelDir, refDir := oracleDirs(t)
	ck, err := checkpoint.Open(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	be, err := cpu.NewWithOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(ck, be, chunk)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := oracle.Open(refDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ref.Close)
	return m, ref
}

// TestOracleChunkedDelta: with the chunked delta rule (every op, or "auto"
// where long enough), every reference sequence teacher-forced meets the
// bars of TestOracleLogits and stays within f32 rounding of the sequential
// form, and the greedy cases decode the reference tokens.
func TestOracleChunkedDelta(t *testing.T) {
	base, _ := loadOracle(t, 64)
	for _, c := range []struct {
		o     cpu.Options
		chunk int
	}{
		{cpu.Options{DeltaRule: "chunked"}, 64},
		{cpu.Options{DeltaRule: "chunked", DeltaChunk: 64}, 256},
		{cpu.Options{DeltaRule: "auto"}, 64},
	} {
		t.Run(fmt.Sprintf("%s/C=%d/prefill=%d", c.o.DeltaRule, c.o.DeltaChunk, c.chunk), func(t *testing.T) {
			m, ref := loadOracleOn(t, c.o, c.chunk)
			nll, _, err := ref.Floats("nll")
			if err != nil {
				t.Fatal(err)
			}
			V := m.Dims.Vocab
			for si, name := range oracle.Sequences {
				ids, err := ref.Ints(name + ".input_ids")
				if err != nil {
					t.Fatal(err)
				}
				want, _, err := ref.Floats(name + ".logits")
				if err != nil {
					t.Fatal(err)
				}
				got := allLogits(t, m, m.NewState(4096), ids)
				d := oracle.Compare(got, want)
				if d.RelL2 > 1e-4 || d.MaxAbs > 2e-3 {
					t.Errorf("%s logits: %s, want rel-L2 <= 1e-4 and max |Δ| <= 2e-3", name, d)
				}
				for p := range ids {
					w, g := want[p*V:(p+1)*V], got[p*V:(p+1)*V]
					if margin(w) >= 1e-3 && sample.Argmax(g) != sample.Argmax(w) {
						t.Errorf("%s position %d: argmax %d, reference %d", name, p, sample.Argmax(g), sample.Argmax(w))
					}
				}
				if n := meanNLL(got, ids, V); math.Abs(n-float64(nll[si])) > 1e-4 {
					t.Errorf("%s NLL %.6f, reference %.6f", name, n, nll[si])
				}
				seq := allLogits(t, base, base.NewState(4096), ids)
				if d := oracle.Compare(got, seq); d.RelL2 > 1e-5 {
					t.Errorf("%s logits against the sequential form: %s, want rel-L2 <= 1e-5", name, d)
				}
			}
			for _, name := range oracle.GreedyCases {
				prompt, err := ref.Ints(name + ".prompt_ids")
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Ints(name + ".generated_ids")
				if err != nil {
					t.Fatal(err)
				}
				s := m.NewState(4096)
				var next int32
				emit := func(_ int, l []float32) { next = sample.Argmax(l) }
				if err := m.Forward(s, prompt, model.LastLogits, emit); err != nil {
					t.Fatal(err)
				}
				for i, w := range want {
					if next != w {
						t.Fatalf("%s: token %d is %d, reference %d", name, i, next, w)
					}
					if err := m.Forward(s, []int32{next}, model.LastLogits, emit); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkPrefillDeltaForms: BenchmarkPrefill with the delta rule in each
// form, to see its share of a whole prefill.
func BenchmarkPrefillDeltaForms(b *testing.B) {
	for _, form := range []string{"sequential", "auto"} {
		b.Run(form, func(b *testing.B) {
			m, ref := loadOracleOn(b, cpu.Options{DeltaRule: form}, 256)
			ids, err := ref.Ints("seq0.input_ids")
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(m.NewState(4096), ids, model.LastLogits, func(int, []float32) {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
