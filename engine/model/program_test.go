package model_test

import (
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/oracle"
)

// countingBackend is the CPU backend counting compiled programs and runs.
type countingBackend struct {
	*cpu.Backend
	compiles, runs int
	decodes        int // compiles of one-token programs
}

func (c *countingBackend) Compile(ops []backend.Op) (backend.Program, error) {
	c.compiles++
	if e, ok := ops[0].(*backend.Embed); ok && e.Rows == 1 {
		c.decodes++
	}
	p, err := c.Backend.Compile(ops)
	if err != nil {
		return nil, err
	}
	return countingProgram{p, c}, nil
}

type countingProgram struct {
	backend.Program
	c *countingBackend
}

func (p countingProgram) Run() error {
	p.c.runs++
	return p.Program.Run()
}

// TestDecodeProgramCompiledOnce: one compiled decode program runs at every
// position (the position lives on the device), and gives the logits that a
// whole-prompt pass gives at each of them.
func TestDecodeProgramCompiledOnce(t *testing.T) {
	modelDir, refDir := oracleDirs(t)
	ck, err := checkpoint.Open(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	be := &countingBackend{Backend: cpu.New()}
	m, err := model.Load(ck, be, 64)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := oracle.Open(refDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:48]
	want := allLogits(t, m, m.NewState(4096), ids)

	s := m.NewState(4096)
	if err := m.Forward(s, ids[:8], model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	compiles, runs := be.compiles, be.runs
	V := m.Dims.Vocab
	for i := 8; i < len(ids); i++ {
		var got []float32
		if err := m.Forward(s, ids[i:i+1], model.LastLogits, func(pos int, l []float32) {
			got = append([]float32(nil), l...)
		}); err != nil {
			t.Fatal(err)
		}
		if d := oracle.Compare(got, want[i*V:(i+1)*V]); d.RelL2 > 1e-5 {
			t.Fatalf("decode at position %d vs the whole prompt: %s", i, d)
		}
	}
	if got := be.compiles - compiles; got != 1 {
		t.Errorf("%d programs compiled for %d decode steps, want 1", got, len(ids)-8)
	}
	if got := be.runs - runs; got != len(ids)-8 {
		t.Errorf("%d program runs for %d decode steps", got, len(ids)-8)
	}
}

// loadCounting loads the oracle model on a counting CPU backend.
func loadCounting(t *testing.T, o cpu.Options) (*model.Model, *countingBackend, *oracle.Reference) {
	t.Helper()
	modelDir, refDir := oracleDirs(t)
	ck, err := checkpoint.Open(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	cb, err := cpu.NewWithOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	be := &countingBackend{Backend: cb}
	m, err := model.Load(ck, be, 64)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := oracle.Open(refDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ref.Close)
	return m, be, ref
}

// decodeSteps runs the tokens one at a time and returns each step's logits.
func decodeSteps(t *testing.T, m *model.Model, s *model.State, tokens []int32) []float32 {
	t.Helper()
	var out []float32
	for i := range tokens {
		if err := m.Forward(s, tokens[i:i+1], model.LastLogits, func(_ int, l []float32) { out = append(out, l...) }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestProgramsSurviveJobs: jobs run one after another as petal runs them
// (a new state or a restored snapshot per job, freed at its end) compile
// the decode program once, and a state taken over from an earlier job
// computes what a fresh one does.
func TestProgramsSurviveJobs(t *testing.T) {
	for _, kv := range []string{"f32", "bf16"} {
		t.Run(kv, func(t *testing.T) {
			dt, _ := backend.ParseDType(kv)
			m, be, ref := loadCounting(t, cpu.Options{KV: dt})
			ids, err := ref.Ints("seq1.input_ids")
			if err != nil {
				t.Fatal(err)
			}
			prompt, steps := ids[:20], ids[20:26]

			// job 1: prefill, decode, snapshot; the reference continuation
			s := m.NewState(4096)
			if got := s.KVType(); got != dt {
				t.Fatalf("state keeps %s KV, want %s", got, dt)
			}
			first := allLogits(t, m, s, prompt)
			decodeSteps(t, m, s, steps[:3])
			data, err := m.Snapshot(s)
			if err != nil {
				t.Fatal(err)
			}
			if data.KVType() != dt {
				t.Fatalf("snapshot of %s KV says %s", dt, data.KVType())
			}
			want := decodeSteps(t, m, s, steps[3:])
			s.Free(m.Backend())

			// job 2: restored from the snapshot
			s2, err := m.Import(data, 4096)
			if err != nil {
				t.Fatal(err)
			}
			if d := oracle.Compare(decodeSteps(t, m, s2, steps[3:]), want); d.MaxAbs != 0 {
				t.Errorf("the restored job continues differently: %s", d)
			}
			s2.Free(m.Backend())

			// job 3: a new conversation on the state job 2 left
			s3 := m.NewState(4096)
			if d := oracle.Compare(allLogits(t, m, s3, prompt), first); d.MaxAbs != 0 {
				t.Errorf("a state taken over computes differently from a fresh one: %s", d)
			}
			// and a snapshot restored into it, as an existing state
			if err := m.Restore(s3, data); err != nil {
				t.Fatal(err)
			}
			if d := oracle.Compare(decodeSteps(t, m, s3, steps[3:]), want); d.MaxAbs != 0 {
				t.Errorf("restored into an existing state, it continues differently: %s", d)
			}
			if be.decodes != 1 {
				t.Errorf("the decode program was compiled %d times over three jobs, want once", be.decodes)
			}
		})
	}
}

// TestFullKVCompilesOnce: with the cache sized up front, decoding past the
// size a growing cache starts at compiles nothing again.
func TestFullKVCompilesOnce(t *testing.T) {
	m, be, ref := loadCounting(t, cpu.Options{})
	ids, err := ref.Ints("seq0.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	for _, full := range []bool{false, true} {
		m.FullKV = full
		m.FreeSpare()
		be.decodes = 0
		s := m.NewState(600)
		if err := m.Forward(s, ids[:250], model.NoLogits, nil); err != nil {
			t.Fatal(err)
		}
		decodeSteps(t, m, s, ids[:12]) // across position 256
		want := 1
		if !full {
			want = 2 // the cache grew from 256 rows to 512
		}
		if be.decodes != want {
			t.Errorf("FullKV %v: %d decode programs compiled, want %d", full, be.decodes, want)
		}
		s.Free(m.Backend())
	}
}

// TestRestoreRefusals: a snapshot of the other KV type, or too long for
// the state, is refused with the reason, and the state keeps what it held.
func TestRestoreRefusals(t *testing.T) {
	m, _, ref := loadCounting(t, cpu.Options{})
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	s := m.NewState(64)
	allLogits(t, m, s, ids[:10])
	data, err := m.Snapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	other := data
	other.KV = backend.BF16
	if err := m.Restore(s, other); err == nil || !strings.Contains(err.Error(), "bf16") || !strings.Contains(err.Error(), "f32") {
		t.Errorf("a bf16 snapshot into an f32 state: %v", err)
	}
	small := m.NewState(5)
	if err := m.Restore(small, data); err == nil || !strings.Contains(err.Error(), "maximum context of 5") {
		t.Errorf("10 tokens into a state of 5: %v", err)
	}
	if s.Pos() != 10 {
		t.Errorf("a refused restore changed the state: %d tokens", s.Pos())
	}
}

// TestPrepareCompilesAhead: Prepare compiles the chunk programs of a
// prompt (a chunk of 64 and the rest, here), a Forward after it compiles
// nothing more, and its logits are those of a Forward without Prepare.
func TestPrepareCompilesAhead(t *testing.T) {
	m, be, ref := loadCounting(t, cpu.Options{})
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:100]
	last := func(s *model.State) []float32 {
		var got []float32
		if err := m.Forward(s, ids, model.LastLogits, func(_ int, l []float32) { got = append([]float32(nil), l...) }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := last(m.NewState(4096)) // not freed: the next state is a new one, with no programs

	s := m.NewState(4096)
	before := be.compiles
	if err := m.Prepare(s, len(ids), model.LastLogits); err != nil {
		t.Fatal(err)
	}
	if got := be.compiles - before; got != 2 {
		t.Fatalf("Prepare of 100 tokens in chunks of 64 compiled %d programs, want 2", got)
	}
	if s.Pos() != 0 {
		t.Fatalf("Prepare moved the state to %d", s.Pos())
	}
	runs := be.runs
	before = be.compiles
	got := last(s)
	if be.compiles != before {
		t.Errorf("Forward after Prepare compiled %d programs", be.compiles-before)
	}
	if be.runs-runs != 2 {
		t.Errorf("Forward ran %d programs, want 2", be.runs-runs)
	}
	if d := oracle.Compare(got, want); d.RelL2 != 0 || d.MaxAbs != 0 {
		t.Errorf("logits after Prepare differ from a plain Forward's: %s", d)
	}
}
