//go:build !darwin

package metal

import "petal/engine/metal/device"

// Open fails: Metal exists only on macOS (device.ErrUnsupported).
func Open(o Options) (*Backend, error) {
	_, err := device.Open()
	return nil, err
}
