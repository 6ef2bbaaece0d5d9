package cpu

import (
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
)

// TestConformance: the CPU backend passes the suite every backend must,
// with each form of the delta rule.
func TestConformance(t *testing.T) {
	for _, form := range []string{"sequential", "chunked"} {
		t.Run(form, func(t *testing.T) {
			b, err := NewWithOptions(Options{DeltaRule: form, DeltaChunk: 4})
			if err != nil {
				t.Fatal(err)
			}
			backendtest.Run(t, b)
		})
	}
}

// offByOne reads every float buffer with its first element nudged: a
// backend that computes everything slightly wrong.
type offByOne struct{ *Backend }

func (b offByOne) Read(src backend.Buffer, dst []float32) error {
	if err := b.Backend.Read(src, dst); err != nil {
		return err
	}
	if len(dst) > 0 {
		dst[0] += 1
	}
	return nil
}

// TestConformanceCheck: the suite run outside a test (petal doctor) passes
// the CPU case by case, and reports a wrong backend's failures, fatal ones
// included, without letting them escape.
func TestConformanceCheck(t *testing.T) {
	res := backendtest.Check(New())
	if len(res) < 15 {
		t.Fatalf("%d cases", len(res))
	}
	for _, r := range res {
		if len(r.Failures) > 0 {
			t.Errorf("%s: %v", r.Name, r.Failures)
		}
	}
	failed := 0
	for _, r := range backendtest.Check(offByOne{New()}) {
		if len(r.Failures) > 0 {
			failed++
		}
	}
	if failed < len(res)/2 {
		t.Errorf("only %d of %d cases failed on a backend that reads every result wrong", failed, len(res))
	}
}
