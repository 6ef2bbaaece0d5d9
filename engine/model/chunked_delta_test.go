package model_test

import (
	"fmt"
	"testing"

	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/oracle"
)

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
			for si, name := range oracle.Sequences {
				got := checkSequence(t, m, ref, si, name)
				ids, err := ref.Ints(name + ".input_ids")
				if err != nil {
					t.Fatal(err)
				}
				seq := allLogits(t, base, base.NewState(4096), ids)
				if d := oracle.Compare(got, seq); d.RelL2 > 1e-5 {
					t.Errorf("%s logits against the sequential form: %s, want rel-L2 <= 1e-5", name, d)
				}
			}
			for _, name := range oracle.GreedyCases {
				checkGreedy(t, m, ref, name)
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
