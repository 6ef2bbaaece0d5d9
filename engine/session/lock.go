package session

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// fileLock is an exclusive lock held on a lock file.
type fileLock struct {
	path string
	f    *os.File
}

// acquireLock takes the lock file at path, polling until timeout (a
// negative timeout: one try). The file is created if needed; after the lock
// is taken, the path must still name the locked file, since a remover
// deletes lock files while holding them: otherwise it starts over on the
// new file. session names the session in the error.
func acquireLock(path, session string, timeout time.Duration) (*fileLock, error) {
	start := time.Now()
	wait := time.Millisecond
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("session: lock %s: %w", path, err)
		}
		busy, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("session: lock %s: %w", path, err)
		}
		if !busy {
			if sameFile(f, path) {
				// For the error message of whoever waits next.
				f.Truncate(0)
				f.WriteAt([]byte("pid "+strconv.Itoa(os.Getpid())+"\n"), 0)
				return &fileLock{path: path, f: f}, nil
			}
			f.Close()
			continue
		}
		f.Close()
		waited := time.Since(start)
		if timeout < 0 || waited >= timeout {
			holder, _ := os.ReadFile(path)
			return nil, &LockError{Session: session, LockFile: path, Waited: waited, Holder: string(bytes.TrimSpace(holder))}
		}
		time.Sleep(min(wait, timeout-waited))
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// sameFile reports whether path still names the open file f.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// release drops the lock.
func (l *fileLock) release() error { return l.f.Close() }

// releaseAndRemove deletes the lock file while still holding it, so that a
// waiter that gets it afterwards notices and retries on a fresh file.
func (l *fileLock) releaseAndRemove() error {
	err := os.Remove(l.path)
	cerr := l.f.Close()
	if err != nil {
		err = os.Remove(l.path) // where an open file cannot be removed
	}
	if err == nil {
		err = cerr
	}
	return err
}
