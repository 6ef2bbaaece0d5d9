package cuda

import (
	"testing"

	"petal/engine/backend"
)

// The backend offers what petal bench measures against: the ceilings, the
// launches per program (Kernels, compile.go) and the memory in use.
var (
	_ backend.Peaks         = (*Backend)(nil)
	_ backend.LaunchCounter = (*Backend)(nil)
	_ backend.DeviceMemory  = (*Backend)(nil)
)

// TestPeaksOnGPU: both ceilings are positive and inside what an NVIDIA GPU
// reaches (a read between 100 GB/s and 20 TB/s, the GEMM between 1 and
// 5000 TFLOP/s), and some memory is in use.
func TestPeaksOnGPU(t *testing.T) {
	gpu(t)
	b, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bw, err := b.ReadBandwidth()
	if err != nil {
		t.Fatal(err)
	}
	if bw < 1e11 || bw > 2e13 {
		t.Errorf("read bandwidth %.3g B/s is outside 1e11..2e13", bw)
	}
	rate, err := b.MatrixRate()
	if err != nil {
		t.Fatal(err)
	}
	if rate < 1e12 || rate > 5e15 {
		t.Errorf("matrix rate %.3g FLOP/s is outside 1e12..5e15", rate)
	}
	used, err := b.DeviceMemoryUsed()
	if err != nil || used <= 0 {
		t.Errorf("device memory used %d, %v", used, err)
	}
	t.Logf("read_xor %.0f GB/s, dense GEMM %.0f TFLOP/s, %.2f GiB in use", bw/1e9, rate/1e12, float64(used)/(1<<30))
}
