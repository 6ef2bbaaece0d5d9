package bench

import (
	"fmt"
	"strings"

	"petal/engine/backend"
	"petal/engine/model"
)

// Ceilings are the backend's peaks (backend.Peaks) measured at the start
// of the sweep: what the floors of its speeds are made of.
type Ceilings struct {
	// ReadBytesPerSecond is a plain streaming read's rate: the decode
	// floor is DecodeBytes over it.
	ReadBytesPerSecond float64 `json:"read_bytes_per_second,omitempty"`
	// MatrixFLOPsPerSecond is the backend's prefill matrix kernel's rate
	// on a large problem: the prefill floor is PrefillFLOPs over it.
	MatrixFLOPsPerSecond float64 `json:"matrix_flops_per_second,omitempty"`
	// Error says why a ceiling is missing (the backend cannot measure it,
	// or the measurement failed); the speeds are reported without floors.
	Error string `json:"error,omitempty"`
}

// Floor is a speed against the floor its phase has on this machine: the
// work one token needs, the most tokens per second the measured ceiling
// allows for it, and the share of that the measured speed reached. Absent
// where the ceiling was not measured.
type Floor struct {
	BytesPerToken        int64   `json:"floor_bytes_per_token,omitempty"` // decode: what a token must read
	FLOPsPerToken        float64 `json:"floor_flops_per_token,omitempty"` // prefill: a token's matrix work
	FloorTokensPerSecond float64 `json:"floor_tokens_per_second,omitempty"`
	ShareOfFloor         float64 `json:"share_of_floor,omitempty"` // tokens_per_second / floor_tokens_per_second
}

// measureCeilings asks the backend for both peaks, keeping what it gives.
func measureCeilings(be backend.Backend) *Ceilings {
	p, ok := be.(backend.Peaks)
	if !ok {
		return &Ceilings{Error: fmt.Sprintf("the %s backend does not measure its peaks", be.Name())}
	}
	c := &Ceilings{}
	var errs []string
	var err error
	if c.ReadBytesPerSecond, err = p.ReadBandwidth(); err != nil {
		errs = append(errs, "read bandwidth: "+err.Error())
	}
	if c.MatrixFLOPsPerSecond, err = p.MatrixRate(); err != nil {
		errs = append(errs, "matrix rate: "+err.Error())
	}
	c.Error = strings.Join(errs, "; ")
	return c
}

// Line says what was measured, for the top of the table and progress.
func (c *Ceilings) Line() string {
	var parts []string
	if c.ReadBytesPerSecond > 0 {
		parts = append(parts, fmt.Sprintf("read %.1f GB/s", c.ReadBytesPerSecond/1e9))
	}
	switch r := c.MatrixFLOPsPerSecond; {
	case r >= 1e12:
		parts = append(parts, fmt.Sprintf("matrix %.1f TFLOP/s", r/1e12))
	case r > 0:
		parts = append(parts, fmt.Sprintf("matrix %.1f GFLOP/s", r/1e9))
	}
	line := "ceilings measured in this run: " + strings.Join(parts, ", ")
	if len(parts) == 0 {
		line = "ceilings: none measured"
	}
	if c.Error != "" {
		line += " (" + c.Error + ")"
	}
	return line
}

// floors fills in each speed of e against its floor.
func (sw *sweep) floors(e *Entry) {
	c := sw.r.Ceilings
	if c == nil {
		return
	}
	d := &sw.m.Dims
	if p := e.Prefill; p != nil && c.MatrixFLOPsPerSecond > 0 {
		p.FLOPsPerToken = PrefillFLOPs(d, p.Tokens)
		p.FloorTokensPerSecond = c.MatrixFLOPsPerSecond / p.FLOPsPerToken
		p.ShareOfFloor = p.TokensPerSecond / p.FloorTokensPerSecond
	}
	if dec := e.Decode; dec != nil && c.ReadBytesPerSecond > 0 {
		dec.BytesPerToken = ModelDecodeBytes(sw.m, dec.Context)
		dec.FloorTokensPerSecond = c.ReadBytesPerSecond / float64(dec.BytesPerToken)
		dec.ShareOfFloor = dec.TokensPerSecond / dec.FloorTokensPerSecond
	}
}

// kvElem is the bytes of an element of the model's KV caches.
func kvElem(m *model.Model) int {
	if m.KV == backend.BF16 {
		return 2
	}
	if s, ok := m.Backend().(interface{ KVShadowed() bool }); ok && s.KVShadowed() {
		return 2 // decode reads the f32 cache's bf16 shadow (cuda's kvshadow=on)
	}
	return 4
}

// countKernels records the launches of s's decode step where the backend
// counts them (the step's program is compiled by then: decode ran it).
func (sw *sweep) countKernels(d *Decode, s *model.State) error {
	lc, ok := sw.m.Backend().(backend.LaunchCounter)
	if !ok {
		return nil
	}
	p, err := sw.m.DecodeProgram(s, 0, false)
	if err != nil {
		return err
	}
	d.KernelsPerToken = lc.Kernels(p)
	return nil
}

// sampleMemory keeps the most device memory in use seen so far and
// returns what is in use now (0 where the backend does not say).
func (sw *sweep) sampleMemory() int64 {
	dm, ok := sw.m.Backend().(backend.DeviceMemory)
	if !ok {
		return 0
	}
	used, err := dm.DeviceMemoryUsed()
	if err != nil {
		return 0
	}
	if sw.r != nil && used > sw.r.PeakDeviceBytes {
		sw.r.PeakDeviceBytes = used
	}
	return used
}

// SetLoad records how long making the model ready took and what that was.
func (r *Report) SetLoad(seconds float64, what string) { r.LoadSeconds, r.LoadIs = seconds, what }
