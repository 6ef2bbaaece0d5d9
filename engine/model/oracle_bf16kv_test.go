package model_test

import (
	"math"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/oracle"
	"petal/engine/sample"
)

// TestOracleBF16KV runs every reference sequence with bf16 KV caches
// (kv=bf16) against the bfloat16 bars of shared/oracle/README.md: rel-L2
// of the sequence's logits <= 3e-2 and of each position's <= 0.1, top-1
// agreement >= 97 % and the same argmax wherever the reference margin is
// >= 0.25, mean KL <= 2e-3, NLL within 0.01. Prefill in chunks and decode
// read the caches back, so both are covered.
func TestOracleBF16KV(t *testing.T) {
	m, ref := loadOracleOn(t, cpu.Options{KV: backend.BF16}, 64)
	if m.KV != backend.BF16 {
		t.Fatalf("the model keeps %s KV caches on a kv=bf16 backend", m.KV)
	}
	nll, _, err := ref.Floats("nll")
	if err != nil {
		t.Fatal(err)
	}
	V := m.Dims.Vocab
	for si, name := range oracle.Sequences {
		t.Run(name, func(t *testing.T) {
			ids, err := ref.Ints(name + ".input_ids")
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := ref.Floats(name + ".logits")
			if err != nil {
				t.Fatal(err)
			}
			s := m.NewState(4096)
			defer s.Free(m.Backend())
			got := allLogits(t, m, s, ids)
			d := oracle.Compare(got, want)
			var worst, kl float64
			agree := 0
			for p := range ids {
				w, g := want[p*V:(p+1)*V], got[p*V:(p+1)*V]
				worst = max(worst, oracle.Compare(g, w).RelL2)
				if sample.Argmax(g) == sample.Argmax(w) {
					agree++
				} else if oracle.Margin(w) >= 0.25 {
					t.Errorf("position %d: argmax %d, reference %d (margin %.3g)", p, sample.Argmax(g), sample.Argmax(w), oracle.Margin(w))
				}
				kl += oracle.KL(w, g)
			}
			kl /= float64(len(ids))
			top1 := float64(agree) / float64(len(ids))
			n := oracle.MeanNLL(got, ids, V)
			t.Logf("%s: %s; max per-position rel-L2 %.3g; top-1 %.1f %%; mean KL %.2g; NLL %.4f (reference %.4f)",
				name, d, worst, 100*top1, kl, n, nll[si])
			if d.RelL2 > 3e-2 {
				t.Errorf("rel-L2 %.3g > 3e-2", d.RelL2)
			}
			if worst > 0.1 {
				t.Errorf("per-position rel-L2 %.3g > 0.1", worst)
			}
			if top1 < 0.97 {
				t.Errorf("top-1 agreement %.1f %% < 97 %%", 100*top1)
			}
			if kl > 2e-3 {
				t.Errorf("mean KL %.3g > 2e-3", kl)
			}
			if math.Abs(n-float64(nll[si])) > 0.01 {
				t.Errorf("NLL %.4f, reference %.4f", n, nll[si])
			}
		})
	}
	// decode: token by token after a prefill, against the whole-prompt pass
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	want := allLogits(t, m, m.NewState(4096), ids[:40])
	s := m.NewState(4096)
	if err := m.Forward(s, ids[:20], model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 40; i++ {
		var got []float32
		if err := m.Forward(s, ids[i:i+1], model.LastLogits, func(_ int, l []float32) { got = append([]float32(nil), l...) }); err != nil {
			t.Fatal(err)
		}
		if d := oracle.Compare(got, want[i*V:(i+1)*V]); d.RelL2 > 1e-5 {
			t.Errorf("bf16 KV decode at position %d vs the whole prompt: %s", i, d)
		}
	}
}

// TestDecodeAllocationsBF16KV: with bf16 KV caches too, a decode step
// allocates nothing once warmed up.
func TestDecodeAllocationsBF16KV(t *testing.T) {
	m, ref := loadOracleOn(t, cpu.Options{KV: backend.BF16}, 64)
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
	if allocs := testing.AllocsPerRun(20, step); allocs > 0 {
		t.Errorf("%.0f allocations per decode step", allocs)
	}
}
