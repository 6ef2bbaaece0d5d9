//go:build unix

package checkpoint

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a whole file read-only and shared, so the page cache backs
// the weights and nothing is copied into the Go heap.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("checkpoint: %s: %d bytes do not fit in memory", path, size)
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: mmap %s: %w", path, err)
	}
	return data, func() error { return unix.Munmap(data) }, nil
}
