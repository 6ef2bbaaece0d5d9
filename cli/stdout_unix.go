//go:build unix

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// descriptorReplaced reports whether f is /dev/null opened read-write: what
// the Go runtime puts on a standard descriptor that was closed when the
// process started. A shell's "> /dev/null" opens it write-only.
func descriptorReplaced(f *os.File) bool {
	var st, null unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || unix.Stat(os.DevNull, &null) != nil {
		return false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != null.Rdev {
		return false
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	return err == nil && flags&unix.O_ACCMODE == unix.O_RDWR
}
