package session

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix starts the name of every file being written; such a file is
// never a snapshot, and one left by a killed writer is removed later.
const tempPrefix = ".tmp-"

func isTemp(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// writeAtomic writes a file through write into a temporary file in the
// target's folder, syncs it, renames it over path and syncs the folder: a
// reader (or a crash) sees the old file or the whole new one, never a part.
func writeAtomic(path string, write func(io.Writer) error) (size int64, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+filepath.Base(path)+"-*")
	if err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		return 0, err
	}
	if err = f.Sync(); err != nil {
		return 0, fmt.Errorf("session: sync %s: %w", tmp, err)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("session: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("session: %w", err)
	}
	if err = syncDir(dir); err != nil {
		return 0, fmt.Errorf("session: sync folder %s: %w", dir, err)
	}
	return st.Size(), nil
}
