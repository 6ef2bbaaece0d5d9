//go:build !unix

package checkpoint

import (
	"fmt"
	"os"
)

// mapFile reads the whole file where no memory map is available.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	return data, func() error { return nil }, nil
}
