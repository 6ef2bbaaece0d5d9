package cpu

import (
	"testing"

	"petal/engine/backend"
)

var _ backend.Peaks = (*Backend)(nil)

// TestPeaksArePlausible: both ceilings come back as positive rates inside
// what any CPU reaches (a memory read between 100 MB/s and 10 TB/s, a
// mat-mul between 10 MFLOP/s and 100 TFLOP/s).
func TestPeaksArePlausible(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 512 MiB several times")
	}
	b := New()
	bw, err := b.ReadBandwidth()
	if err != nil {
		t.Fatal(err)
	}
	if bw < 1e8 || bw > 1e13 {
		t.Errorf("read bandwidth %.3g B/s is outside 1e8..1e13", bw)
	}
	rate, err := b.MatrixRate()
	if err != nil {
		t.Fatal(err)
	}
	if rate < 1e7 || rate > 1e14 {
		t.Errorf("matrix rate %.3g FLOP/s is outside 1e7..1e14", rate)
	}
	t.Logf("read %.1f GB/s, mat-mul %.1f GFLOP/s", bw/1e9, rate/1e9)
}
