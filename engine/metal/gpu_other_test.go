//go:build !linux && !darwin

package metal_test

import (
	"testing"

	"petal/engine/metal"
)

// openBackend skips: the Metal backend runs on macOS, and through the CUDA
// dialect on Linux.
func openBackend(t *testing.T, o metal.Options) *metal.Backend {
	t.Skip("the Metal backend runs on macOS (Metal) or Linux (the CUDA dialect on an NVIDIA GPU)")
	return nil
}
