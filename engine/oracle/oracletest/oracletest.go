// Package oracletest holds the checks of a backend's whole model against
// the oracle's reference data (../shared/oracle) that the GPU backends'
// tests share: the sequences teacher-forced at the bfloat16 bars, decode
// token by token, the hidden states stage by stage, the greedy
// continuations.
package oracletest

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/model"
	"petal/engine/oracle"
	"petal/engine/sample"
)

// Dir is the reference data: $PETAL_TEST_ORACLE, else ../shared/oracle
// beside the repository (found from the test's folder up to go.mod). Its
// model folder may be missing: the repository's fixture is the same model.
func Dir(t *testing.T) (modelDir, refDir string) {
	t.Helper()
	root := repoRoot()
	dir := os.Getenv("PETAL_TEST_ORACLE")
	if dir == "" {
		dir = filepath.Join(root, "..", "shared", "oracle")
	}
	refDir = filepath.Join(dir, "reference")
	if _, err := os.Stat(filepath.Join(refDir, "reference.json")); err != nil {
		t.Skipf("the oracle's reference data is missing (%v); PETAL_TEST_ORACLE names its folder", err)
	}
	modelDir = filepath.Join(dir, "tiny-qwen36-moe-4bit")
	if _, err := os.Stat(modelDir); err != nil {
		modelDir = filepath.Join(root, "fixtures", "tiny-qwen36-moe-4bit")
	}
	return modelDir, refDir
}

// repoRoot is the nearest folder up from the working directory (a test's
// package folder) holding go.mod; "." where there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "."
		}
		dir = up
	}
}

// Sequences runs every reference sequence teacher-forced on m and holds
// its logits to the bfloat16 bars of shared/oracle/README.md (top-1 >= 97
// %, the same argmax wherever the reference margin is >= 0.25, rel-L2 <=
// 3e-2 and per position <= 0.1, mean KL <= 2e-3, NLL within 0.01),
// logging whether the float32 bars hold too.
func Sequences(t *testing.T, m *model.Model, ref *oracle.Reference) {
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
		s := m.NewState(4096)
		got := AllLogits(t, m, s, ids)
		s.Free(m.Backend())
		d := oracle.Compare(got, want)
		var worst, kl float64
		agree, strict := 0, 0
		for p := range ids {
			w, g := want[p*V:(p+1)*V], got[p*V:(p+1)*V]
			worst = max(worst, oracle.Compare(g, w).RelL2)
			if sample.Argmax(g) == sample.Argmax(w) {
				agree++
			} else {
				if oracle.Margin(w) >= 1e-3 {
					strict++
				}
				if oracle.Margin(w) >= 0.25 {
					t.Errorf("%s position %d: argmax %d, reference %d (margin %.3g)", name, p, sample.Argmax(g), sample.Argmax(w), oracle.Margin(w))
				}
			}
			kl += oracle.KL(w, g)
		}
		kl /= float64(len(ids))
		top1 := float64(agree) / float64(len(ids))
		n := oracle.MeanNLL(got, ids, V)
		f32 := d.RelL2 <= 1e-4 && d.MaxAbs <= 2e-3 && strict == 0 && math.Abs(n-float64(nll[si])) <= 1e-4
		t.Logf("%s: %s; max per-position rel-L2 %.3g; top-1 %.1f %%; mean KL %.2g; NLL %.6f (reference %.6f); float32 bars met: %v",
			name, d, worst, 100*top1, kl, n, nll[si], f32)
		if d.RelL2 > 3e-2 || worst > 0.1 || top1 < 0.97 || kl > 2e-3 || math.Abs(n-float64(nll[si])) > 0.01 {
			t.Errorf("%s misses a bfloat16 bar: rel-L2 %.3g (3e-2), per position %.3g (0.1), top-1 %.1f %% (97), mean KL %.3g (2e-3), NLL %.4f vs %.4f (0.01)",
				name, d.RelL2, worst, 100*top1, kl, n, nll[si])
		}
	}
}

// Decode: prefill 20 tokens, then decode one token at a time to 40
// (the one-row kernels), against the logits of the whole prompt (the
// chunk kernels), each position within a relative L2 of bar.
func Decode(t *testing.T, m *model.Model, ref *oracle.Reference, bar float64) {
	V := m.Dims.Vocab
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	whole := m.NewState(4096)
	want := AllLogits(t, m, whole, ids[:40])
	whole.Free(m.Backend())
	s := m.NewState(4096)
	defer s.Free(m.Backend())
	if err := m.Forward(s, ids[:20], model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := 20; i < 40; i++ {
		var got []float32
		if err := m.Forward(s, ids[i:i+1], model.LastLogits, func(_ int, l []float32) { got = append([]float32(nil), l...) }); err != nil {
			t.Fatal(err)
		}
		d := oracle.Compare(got, want[i*V:(i+1)*V])
		worst = max(worst, d.RelL2)
		if d.RelL2 > bar {
			t.Errorf("decode at position %d against the whole prompt: %s", i, d)
		}
	}
	t.Logf("decode positions 20..39 against the whole prompt: worst rel-L2 %.3g", worst)
}

// Layers logs the hidden states of the first sequence against the
// reference's, stage by stage, and the first stage past the float32 bar
// (1e-4); it enforces none: the logits' bars are Sequences'.
func Layers(t *testing.T, m *model.Model, ref *oracle.Reference) {
	ids, err := ref.Ints("seq0.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	stages := make([][]float32, m.Dims.Layers+2)
	m.Trace = func(stage, _ int, h []float32) { stages[stage] = append(stages[stage], h...) }
	s := m.NewState(len(ids) + 1)
	err = m.Forward(s, ids, model.NoLogits, nil)
	m.Trace = nil
	s.Free(m.Backend())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ref.CompareLayers("seq0.hidden_states", stages, 1e-4)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	if rep.FirstOver >= 0 {
		t.Logf("hidden states pass the float32 bar 1e-4 up to %s", oracle.StageName(rep.FirstOver, rep.LayerCount))
	}
}

// Greedy: greedy generation through the decode loop reproduces the
// reference continuations up to the first stop id.
func Greedy(t *testing.T, e *engine.Engine, ref *oracle.Reference) {
	for _, name := range oracle.GreedyCases {
		prompt, _ := ref.Ints(name + ".prompt_ids")
		want, _ := ref.Ints(name + ".generated_ids")
		res, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: len(want)})
		if err != nil {
			t.Fatal(err)
		}
		stop := len(want)
		for i, id := range want {
			if e.StopIDs[id] {
				stop = i
				break
			}
		}
		if len(res.Tokens) != stop {
			t.Errorf("%s: %d tokens %v, want the %d before the first stop id of %v", name, len(res.Tokens), res.Tokens, stop, want)
			continue
		}
		for i := range res.Tokens {
			if res.Tokens[i] != want[i] {
				t.Errorf("%s: tokens %v, reference %v", name, res.Tokens, want[:stop])
				break
			}
		}
		t.Logf("%s: %d greedy tokens as the reference: %q", name, len(res.Tokens), res.Text)
	}
}

// AllLogits runs ids through m from s's position and returns every row of
// logits, in order.
func AllLogits(t *testing.T, m *model.Model, s *model.State, ids []int32) []float32 {
	t.Helper()
	V := m.Dims.Vocab
	out := make([]float32, len(ids)*V)
	base := s.Pos()
	if err := m.Forward(s, ids, model.AllLogits, func(pos int, l []float32) { copy(out[(pos-base)*V:], l) }); err != nil {
		t.Fatal(err)
	}
	return out
}
