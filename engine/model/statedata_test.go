package model_test

import (
	"testing"

	"petal/engine/oracle"
)

// TestExportImport: a state copied out and back in continues exactly as the
// original, and a state of the wrong shape is refused.
func TestExportImport(t *testing.T) {
	m, ref := loadOracle(t, 32)
	ids, err := ref.Ints("seq2.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:60]
	s := m.NewState(4096)
	allLogits(t, m, s, ids[:41])
	data, err := m.Snapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	want := allLogits(t, m, s, ids[41:])

	restored, err := m.Import(data, 4096)
	if err != nil {
		t.Fatal(err)
	}
	got := allLogits(t, m, restored, ids[41:])
	if d := oracle.Compare(got, want); d.MaxAbs != 0 {
		t.Errorf("restored state continues differently: %s", d)
	}

	data.Recur[0] = data.Recur[0][:10]
	if _, err := m.Import(data, 4096); err == nil {
		t.Error("a truncated recurrent state was accepted")
	}
}
