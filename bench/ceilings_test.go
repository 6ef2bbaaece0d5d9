package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/model"
)

// gpuLike is the CPU backend with fixed ceilings, a launch count (one per
// op) and a device memory that grows with every sample, standing in for a
// GPU backend so that what bench does with them can be checked exactly.
type gpuLike struct {
	*cpu.Backend
	samples int64
}

func (g *gpuLike) ReadBandwidth() (float64, error)  { return 2e9, nil }
func (g *gpuLike) MatrixRate() (float64, error)     { return 5e10, nil }
func (g *gpuLike) Kernels(p backend.Program) int    { return len(p.Ops()) }
func (g *gpuLike) DeviceMemoryUsed() (int64, error) { g.samples++; return g.samples << 20, nil }

func tinyOn(t *testing.T, be backend.Backend) *model.Model {
	t.Helper()
	d, err := model.NamedDims("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Synthetic(d, be, 16, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFloorsInReport: with Floors, every speed has its floor from the
// model's sizes and the ceilings, and the share is speed over floor;
// decode has the launches of its step; the peak memory is the most sampled
// (two samples per length here: one prefill, one decode run).
func TestFloorsInReport(t *testing.T) {
	be := &gpuLike{Backend: cpu.New()}
	m := tinyOn(t, be)
	r, err := Run(context.Background(), m, Options{PromptLengths: []int{8, 24}, ContextLengths: []int{8, 24}, DecodeTokens: 2, Floors: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Ceilings; c == nil || c.ReadBytesPerSecond != 2e9 || c.MatrixFLOPsPerSecond != 5e10 || c.Error != "" {
		t.Fatalf("ceilings %+v", r.Ceilings)
	}
	d := &m.Dims
	for _, e := range r.Results {
		p, dec := e.Prefill, e.Decode
		if p.FLOPsPerToken != PrefillFLOPs(d, e.Length) || !near(p.FloorTokensPerSecond, 5e10/p.FLOPsPerToken) ||
			!near(p.ShareOfFloor, p.TokensPerSecond/p.FloorTokensPerSecond) {
			t.Errorf("length %d prefill floor %+v", e.Length, p.Floor)
		}
		if dec.BytesPerToken != DecodeBytes(d, e.Length, 4) || !near(dec.FloorTokensPerSecond, 2e9/float64(dec.BytesPerToken)) ||
			!near(dec.ShareOfFloor, dec.TokensPerSecond/dec.FloorTokensPerSecond) {
			t.Errorf("length %d decode floor %+v", e.Length, dec.Floor)
		}
		s := m.NewState(64)
		prog, err := m.DecodeProgram(s, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(prog.Ops()); dec.KernelsPerToken != want {
			t.Errorf("length %d: %d kernels per token, want the step's %d ops", e.Length, dec.KernelsPerToken, want)
		}
		s.Free(be)
	}
	if r.PeakDeviceBytes != be.samples<<20 || be.samples != 4 {
		t.Errorf("peak device memory %d after %d samples", r.PeakDeviceBytes, be.samples)
	}
	// each prefill has the memory sampled after it: distinct samples
	seen := map[int64]bool{}
	for _, e := range r.Results {
		b := e.Prefill.DeviceBytes
		if b <= 0 || b%(1<<20) != 0 || b > r.PeakDeviceBytes || seen[b] {
			t.Errorf("length %d: prefill device memory %d (peak %d, seen %v)", e.Length, b, r.PeakDeviceBytes, seen)
		}
		seen[b] = true
	}
	var out bytes.Buffer
	if err := WriteTable(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ceilings measured in this run: read 2.0 GB/s, matrix 50.0 GFLOP/s", "prefill % floor", "decode % floor", "kernels/token", "peak device memory in use", "prefill GiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFloorsOnTheCPU: the CPU backend measures both ceilings itself; every
// share is positive; it counts no launches and has no device memory.
func TestFloorsOnTheCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the CPU's ceilings")
	}
	m := tinyModel(t, 16)
	r, err := Run(context.Background(), m, Options{PromptLengths: []int{16}, ContextLengths: []int{16}, DecodeTokens: 2, Floors: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Ceilings; c.ReadBytesPerSecond <= 0 || c.MatrixFLOPsPerSecond <= 0 || c.Error != "" {
		t.Fatalf("ceilings %+v", c)
	}
	e := r.Results[0]
	if e.Prefill.ShareOfFloor <= 0 || e.Decode.ShareOfFloor <= 0 || e.Decode.KernelsPerToken != 0 || r.PeakDeviceBytes != 0 {
		t.Errorf("prefill %+v decode %+v peak %d", e.Prefill.Floor, e.Decode, r.PeakDeviceBytes)
	}
}

// noPeaks is a backend that cannot measure its ceilings.
type noPeaks struct{ backend.Backend }

// TestFloorsWithoutPeaks: a backend without Peaks gets a report that says
// so, and speeds without floors.
func TestFloorsWithoutPeaks(t *testing.T) {
	m := tinyOn(t, noPeaks{cpu.New()})
	r, err := Run(context.Background(), m, Options{PromptLengths: []int{8}, ContextLengths: []int{8}, DecodeTokens: 2, Floors: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ceilings == nil || !strings.Contains(r.Ceilings.Error, "does not measure its peaks") {
		t.Fatalf("ceilings %+v", r.Ceilings)
	}
	if e := r.Results[0]; e.Prefill.ShareOfFloor != 0 || e.Decode.ShareOfFloor != 0 {
		t.Errorf("floors without ceilings: %+v %+v", e.Prefill.Floor, e.Decode.Floor)
	}
}
