package model_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/oracle"
	"petal/engine/sample"
)

const sharedDir = "../../../shared/oracle"

func oracleDirs(t testing.TB) (modelDir, refDir string) {
	t.Helper()
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("oracle data not found at %s: %v", sharedDir, err)
	}
	return filepath.Join(sharedDir, "tiny-qwen36-moe-4bit"), filepath.Join(sharedDir, "reference")
}

func loadOracle(t testing.TB, chunk int) (*model.Model, *oracle.Reference) {
	t.Helper()
	return loadOracleOn(t, cpu.Options{}, chunk)
}

// loadOracleOn loads the oracle model on a CPU backend with the given options.
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

// allLogits runs ids teacher-forced and returns every row of logits.
func allLogits(t testing.TB, m *model.Model, s *model.State, ids []int32) []float32 {
	t.Helper()
	V := m.Dims.Vocab
	out := make([]float32, len(ids)*V)
	base := s.Pos()
	if err := m.Forward(s, ids, model.AllLogits, func(pos int, l []float32) {
		copy(out[(pos-base)*V:], l)
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOracleLogits checks every reference sequence teacher-forced against
// the float32 bars of shared/oracle/README.md.
func TestOracleLogits(t *testing.T) {
	m, ref := loadOracle(t, 64)
	for si, name := range oracle.Sequences {
		t.Run(name, func(t *testing.T) { checkSequence(t, m, ref, si, name) })
	}
}

// checkSequence runs reference sequence si teacher-forced, checks its logits
// against the float32 bars and returns them.
func checkSequence(t *testing.T, m *model.Model, ref *oracle.Reference, si int, name string) []float32 {
	t.Helper()
	nll, _, err := ref.Floats("nll")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := ref.Ints(name + ".input_ids")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := ref.Floats(name + ".logits")
	if err != nil {
		t.Fatal(err)
	}
	V := m.Dims.Vocab
	got := allLogits(t, m, m.NewState(4096), ids)
	d := oracle.Compare(got, want)
	t.Logf("%s: %s", name, d)
	if d.RelL2 > 1e-4 || d.MaxAbs > 2e-3 {
		t.Errorf("%s logits: %s, want rel-L2 <= 1e-4 and max |Δ| <= 2e-3", name, d)
	}
	for p := range ids {
		w, g := want[p*V:(p+1)*V], got[p*V:(p+1)*V]
		if oracle.Margin(w) >= 1e-3 && sample.Argmax(g) != sample.Argmax(w) {
			t.Errorf("%s position %d: argmax %d, reference %d (margin %.4g)", name, p, sample.Argmax(g), sample.Argmax(w), oracle.Margin(w))
		}
	}
	if n := oracle.MeanNLL(got, ids, V); math.Abs(n-float64(nll[si])) > 1e-4 {
		t.Errorf("%s NLL %.6f, reference %.6f", name, n, nll[si])
	}
	return got
}

// TestOracleHiddenStates compares the residual stream after every layer and
// names the first stage that diverges.
func TestOracleHiddenStates(t *testing.T) {
	m, ref := loadOracle(t, 256)
	ids, err := ref.Ints("seq0.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	stages := make([][]float32, m.Dims.Layers+2)
	m.Trace = func(stage, rows int, h []float32) { stages[stage] = append(stages[stage], h...) }
	if err := m.Forward(m.NewState(4096), ids, model.LastLogits, func(int, []float32) {}); err != nil {
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
		t.Errorf("hidden states diverge first at %s", oracle.StageName(rep.FirstOver, rep.LayerCount))
	}
}

// TestOracleGreedy decodes each greedy case token by token with the caches
// and expects the reference continuation exactly.
func TestOracleGreedy(t *testing.T) {
	m, ref := loadOracle(t, 64)
	for _, name := range oracle.GreedyCases {
		t.Run(name, func(t *testing.T) { checkGreedy(t, m, ref, name) })
	}
}

// checkGreedy decodes greedy case name and expects the reference tokens,
// and the reference logits at the first step.
func checkGreedy(t *testing.T, m *model.Model, ref *oracle.Reference, name string) {
	t.Helper()
	prompt, err := ref.Ints(name + ".prompt_ids")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Ints(name + ".generated_ids")
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := ref.Floats(name + ".first_step_logits")
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewState(4096)
	var next int32
	step := 0
	emit := func(_ int, l []float32) {
		if step == 0 {
			if d := oracle.Compare(l, first); d.RelL2 > 1e-4 || d.MaxAbs > 2e-3 {
				t.Errorf("%s first-step logits: %s", name, d)
			}
		}
		next = sample.Argmax(l)
	}
	if err := m.Forward(s, prompt, model.LastLogits, emit); err != nil {
		t.Fatal(err)
	}
	var got []int32
	for step = 1; step <= len(want); step++ {
		got = append(got, next)
		if step < len(want) {
			if err := m.Forward(s, []int32{next}, model.LastLogits, emit); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: greedy tokens %v, reference %v (first difference at %d)", name, got, want, i)
		}
	}
}
