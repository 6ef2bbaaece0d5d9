package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Info summarises a session for listing.
type Info struct {
	Name        string
	Turns       int       // turn snapshots kept
	Tokens      int       // tokens in the latest snapshot
	Bytes       int64     // all its snapshot files
	Modified    time.Time // of the latest snapshot
	Fingerprint Fingerprint
	Damaged     int   // snapshots found damaged (List reads headers only; Show and Verify every byte)
	Err         error // the latest snapshot is damaged: why
}

// Details is a session with each of its snapshots, oldest first.
type Details struct {
	Info
	Snapshots []SnapshotInfo
}

// List describes every session of the store, sorted by name.
func (s *Store) List() ([]Info, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	var out []Info
	for _, e := range entries {
		if !e.IsDir() || ValidateName(e.Name()) != nil {
			continue
		}
		d, err := s.show(e.Name(), false)
		if err != nil {
			return nil, err
		}
		if d.Turns > 0 {
			out = append(out, d.Info)
		}
	}
	return out, nil
}

// Show describes a session and each of its snapshots, reading every byte
// of them: a damaged snapshot has its Err set.
func (s *Store) Show(name string) (Details, error) {
	if err := ValidateName(name); err != nil {
		return Details{}, err
	}
	d, err := s.show(name, true)
	if err == nil && d.Turns == 0 {
		err = noSession(name, s.sessionDir(name))
	}
	return d, err
}

// show describes a session from its snapshots' headers and, with full,
// checks every byte of them.
func (s *Store) show(name string, full bool) (Details, error) {
	turns, err := s.turns(name)
	if err != nil {
		return Details{}, err
	}
	d := Details{Info: Info{Name: name}}
	for _, t := range turns {
		info, _, err := readInfo(t.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Details{}, err
		}
		if full && info.Err == nil {
			if err := verifyFile(t.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				info.Err = err
			}
		}
		if info.Err != nil {
			d.Damaged++
		}
		info.Turn = t.turn
		d.Snapshots = append(d.Snapshots, info)
		d.Bytes += info.Bytes
	}
	d.Turns = len(d.Snapshots)
	if d.Turns > 0 {
		last := d.Snapshots[d.Turns-1]
		d.Tokens, d.Modified, d.Fingerprint, d.Err = last.Tokens, last.Modified, last.Fingerprint, last.Err
	}
	return d, nil
}

