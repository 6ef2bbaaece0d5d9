//go:build unix

package session

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// canLock: flock is available.
const canLock = true

// tryLock takes an exclusive flock on f without waiting. busy reports that
// another open file (in this or another process) holds it.
func tryLock(f *os.File) (busy bool, err error) {
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// syncDir makes a rename or link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
