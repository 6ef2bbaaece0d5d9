package session

import (
	"errors"
	"fmt"
	"time"
)

// Reasons a snapshot is refused. A *SnapshotError wraps one of them, so
// errors.Is(err, ErrOtherModel) tells a model switch from damage.
var (
	ErrCorrupt    = errors.New("corrupt")                          // checksum mismatch or impossible structure
	ErrTruncated  = errors.New("truncated")                        // shorter (or longer) than its header says
	ErrVersion    = errors.New("unknown format version")           // written by another petal
	ErrOtherModel = errors.New("written for a different model")    // fingerprint mismatch
	ErrOtherKV    = errors.New("of another KV cache element type") // a bf16 state where f32 is kept, or the reverse
)

// ErrNoSession is returned (wrapped, with the name) when a session has no
// snapshot at all.
var ErrNoSession = errors.New("no such session")

// SnapshotError says which snapshot file was refused and why. Such a file is
// never used; a caller that was only looking for a reusable prefix can
// prefill from scratch and report Error() as a warning.
type SnapshotError struct {
	File   string // path, or "" when decoding a stream
	Reason error  // ErrCorrupt, ErrTruncated, ErrVersion or ErrOtherModel
	Detail string
}

func (e *SnapshotError) Error() string {
	file := e.File
	if file == "" {
		file = "(stream)"
	}
	return fmt.Sprintf("session: snapshot %s: %v: %s", file, e.Reason, e.Detail)
}

func (e *SnapshotError) Unwrap() error { return e.Reason }

func snapErr(reason error, format string, args ...any) *SnapshotError {
	return &SnapshotError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// LockError reports a session that another writer held for longer than the
// lock timeout.
type LockError struct {
	Session  string
	LockFile string
	Waited   time.Duration
	Holder   string // what the holder wrote into the lock file (its pid), if readable
}

func (e *LockError) Error() string {
	holder := ""
	if e.Holder != "" {
		holder = " (held by " + e.Holder + ")"
	}
	return fmt.Sprintf("session: session %q is locked by another writer%s: gave up after %v waiting for lock file %s",
		e.Session, holder, e.Waited.Round(time.Millisecond), e.LockFile)
}
