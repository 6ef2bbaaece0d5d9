package model_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/fixtures"
)

// openEmbedded opens the embedded default model (the oracle's checkpoint).
func openEmbedded(t *testing.T) *checkpoint.Checkpoint {
	t.Helper()
	dir, err := fixtures.DefaultModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// TestNamedTinyIsTheOracleShape: the "tiny" shape has the sizes, layer
// pattern, context and quantised bytes per bit width of the real checkpoint.
func TestNamedTinyIsTheOracleShape(t *testing.T) {
	ck := openEmbedded(t)
	want, err := model.NewDims(&ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	got, err := model.NamedDims("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tiny dims:\n got  %+v\n want %+v", got, want)
	}
	c, _ := model.NamedConfig("tiny")
	if c.MaxPositionEmbeddings != ck.Config.MaxPositionEmbeddings || c.TieWordEmbeddings != ck.Config.TieWordEmbeddings {
		t.Errorf("tiny: max positions %d tied %v, checkpoint %d tied %v", c.MaxPositionEmbeddings, c.TieWordEmbeddings,
			ck.Config.MaxPositionEmbeddings, ck.Config.TieWordEmbeddings)
	}

	// The synthetic matrices have the checkpoint's shapes and bit widths,
	// so their bytes per bit width agree exactly.
	m, err := model.Synthetic(got, cpu.New(), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	byBits := map[int]int64{}
	for _, mat := range matrices(m.W) {
		s := mat.Shape()
		byBits[s.Bits] += s.Bytes()
	}
	if stats := ck.Stats(); !reflect.DeepEqual(byBits, stats.QuantBytesByBits) {
		t.Errorf("quantised bytes by bit width: synthetic %v, checkpoint %v", byBits, stats.QuantBytesByBits)
	}

	// Field by field, every weight has the bound checkpoint's shape.
	bound, err := model.Load(ck, cpu.New(), 8)
	if err != nil {
		t.Fatal(err)
	}
	shape := func(m backend.Matrix) [5]int {
		s := m.Shape()
		return [5]int{s.Experts, s.Rows, s.Cols, s.Bits, s.GroupSize}
	}
	sm, rm := matrices(m.W), matrices(bound.W)
	for i := range rm {
		if shape(sm[i]) != shape(rm[i]) {
			t.Errorf("matrix %d: synthetic [experts rows cols bits group] %v, checkpoint %v", i, shape(sm[i]), shape(rm[i]))
		}
	}
	sv, rv := vectors(m.W), vectors(bound.W)
	for i := range rv {
		if sv[i].Len != rv[i].Len {
			t.Errorf("vector %d: synthetic %d values, checkpoint %d", i, sv[i].Len, rv[i].Len)
		}
	}
}

// TestNamed35B: the 35B-A3B shape as the spec gives it (sections 1.2-1.3),
// and its weights at about 20 GB.
func TestNamed35B(t *testing.T) {
	d, err := model.NamedDims("Qwen3.6-35B-A3B")
	if err != nil {
		t.Fatal(err)
	}
	sizes := []struct {
		name      string
		got, want int
	}{
		{"hidden", d.Hidden, 2048}, {"layers", d.Layers, 40}, {"vocab", d.Vocab, 248320},
		{"q heads", d.QHeads, 16}, {"kv heads", d.KVHeads, 2}, {"head dim", d.HeadDim, 256}, {"rotary", d.RotaryDim, 64},
		{"key heads", d.KeyHeads, 16}, {"key dim", d.KeyDim, 128}, {"value heads", d.ValueHeads, 32}, {"value dim", d.ValueDim, 128},
		{"conv", d.ConvK, 4}, {"experts", d.Experts, 256}, {"top k", d.TopK, 8}, {"inter", d.Inter, 512}, {"shared inter", d.SharedInter, 512},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("%s = %d, want %d", s.name, s.got, s.want)
		}
	}
	if d.RopeTheta != 1e7 || d.Eps != 1e-6 || !d.NormTopK {
		t.Errorf("theta %g eps %g norm top-k %v", d.RopeTheta, d.Eps, d.NormTopK)
	}
	for i, full := range d.Full {
		if full != (i%4 == 3) {
			t.Errorf("layer %d full attention %v", i, full)
		}
	}
	if alias, _ := model.NamedDims("qwen3.5-35b-a3b"); !reflect.DeepEqual(alias, d) {
		t.Error("qwen3.5-35b-a3b is not the same shape")
	}
	// mlx-community/Qwen3.6-35B-A3B-4bit is about 19-20 GB of weights.
	if gb := float64(model.SyntheticWeightBytes(d)) / 1e9; gb < 19 || gb > 21 {
		t.Errorf("35B-A3B weights take %.2f GB, want about 20", gb)
	}
}

func TestNamedUnknown(t *testing.T) {
	_, err := model.NamedDims("llama-7b")
	if err == nil || !strings.Contains(err.Error(), "llama-7b") || !strings.Contains(err.Error(), "qwen3.6-35b-a3b") {
		t.Errorf("unknown shape: %v", err)
	}
}

// TestSyntheticWeightBytes: the estimate is what the built model holds.
func TestSyntheticWeightBytes(t *testing.T) {
	d, _ := model.NamedDims("tiny")
	be := cpu.New()
	m, err := model.Synthetic(d, be, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	var held int64
	for _, mat := range matrices(m.W) {
		s := mat.Shape()
		held += s.Bytes()
	}
	for _, v := range vectors(m.W) {
		held += int64(v.Len) * 4
	}
	if want := model.SyntheticWeightBytes(d); held != want {
		t.Errorf("synthetic model holds %d bytes, SyntheticWeightBytes says %d", held, want)
	}
}

// TestSyntheticForward: random weights give finite, varied logits through
// the whole stack, also forty layers deep, and the seed decides them.
func TestSyntheticForward(t *testing.T) {
	tiny, _ := model.NamedDims("tiny")
	deep, _ := model.NamedDims("tiny")
	deep.Layers = 40
	deep.Full = nil
	for i := range deep.Layers {
		deep.Full = append(deep.Full, i%4 == 3)
	}
	tokens := []int32{1, 17, 400, 4095, 2048, 3, 3, 3, 900, 12, 77, 1000}
	for name, d := range map[string]model.Dims{"tiny": tiny, "40 layers": deep} {
		t.Run(name, func(t *testing.T) {
			a := lastLogits(t, d, 1, tokens)
			var lo, hi float32 = float32(math.Inf(1)), float32(math.Inf(-1))
			for i, v := range a {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("logit %d is %v", i, v)
				}
				lo, hi = min(lo, v), max(hi, v)
			}
			if hi-lo < 1e-3 {
				t.Errorf("logits all within %g: the stack collapsed", hi-lo)
			}
			if b := lastLogits(t, d, 1, tokens); !reflect.DeepEqual(a, b) {
				t.Error("the same seed gave different logits")
			}
			if c := lastLogits(t, d, 2, tokens); reflect.DeepEqual(a, c) {
				t.Error("another seed gave the same logits")
			}
		})
	}
}

func TestFromWeightsChecks(t *testing.T) {
	d, _ := model.NamedDims("tiny")
	m, err := model.Synthetic(d, cpu.New(), 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.FromWeights(d, m.W, m.Backend(), 0); err == nil {
		t.Error("chunk 0 accepted")
	}
	odd := d
	odd.Inter = 48
	if _, err := model.Synthetic(odd, cpu.New(), 4, 1); err == nil || !strings.Contains(err.Error(), "48") {
		t.Errorf("experts 48 wide: %v", err)
	}
	short := *m.W
	short.Layers = short.Layers[:3]
	if _, err := model.FromWeights(d, &short, m.Backend(), 4); err == nil {
		t.Error("3 bound layers accepted for 8")
	}
}

func lastLogits(t *testing.T, d model.Dims, seed uint64, tokens []int32) []float32 {
	t.Helper()
	m, err := model.Synthetic(d, cpu.New(), 5, seed) // 5: several chunks, one partial
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	err = m.Forward(m.NewState(64), tokens, model.LastLogits, func(_ int, l []float32) {
		out = append([]float32(nil), l...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != d.Vocab {
		t.Fatalf("%d logits, want %d", len(out), d.Vocab)
	}
	return out
}

func matrices(w *model.Weights) []backend.Matrix {
	out := []backend.Matrix{w.Embed, w.LMHead}
	for _, l := range w.Layers {
		if a := l.Attn; a != nil {
			out = append(out, a.QProj, a.KProj, a.VProj, a.OProj)
		} else {
			g := l.DeltaNet
			out = append(out, g.InQKV, g.InZ, g.InB, g.InA, g.OutProj)
		}
		e := l.MoE
		out = append(out, e.Router, e.Gate, e.Up, e.Down, e.SharedGate, e.SharedUp, e.SharedDown, e.SharedExpertGate)
	}
	return out
}

func vectors(w *model.Weights) []backend.Buffer {
	out := []backend.Buffer{w.FinalNorm}
	for _, l := range w.Layers {
		out = append(out, l.InputNorm, l.PostNorm)
		if a := l.Attn; a != nil {
			out = append(out, a.QNorm, a.KNorm)
		} else {
			g := l.DeltaNet
			out = append(out, g.Conv, g.DtBias, g.ALog, g.Norm)
		}
	}
	return out
}
