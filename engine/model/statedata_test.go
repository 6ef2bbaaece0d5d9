package model_test

import (
	"testing"

	"petal/engine/backend"
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

// TestStateIsOneAllocation: a state's conv and recurrent buffers are views
// of one allocation, each 256 bytes aligned and apart from the others, so
// that a decode step's backup is one copy.
func TestStateIsOneAllocation(t *testing.T) {
	m, _ := loadOracle(t, 32)
	s := m.NewState(64)
	if _, err := m.NewBackup(s); err != nil { // allocates the state
		t.Fatal(err)
	}
	var views []backend.Buffer
	for i, full := range m.Dims.Full {
		if !full {
			views = append(views, s.Conv[i], s.Recur[i])
		}
	}
	if len(views) == 0 {
		t.Fatal("the oracle model has no Gated DeltaNet layers")
	}
	for i, v := range views {
		if v.Mem != views[0].Mem {
			t.Fatalf("view %d is another allocation", i)
		}
		if v.Offset%64 != 0 {
			t.Errorf("view %d starts at float %d, not 256 bytes aligned", i, v.Offset)
		}
		for j := range i {
			if v.Overlaps(views[j]) {
				t.Errorf("views %d and %d overlap", j, i)
			}
		}
	}
}