// Prefixes lists the anonymous prefix snapshots of every model, least
// recently used first.
func (s *Store) Prefixes() ([]SnapshotInfo, error) {
	models, err := os.ReadDir(filepath.Join(s.Dir, prefixDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	var out []SnapshotInfo
	for _, m := range models {
		if !m.IsDir() {
			continue
		}
		files, err := s.prefixFiles(filepath.Join(s.Dir, prefixDir, m.Name()))
		if err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
		for _, f := range files {
			info, _, err := readInfo(f.File)
			if err == nil {
				out = append(out, info)
			}
		}
	}
	slices.SortFunc(out, func(a, b SnapshotInfo) int { return a.Modified.Compare(b.Modified) })
	return out, nil
}

// Remove deletes a session, waiting (up to the lock timeout) for a writer
// that holds it.
func (s *Store) Remove(name string) error {
	ss, err := s.Lock(name)
	if err != nil {
		return err
	}
	if _, err := os.Stat(s.sessionDir(name)); errors.Is(err, fs.ErrNotExist) {
		ss.lock.releaseAndRemove()
		return noSession(name, s.sessionDir(name))
	}
	if err := os.RemoveAll(s.sessionDir(name)); err != nil {
		ss.Unlock()
		return fmt.Errorf("session: removing session %q: %w", name, err)
	}
	return ss.lock.releaseAndRemove()
}

// GCReport says what GC deleted.
type GCReport struct {
	Sessions  []string // sessions removed
	Prefixes  int      // prefix snapshots removed
	Freed     int64    // bytes of snapshots removed
	Kept      int64    // bytes of snapshots left
	Busy      []string // sessions skipped because a writer held them
	TempFiles int      // leftovers of killed writers removed
	TempBytes int64    // their size
}

func (r *GCReport) addTemps(n int, bytes int64) {
	r.TempFiles += n
	r.TempBytes += bytes
}

// GC deletes, oldest first, whole sessions (by their latest snapshot) and
// prefix snapshots (by last use) older than maxAge, then more until at most
// maxBytes of snapshots are left; zero disables either limit. A session is
// removed whole, never trimmed: dropping its latest turns would make it
// silently continue from an older one. Sessions held by a writer are left
// alone. GC also removes leftovers of killed writers: temporary files, and
// lock files and folders of sessions without snapshots.
func (s *Store) GC(maxAge time.Duration, maxBytes int64) (GCReport, error) {
	var rep GCReport
	type unit struct {
		session string // or "" for a prefix file
		file    string
		bytes   int64
		mod     time.Time
	}
	var units []unit
	names, err := s.sessionNames()
	if err != nil {
		return rep, err
	}
	for _, name := range names {
		d, err := s.show(name, false)
		if err != nil {
			return rep, err
		}
		s.sweep(name, d.Turns == 0, &rep)
		if d.Turns > 0 {
			units = append(units, unit{session: name, bytes: d.Bytes, mod: d.Modified})
		}
	}
	prefixes, err := os.ReadDir(filepath.Join(s.Dir, prefixDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("session: %w", err)
	}
	for _, m := range prefixes {
		dir := filepath.Join(s.Dir, prefixDir, m.Name())
		rep.addTemps(removeTemps(dir, false))
		files, _ := s.prefixFiles(dir)
		for _, f := range files {
			units = append(units, unit{file: f.File, bytes: f.Bytes, mod: f.Modified})
		}
	}
	slices.SortFunc(units, func(a, b unit) int { return a.mod.Compare(b.mod) })
	for _, u := range units {
		rep.Kept += u.bytes
	}
	now := time.Now()
	for _, u := range units {
		old := maxAge > 0 && now.Sub(u.mod) > maxAge
		big := maxBytes > 0 && rep.Kept > maxBytes
		if !old && !big {
			continue
		}
		if u.session == "" {
			if os.Remove(u.file) == nil {
				rep.Prefixes++
				rep.Freed, rep.Kept = rep.Freed+u.bytes, rep.Kept-u.bytes
			}
			continue
		}
		l, err := acquireLock(s.lockPath(u.session), u.session, -1)
		if err != nil {
			rep.Busy = append(rep.Busy, u.session)
			continue
		}
		if err := os.RemoveAll(s.sessionDir(u.session)); err != nil {
			l.release()
			return rep, fmt.Errorf("session: removing session %q: %w", u.session, err)
		}
		l.releaseAndRemove()
		rep.Sessions = append(rep.Sessions, u.session)
		rep.Freed, rep.Kept = rep.Freed+u.bytes, rep.Kept-u.bytes
	}
	return rep, nil
}

// sessionNames lists the session folders and the lock files of the store.
func (s *Store) sessionNames() ([]string, error) {
	seen := map[string]bool{}
	dirs, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	for _, e := range dirs {
		if e.IsDir() && ValidateName(e.Name()) == nil {
			seen[e.Name()] = true
		}
	}
	locks, _ := os.ReadDir(filepath.Join(s.Dir, locksDir))
	for _, e := range locks {
		if name, ok := strings.CutSuffix(e.Name(), ".lock"); ok && ValidateName(name) == nil {
			seen[name] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// sweep removes, if no writer holds the session, its temporary files and,
// when it has no snapshot, its folder and lock file.
func (s *Store) sweep(name string, empty bool, rep *GCReport) {
	l, err := acquireLock(s.lockPath(name), name, -1)
	if err != nil {
		return
	}
	rep.addTemps(removeTemps(s.sessionDir(name), true))
	if !empty {
		l.release()
		return
	}
	if turns, err := s.turns(name); err == nil && len(turns) == 0 {
		os.RemoveAll(s.sessionDir(name))
		l.releaseAndRemove()
		return
	}
	l.release()
}
