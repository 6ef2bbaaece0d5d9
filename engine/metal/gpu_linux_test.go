//go:build linux

package metal_test

import (
	"os"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/metal"
	"petal/engine/metal/cudarun"
)

// openBackend is the Metal backend over the CUDA-dialect dispatcher of
// engine/metal/cudarun on GPU 0: the same lowering, kernels, parameter
// structs and grids a Mac runs, on an NVIDIA GPU. Without one the test
// skips; PETAL_CUDA_REQUIRE=1 turns that skip into a failure.
func openBackend(t *testing.T, o metal.Options) *metal.Backend {
	t.Helper()
	d, err := cudarun.NewDispatcher(0)
	if err != nil {
		if driver.Unavailable(err) && os.Getenv("PETAL_CUDA_REQUIRE") == "" {
			t.Skipf("no CUDA GPU here: the Metal backend is not run through the CUDA dialect (%v)", err)
		}
		t.Fatal(err)
	}
	b, err := metal.New(d, o)
	if err != nil {
		d.Close()
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
