//go:build linux || darwin

package synthwrite

import (
	"path/filepath"
	"syscall"
)

// freeBytes is the space an unprivileged user may still write under dir;
// ok is false where it cannot be told.
func freeBytes(dir string) (int64, bool) {
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil {
			return int64(st.Bavail) * int64(st.Bsize), true
		}
		// the folder may not exist yet: ask about the nearest one that does
		up := filepath.Dir(dir)
		if up == dir {
			return 0, false
		}
		dir = up
	}
}
