package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"petal/engine/backend"
	"petal/engine/model"
)

// Restored is a state read back from a snapshot.
type Restored struct {
	Data     model.StateData
	Snapshot SnapshotInfo // where it came from (File is "" for the in-memory prefix cache)
	Skipped  []error      // better candidates passed over: *SnapshotError values, for a warnings field
}

// Latest reads the newest turn snapshot of a session. A session without
// snapshots gives an error wrapping ErrNoSession; a newest snapshot that is
// damaged or from another model gives its *SnapshotError: an explicitly
// named session never silently falls back to an older turn, which would
// lose the turns after it.
func (s *Store) Latest(name string) (Restored, error) {
	if err := s.needModel(); err != nil {
		return Restored{}, err
	}
	if err := ValidateName(name); err != nil {
		return Restored{}, err
	}
	for range 3 { // the newest file can vanish under a concurrent Remove or GC
		turns, err := s.turns(name)
		if err != nil {
			return Restored{}, err
		}
		if len(turns) == 0 {
			break
		}
		last := turns[len(turns)-1]
		r, err := s.read(last.path, last.turn)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return r, err
	}
	return Restored{}, noSession(name, s.sessionDir(name))
}

// LongestPrefixOf reads the longest kept turn snapshot of a session whose
// tokens are a proper prefix of prompt (the newest on ties), for a request
// that resends the whole history, possibly diverging from the last turn.
// ok is false when no snapshot fits. A named session never silently
// continues from an older snapshot than the one it would restore: when that
// one is damaged or from another model, or when a snapshot newer than the
// best intact fit has a damaged header (it may be the one needed), the
// result is that file's *SnapshotError. Damage to snapshots the prompt does
// not need is listed in Skipped, for warnings. A session without snapshots
// gives an error wrapping ErrNoSession.
func (s *Store) LongestPrefixOf(name string, prompt []int32) (r Restored, ok bool, err error) {
	if err := s.needModel(); err != nil {
		return Restored{}, false, err
	}
	if err := ValidateName(name); err != nil {
		return Restored{}, false, err
	}
	turns, err := s.turns(name)
	if err != nil {
		return Restored{}, false, err
	}
	if len(turns) == 0 {
		return Restored{}, false, noSession(name, s.sessionDir(name))
	}
	var cands []candidate
	for i := len(turns) - 1; i >= 0; i-- {
		cands = append(cands, candidate{path: turns[i].path, turn: turns[i].turn})
	}
	return s.longest(cands, prompt, 0, true)
}

// candidate is a snapshot that may hold a prefix of a prompt.
type candidate struct {
	path string
	turn int
}

// longest reads the headers of cands (newest first), then the longest one
// whose tokens are a proper prefix of prompt and longer than minTokens.
// Refused snapshots are listed in Skipped; with strict, one that would (or,
// with a damaged header newer than the fit, might) have been restored is an
// error instead (see LongestPrefixOf).
func (s *Store) longest(cands []candidate, prompt []int32, minTokens int, strict bool) (r Restored, ok bool, err error) {
	type fit struct {
		candidate
		tokens int
		fp     Fingerprint
		kv     backend.DType
	}
	var fits, foreign []fit
	type damaged struct {
		candidate
		err error
	}
	var unreadable []damaged
	for _, c := range cands {
		info, tokens, err := readInfo(c.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed since it was listed
		case err != nil:
			return r, false, err
		case info.Err != nil:
			unreadable = append(unreadable, damaged{c, info.Err})
		case info.Fingerprint != s.fp || info.KV != s.kvType():
			f := fit{c, -1, info.Fingerprint, info.KV}
			if isProperPrefix(tokens, prompt) {
				f.tokens = len(tokens)
			}
			foreign = append(foreign, f)
		case len(tokens) > minTokens && isProperPrefix(tokens, prompt):
			fits = append(fits, fit{c, len(tokens), info.Fingerprint, info.KV})
		}
	}
	slices.SortStableFunc(fits, func(a, b fit) int { return b.tokens - a.tokens })
	var chosen *fit
	for i, f := range fits {
		got, err := s.read(f.path, f.turn)
		var se *SnapshotError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.As(err, &se) && strict:
			return Restored{}, false, err // the snapshot to restore is damaged
		case errors.As(err, &se):
			r.Skipped = append(r.Skipped, err)
			continue
		case err != nil:
			return r, false, err
		}
		r.Data, r.Snapshot, chosen = got.Data, got.Snapshot, &fits[i]
		break
	}
	for _, d := range unreadable {
		if strict && (chosen == nil || d.turn > chosen.turn) {
			return Restored{}, false, d.err
		}
		r.Skipped = append(r.Skipped, d.err)
	}
	for _, f := range foreign {
		err := &SnapshotError{File: f.path, Reason: ErrOtherModel,
			Detail: fmt.Sprintf("its model fingerprint is %s, this model's is %s", f.fp.Short(), s.fp.Short())}
		if f.fp == s.fp {
			err = &SnapshotError{File: f.path, Reason: ErrOtherKV,
				Detail: fmt.Sprintf("its KV cache is %s, this run keeps %s (the kv= option of --backend); a state is restored only into the element type it was computed in", f.kv, s.kvType())}
		}
		if strict && f.tokens > 0 && (chosen == nil || f.tokens > chosen.tokens) {
			return Restored{}, false, err
		}
		r.Skipped = append(r.Skipped, err)
	}
	return r, chosen != nil, nil
}

