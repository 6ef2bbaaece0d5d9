//go:build unix

package checkpoint

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// filesMapped: mapFile's data is a memory map.
const filesMapped = true

// mapFile maps a whole file read-only and shared, so the page cache backs
// the weights and nothing is copied into the Go heap. id identifies the
// version of the file that was mapped.
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
	id = newFileID(path, st)
	size := st.Size()
	if size == 0 {
		return []byte{}, id, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, nil, fmt.Errorf("checkpoint: %s: %d bytes do not fit in memory", path, size)
	}
	data, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("checkpoint: mmap %s: %w", path, err)
	}
	return data, id, func() error { return unix.Munmap(data) }, nil
}
