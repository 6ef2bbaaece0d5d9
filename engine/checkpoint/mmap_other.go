//go:build !unix

package checkpoint

import (
	"fmt"
	"io"
	"os"
)

// filesMapped: mapFile's data is a copy in the Go heap.
const filesMapped = false

// mapFile reads the whole file where no memory map is available.
func mapFile(path string) (data []byte, id *fileID, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	data, err = io.ReadAll(f)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	return data, newFileID(path, st), func() error { return nil }, nil
}
