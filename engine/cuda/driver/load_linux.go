//go:build linux

package driver

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// libraryNames are tried in order: the versioned name is the one the driver
// package installs; the bare one is a development symlink.
var libraryNames = []string{"libcuda.so.1", "libcuda.so"}

// openLibrary loads libcuda with purego (no cgo) and binds syms; a missing
// entry point is an error naming it (a driver too old for petal).
func openLibrary(syms []symbol) error {
	var h uintptr
	var firstErr error
	for _, name := range libraryNames {
		var err error
		if h, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			break
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if h == 0 {
		return fmt.Errorf("%w: %v", ErrNoDriver, firstErr)
	}
	for _, s := range syms {
		var addr uintptr
		for _, n := range s.names {
			if a, err := purego.Dlsym(h, n); err == nil && a != 0 {
				addr = a
				break
			}
		}
		if addr == 0 {
			return fmt.Errorf("cuda: libcuda has no %s: the NVIDIA driver is too old for petal (CUDA 12 or newer needed)", s.names[0])
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return nil
}
