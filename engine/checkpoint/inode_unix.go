//go:build unix

package checkpoint

import (
	"os"
	"syscall"
)

// inodeOf is the file's inode and device numbers.
func inodeOf(st os.FileInfo) (inode, device uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Ino), uint64(s.Dev)
	}
	return 0, 0
}
