package session

import (
	"bytes"
	"errors"
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
//
// Waiting is fair: a waiter first takes the gate file next to the lock
// (path + ".wait") and holds it while it polls the lock, and every writer
// passes the gate before taking the lock. A holder that releases the lock
// and comes straight back for it (the next job of a batch) therefore queues
// behind the waiter instead of taking the lock again before the waiter's
// next poll.
func acquireLock(path, session string, timeout time.Duration) (*fileLock, error) {
	start := time.Now()
	gate, err := pollLock(gatePath(path), start, timeout, false)
	if err != nil {
		return nil, lockErr(err, path, session, start)
	}
	defer gate.release()
	l, err := pollLock(path, start, timeout, true)
	if err != nil {
		return nil, lockErr(err, path, session, start)
	}
	// For the error message of whoever waits next.
	l.f.Truncate(0)
	l.f.WriteAt([]byte("pid "+strconv.Itoa(os.Getpid())+"\n"), 0)
	return l, nil
}

func gatePath(lockPath string) string { return lockPath + ".wait" }

// errBusy is pollLock's timeout.
var errBusy = errors.New("busy")

// pollLock takes an exclusive flock on the file at path, polling until
// timeout has passed since start. With checkPath, the lock only counts if
// path still names the locked file afterwards (see acquireLock).
func pollLock(path string, start time.Time, timeout time.Duration, checkPath bool) (*fileLock, error) {
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
			if !checkPath || sameFile(f, path) {
				return &fileLock{path: path, f: f}, nil
			}
			f.Close()
			continue
		}
		f.Close()
		waited := time.Since(start)
		if timeout < 0 || waited >= timeout {
			return nil, errBusy
		}
		time.Sleep(min(wait, timeout-waited))
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// lockErr turns pollLock's timeout into a *LockError naming the session's
// lock file and its holder.
func lockErr(err error, path, session string, start time.Time) error {
	if !errors.Is(err, errBusy) {
		return err
	}
	holder, _ := os.ReadFile(path)
	return &LockError{Session: session, LockFile: path, Waited: time.Since(start), Holder: string(bytes.TrimSpace(holder))}
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
	os.Remove(gatePath(l.path)) // a waiter holding it only loses its place
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
