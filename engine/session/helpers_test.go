package session

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
)

const oracleDir = "../../../shared/oracle/tiny-qwen36-moe-4bit"

// loadOracle loads the oracle model on the CPU backend, or skips the test
// when the shared oracle folder is absent.
func loadOracle(t testing.TB) (*model.Model, Fingerprint) {
	t.Helper()
	return loadOracleOn(t, cpu.Options{})
}

// loadOracleOn is loadOracle on a CPU backend with options o.
func loadOracleOn(t testing.TB, o cpu.Options) (*model.Model, Fingerprint) {
	t.Helper()
	if _, err := os.Stat(oracleDir); err != nil {
		t.Skipf("oracle model not found at %s: %v", oracleDir, err)
	}
	ck, err := checkpoint.Open(oracleDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	be, err := cpu.NewWithOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(ck, be, 64)
	if err != nil {
		t.Fatal(err)
	}
	return m, ModelFingerprint(ck)
}

// tokenIDs is a deterministic pseudo-random token sequence below vocab.
func tokenIDs(n int, seed uint64, vocab int) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	return ids
}

// greedy runs prompt after what s holds and then generates steps tokens,
// each the argmax of the last logits.
func greedy(t testing.TB, m *model.Model, s *model.State, prompt []int32, steps int) []int32 {
	t.Helper()
	var out []int32
	next := prompt
	for range steps {
		var best int32
		err := m.Forward(s, next, model.LastLogits, func(_ int, l []float32) {
			for i, v := range l {
				if v > l[best] {
					best = int32(i)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, best)
		next = []int32{best}
	}
	return out
}

// snapshot copies s to the host, failing the test on a device error.
func snapshot(t testing.TB, m *model.Model, s *model.State) model.StateData {
	t.Helper()
	d, err := m.Snapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// allLogits runs ids after what s holds and returns every row of logits.
func allLogits(t testing.TB, m *model.Model, s *model.State, ids []int32) []float32 {
	t.Helper()
	var out []float32
	if err := m.Forward(s, ids, model.AllLogits, func(_ int, l []float32) { out = append(out, l...) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// synthState is a state of the oracle model's layout (3 DeltaNet layers and
// one attention layer, twice) with small made-up sizes and values.
func synthState(tokens int, seed uint64) model.StateData {
	return synthStateWidth(tokens, 6, seed)
}

// synthStateWidth is synthState with kvWidth values per token and layer.
func synthStateWidth(tokens, kvWidth int, seed uint64) model.StateData {
	const layers, conv, recur = 8, 5, 7
	r := rand.New(rand.NewPCG(seed, 2))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
		return v
	}
	d := model.StateData{
		Tokens: tokenIDs(tokens, seed, 4096),
		KV:     backend.F32,
		K:      make([][]float32, layers), V: make([][]float32, layers),
		Conv: make([][]float32, layers), Recur: make([][]float32, layers),
	}
	for i := range layers {
		if i%4 == 3 {
			d.K[i], d.V[i] = vals(tokens*kvWidth), vals(tokens*kvWidth)
		} else {
			d.Conv[i], d.Recur[i] = vals(conv), vals(recur)
		}
	}
	return d
}

// synthStateBF16 is synthState with bf16 K and V values.
func synthStateBF16(tokens int, seed uint64) model.StateData {
	d := synthState(tokens, seed)
	d.KV = backend.BF16
	for _, set := range [][][]float32{d.K, d.V} {
		for _, v := range set {
			for i := range v {
				v[i] = backend.Round(backend.BF16, v[i])
			}
		}
	}
	return d
}

// testFP is a made-up fingerprint for tests that need no model.
func testFP(b byte) Fingerprint {
	var f Fingerprint
	for i := range f {
		f[i] = b + byte(i)
	}
	return f
}

// openTestStore opens a store in a fresh temporary folder.
func openTestStore(t testing.TB, fp Fingerprint, opts StoreOptions) *Store {
	t.Helper()
	st, err := OpenStore(filepath.Join(t.TempDir(), "sessions"), fp, opts)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
