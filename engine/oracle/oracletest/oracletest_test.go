package oracletest

import (
	"testing"

	"petal/engine"
	"petal/engine/cpu"
	"petal/engine/oracle"
)

// TestOnCPU runs the checks the GPU backends' tests share on the CPU
// backend, which meets their bars by far: so the checks themselves run
// (and can fail) on every machine with the reference data, not only on a
// GPU.
func TestOnCPU(t *testing.T) {
	modelDir, refDir := Dir(t)
	e, err := engine.Open(modelDir, engine.Options{Backend: cpu.New(), Chunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ref, err := oracle.Open(refDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	t.Run("sequences", func(t *testing.T) { Sequences(t, e.Model, ref) })
	t.Run("decode", func(t *testing.T) { Decode(t, e.Model, ref, 1e-4) })
	t.Run("hidden states", func(t *testing.T) { Layers(t, e.Model, ref) })
	t.Run("greedy", func(t *testing.T) { Greedy(t, e, ref) })
}