// read decodes one snapshot file for this store's model.
func (s *Store) read(path string, turn int) (Restored, error) {
	f, size, err := openSized(path)
	if err != nil {
		return Restored{}, err
	}
	defer f.Close()
	info := SnapshotInfo{File: path, Turn: turn, Bytes: size, Fingerprint: s.fp}
	if st, err := f.Stat(); err == nil {
		info.Modified = st.ModTime()
	}
	d, err := Decode(f, size, s.fp)
	if err != nil {
		return Restored{}, nameFile(err, path)
	}
	info.Tokens = len(d.Tokens)
	return Restored{Data: d, Snapshot: info}, nil
}

// Session is a session locked for writing. Hold it across a whole request
// (restore, generate, save) so that two processes never interleave turns
// of one session; save through it, not through Store.SaveTurn, which would
// wait for this very lock. A Session belongs to one goroutine at a time.
type Session struct {
	store *Store
	name  string
	lock  *fileLock
}

// Lock takes a session's lock, waiting up to the store's lock timeout; a
// session still held then gives a *LockError naming the lock file.
func (s *Store) Lock(name string) (*Session, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	l, err := acquireLock(s.lockPath(name), name, s.opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	return &Session{store: s, name: name, lock: l}, nil
}

// Name is the session's name.
func (ss *Session) Name() string { return ss.name }

// Unlock releases the session.
func (ss *Session) Unlock() error {
	if ss.lock == nil {
		return nil
	}
	err := ss.lock.release()
	ss.lock = nil
	return err
}

// SaveTurn locks a session, saves d as its next turn and unlocks it.
func (s *Store) SaveTurn(name string, d model.StateData) (SnapshotInfo, error) {
	ss, err := s.Lock(name)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer ss.Unlock()
	return ss.SaveTurn(d)
}

// SaveTurn writes d atomically as the session's next turn snapshot, then
// deletes the oldest turns beyond the store's retention. d.Tokens must be
// exactly the tokens the state has consumed.
func (ss *Session) SaveTurn(d model.StateData) (SnapshotInfo, error) {
	s := ss.store
	if err := ss.held(); err != nil {
		return SnapshotInfo{}, err
	}
	if err := s.needModel(); err != nil {
		return SnapshotInfo{}, err
	}
	dir := s.sessionDir(ss.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return SnapshotInfo{}, fmt.Errorf("session: %w", err)
	}
	removeTemps(dir, true) // left by writers that died: the lock is ours now
	turns, err := s.turns(ss.name)
	if err != nil {
		return SnapshotInfo{}, err
	}
	next := 1
	if len(turns) > 0 {
		last := turns[len(turns)-1]
		// the same state saved again (a turn run again after a kill): one file
		if info, tokens, err := readInfo(last.path); err == nil && info.Err == nil && info.Fingerprint == s.fp && slices.Equal(tokens, d.Tokens) && verifyFile(last.path) == nil {
			info.Turn = last.turn
			return info, nil
		}
		next = last.turn + 1
	}
	path := s.turnPath(ss.name, next)
	size, err := WriteFile(path, s.fp, d)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("session: saving session %q: %w", ss.name, err)
	}
	for _, old := range turns[:max(0, len(turns)+1-s.opts.Retention)] {
		os.Remove(old.path)
	}
	info := SnapshotInfo{File: path, Turn: next, Tokens: len(d.Tokens), Bytes: size, Fingerprint: s.fp}
	if st, err := os.Stat(path); err == nil {
		info.Modified = st.ModTime()
	}
	return info, nil
}

func (ss *Session) held() error {
	if ss.lock == nil {
		return fmt.Errorf("session: session %q is not locked (already unlocked)", ss.name)
	}
	return nil
}
