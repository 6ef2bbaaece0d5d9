package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Fork starts session to from the latest snapshot of session from (see
// Session.ForkFrom).
func (s *Store) Fork(from, to string) (SnapshotInfo, error) {
	ss, err := s.Lock(to)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer ss.Unlock()
	return ss.ForkFrom(from)
}

// ForkFrom gives this session, which must have no turns yet, the kept turn
// snapshots of session from (the latest checked) and its conversation. The file is hard-linked (snapshots
// are never modified in place, so the two sessions can share it) or,
// where links are not possible, copied atomically. Its header is checked:
// a damaged snapshot or one from another model is refused.
func (ss *Session) ForkFrom(from string) (SnapshotInfo, error) {
	s := ss.store
	if err := ss.held(); err != nil {
		return SnapshotInfo{}, err
	}
	if err := s.needModel(); err != nil {
		return SnapshotInfo{}, err
	}
	if err := ValidateName(from); err != nil {
		return SnapshotInfo{}, err
	}
	if from == ss.name {
		return SnapshotInfo{}, fmt.Errorf("session: cannot fork session %q from itself", from)
	}
	if own, err := s.turns(ss.name); err != nil {
		return SnapshotInfo{}, err
	} else if len(own) > 0 {
		return SnapshotInfo{}, fmt.Errorf("session: cannot fork %q into session %q: it already exists (remove it first)", from, ss.name)
	}
	for range 3 { // the source's latest turn can vanish under its own retention
		turns, err := s.turns(from)
		if err != nil {
			return SnapshotInfo{}, err
		}
		if len(turns) == 0 {
			break
		}
		src := turns[len(turns)-1].path
		info, _, err := readInfo(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return SnapshotInfo{}, err
		}
		if info.Err != nil {
			return SnapshotInfo{}, info.Err
		}
		if info.Fingerprint != s.fp {
			return SnapshotInfo{}, &SnapshotError{File: src, Reason: ErrOtherModel,
				Detail: fmt.Sprintf("its model fingerprint is %s, this model's is %s", info.Fingerprint.Short(), s.fp.Short())}
		}
		// The history first, with where it came from: a fork stopped after
		// it (a kill before the snapshots are linked) is recognised as done
		// when its request runs again (the executor's alreadyForked), and a
		// snapshot missing only costs a prefill. Snapshots first and then a
		// kill would leave a session with turns and no record of the fork,
		// which the request run again could only refuse.
		conv, err := s.Conversation(from)
		if err != nil {
			return SnapshotInfo{}, err
		}
		if conv == nil {
			conv = &Conversation{}
		}
		conv.ForkedFrom, conv.ForkedAt = from, len(conv.Turns)
		if err := ss.SaveConversation(conv); err != nil {
			return SnapshotInfo{}, err
		}
		dst := s.turnPath(ss.name, len(turns))
		err = forkLink(src, dst)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("session: forking %q into %q: %w", from, ss.name, err)
		}
		info.File, info.Turn = dst, len(turns)
		// the earlier turns too: a new message that diverges from the
		// latest turn can still resume from one of them
		for i, older := range turns[:len(turns)-1] {
			if err := forkLink(older.path, s.turnPath(ss.name, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return SnapshotInfo{}, fmt.Errorf("session: forking %q into %q: %w", from, ss.name, err)
			}
		}
		return info, nil
	}
	return SnapshotInfo{}, noSession(from, s.sessionDir(from))
}

// forkLink is linkOrCopy; tests stop a fork there.
var forkLink = linkOrCopy

// linkOrCopy makes dst a hard link to src, or an atomic copy of it.
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil {
		return syncDir(filepath.Dir(dst))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = writeAtomic(dst, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
	return err
}
