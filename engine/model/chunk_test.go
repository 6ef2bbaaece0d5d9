package model_test

import (
	"fmt"
	"testing"

	"petal/engine/model"
	"petal/engine/oracle"
)

// TestChunkedPrefill: chunk sizes 1, 3, 64 and the whole prompt give the same
// logits, and a prefix then the rest equals the whole.
func TestChunkedPrefill(t *testing.T) {
	whole, ref := loadOracle(t, 256)
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:100] // chunk size 1 runs a forward pass per token
	want := allLogits(t, whole, whole.NewState(4096), ids)

	for _, chunk := range []int{1, 3, 64} {
		t.Run(fmt.Sprint("chunk", chunk), func(t *testing.T) {
			m, _ := loadOracle(t, chunk)
			got := allLogits(t, m, m.NewState(4096), ids)
			if d := oracle.Compare(got, want); d.RelL2 > 1e-5 || d.MaxAbs > 1e-4 {
				t.Errorf("chunk %d vs whole prompt: %s", chunk, d)
			}
		})
	}
	t.Run("prefix then rest", func(t *testing.T) {
		for _, cut := range []int{1, 37, 99} {
			s := whole.NewState(4096)
			a := allLogits(t, whole, s, ids[:cut])
			b := allLogits(t, whole, s, ids[cut:])
			if d := oracle.Compare(append(a, b...), want); d.RelL2 > 1e-5 || d.MaxAbs > 1e-4 {
				t.Errorf("prefix %d then rest vs whole: %s", cut, d)
			}
		}
	})
}

// TestContextLimit: a prompt longer than the maximum context is refused
// before anything runs.
func TestContextLimit(t *testing.T) {
	m, _ := loadOracle(t, 8)
	s := m.NewState(10)
	err := m.Forward(s, make([]int32, 11), model.NoLogits, nil)
	if err == nil || s.Pos() != 0 {
		t.Fatalf("11 tokens in a 10-token context: err %v, position %d", err, s.Pos())
	}
}
