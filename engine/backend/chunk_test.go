package backend_test

import (
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
)

// chooser is a backend with its own prefill chunk.
type chooser struct {
	backend.Backend
	n int
}

func (c chooser) PrefillChunk() int { return c.n }

// TestDefaultChunk: a backend's own chunk where it names one, else 512.
func TestDefaultChunk(t *testing.T) {
	be := cpu.New()
	if got := backend.DefaultChunk(be); got != 512 {
		t.Errorf("cpu: chunk %d, want 512", got)
	}
	if got := backend.DefaultChunk(chooser{be, 4096}); got != 4096 {
		t.Errorf("a backend choosing 4096: chunk %d", got)
	}
	if got := backend.DefaultChunk(chooser{be, 0}); got != 512 {
		t.Errorf("a backend choosing 0: chunk %d, want 512", got)
	}
}
