package session

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tempPrefix starts the name of every file being written; such a file is
// never a snapshot, and one left by a killed writer is removed later.
const tempPrefix = ".tmp-"

func isTemp(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// tempGrace is how old an unlocked temporary file must be to be taken for
// a leftover: its writer creates it and locks it a moment later.
const tempGrace = 2 * time.Second

// removeTemps deletes the temporary files in dir whose writer is gone and
// returns how many went and their size. With all, the caller holds the
// lock of every writer of dir (a session's lock), so all of them go;
// otherwise those no one holds a lock on and older than tempGrace (where
// files cannot be locked, older than staleTemp).
func removeTemps(dir string, all bool) (n int, bytes int64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range entries {
		if !isTemp(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil || !all && !abandoned(path, time.Since(info.ModTime())) {
			continue
		}
		if os.Remove(path) == nil {
			n++
			bytes += info.Size()
		}
	}
	return n, bytes
}

// abandoned reports whether the temporary file at path, last written age
// ago, belongs to no live writer.
func abandoned(path string, age time.Duration) bool {
	if !canLock {
		return age > staleTemp
	}
	if age < tempGrace {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	busy, err := tryLock(f)
	return err == nil && !busy
}

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
	// Held until the file is closed: a temporary file nobody holds is the
	// leftover of a writer that is gone (see removeTemps).
	if _, err := tryLock(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return 0, fmt.Errorf("session: lock %s: %w", tmp, err)
	}
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
