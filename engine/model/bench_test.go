package model_test

import (
	"testing"

	"petal/engine/model"
)

// BenchmarkPrefill: tokens/s of a 256-token prompt on the oracle model.
func BenchmarkPrefill(b *testing.B) {
	m, ref := loadOracle(b, 256)
	ids, err := ref.Ints("seq0.input_ids")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		s := m.NewState(4096)
		if err := m.Forward(s, ids, model.LastLogits, func(int, []float32) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecode: tokens/s of single-token steps after a 256-token prompt.
func BenchmarkDecode(b *testing.B) {
	m, ref := loadOracle(b, 256)
	ids, err := ref.Ints("seq0.input_ids")
	if err != nil {
		b.Fatal(err)
	}
	s := m.NewState(1 << 20)
	if err := m.Forward(s, ids, model.NoLogits, nil); err != nil {
		b.Fatal(err)
	}
	tok := []int32{ids[0]}
	b.ResetTimer()
	for range b.N {
		if err := m.Forward(s, tok, model.LastLogits, func(int, []float32) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// TestDecodeAllocations: a decode step, once warmed up, allocates nothing:
// no weight copies, no per-token buffers, no closures.
func TestDecodeAllocations(t *testing.T) {
	m, ref := loadOracle(t, 64)
	ids, _ := ref.Ints("seq1.input_ids")
	s := m.NewState(4096)
	if err := m.Forward(s, ids[:32], model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	emit := func(int, []float32) {}
	step := func() {
		if err := m.Forward(s, ids[:1], model.LastLogits, emit); err != nil {
			t.Fatal(err)
		}
	}
	step()
	allocs := testing.AllocsPerRun(20, step)
	t.Logf("%.0f allocations per decode step", allocs)
	if allocs > 0 {
		t.Errorf("%.0f allocations per decode step", allocs)
	}
}
