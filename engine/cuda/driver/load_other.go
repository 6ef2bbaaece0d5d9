//go:build !linux

package driver

// openLibrary fails: petal reaches CUDA only on Linux.
func openLibrary([]symbol) error { return ErrUnsupportedOS }
