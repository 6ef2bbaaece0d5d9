package cpu

import (
	"testing"

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
