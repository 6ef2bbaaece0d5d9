//go:build !darwin

package device

// Device is a Metal device; there is none on this system.
type Device struct{ Info Info }

// Info describes a device (see the darwin build).
type Info struct {
	Name        string
	AppleFamily int
	Metal4      bool
}

// Open fails: Metal exists only on macOS.
func Open() (*Device, error) { return nil, ErrUnsupported }

// Close does nothing.
func (d *Device) Close() {}
