//go:build darwin

package metal_test

import (
	"errors"
	"testing"

	"petal/engine/metal"
	"petal/engine/metal/device"
)

// openBackend is the Metal backend on the system default device; without
// one the test skips.
func openBackend(t *testing.T, o metal.Options) *metal.Backend {
	t.Helper()
	b, err := metal.Open(o)
	if err != nil {
		if errors.Is(err, device.ErrUnsupported) {
			t.Skipf("no Metal device: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("the Metal backend on %s", b.Device())
	return b
}
