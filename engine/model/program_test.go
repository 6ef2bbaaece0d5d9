package model_test

import (
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
}

func (c *countingBackend) Compile(ops []backend.Op) (backend.Program, error) {
	c.compiles++
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
