package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"petal/engine/backend"
)

// Defaults for StoreOptions' zero values.
const (
	DefaultRetention       = 8
	DefaultPrefixRetention = 16
	DefaultLockTimeout     = 30 * time.Second
)

// StoreOptions are the settings of a Store; zero values take the defaults.
type StoreOptions struct {
	Retention       int           // turn snapshots kept per session (DefaultRetention)
	PrefixRetention int           // anonymous prefix snapshots kept per model (DefaultPrefixRetention)
	LockTimeout     time.Duration // how long a writer waits for a session held by another (DefaultLockTimeout); negative: fail at once
	// KV is the element type of the KV caches of the states this run
	// restores (0: f32). A snapshot of another type is not restored: a
	// prefix is prefilled instead, a session's turn is an error.
	KV backend.DType
}

// kvType is the KV element type of the states this store restores.
func (s *Store) kvType() backend.DType {
	if s.opts.KV == 0 {
		return backend.F32
	}
	return s.opts.KV
}

// Store is a folder of sessions and anonymous prefix snapshots:
//
//	<dir>/<session>/turn-00000001.snap   one snapshot per saved turn
//	<dir>/<session>/conversation.json    its messages and turn records
//	<dir>/.locks/<session>.lock          flock'ed while the session is written
//	<dir>/.locks/<session>.lock.wait     flock'ed by the writer waiting for it
//	<dir>/.prefix/<model>/prefix-<tokens hash>.snap
//
// Its methods may be called from several goroutines and processes at once.
type Store struct {
	Dir  string
	fp   Fingerprint
	opts StoreOptions
}

// DefaultDir is <user cache dir>/petal/sessions.
func DefaultDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("session: no default store folder: %w", err)
	}
	return filepath.Join(base, "petal", "sessions"), nil
}

// OpenStore opens (creating it if needed) the store in dir, or DefaultDir
// when dir is empty, for the model with fingerprint fp. A store opened with
// the zero fingerprint serves List, Show, Remove and GC only.
func OpenStore(dir string, fp Fingerprint, opts StoreOptions) (*Store, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.PrefixRetention <= 0 {
		opts.PrefixRetention = DefaultPrefixRetention
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if err := os.MkdirAll(filepath.Join(dir, locksDir), 0o755); err != nil {
		return nil, fmt.Errorf("session: store: %w", err)
	}
	return &Store{Dir: dir, fp: fp, opts: opts}, nil
}

// Fingerprint is the model the store reads and writes snapshots for.
func (s *Store) Fingerprint() Fingerprint { return s.fp }

const (
	locksDir   = ".locks"
	prefixDir  = ".prefix"
	turnPrefix = "turn-"
	snapSuffix = ".snap"
	maxNameLen = 128
)

// ValidateName checks a session name: 1 to 128 ASCII letters, digits, '.',
// '_' or '-', not starting with '.' (so never a path, a hidden file or "..").
func ValidateName(name string) error {
	ok := name != "" && len(name) <= maxNameLen && name[0] != '.'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("session: invalid session name %q: use 1 to %d letters, digits, '.', '_' or '-', not starting with '.'", name, maxNameLen)
	}
	return nil
}

func (s *Store) sessionDir(name string) string { return filepath.Join(s.Dir, name) }
func (s *Store) lockPath(name string) string {
	return filepath.Join(s.Dir, locksDir, name+".lock")
}
func (s *Store) turnPath(name string, turn int) string {
	return filepath.Join(s.Dir, name, fmt.Sprintf("%s%08d%s", turnPrefix, turn, snapSuffix))
}

// needModel refuses state operations on a store opened without a model.
func (s *Store) needModel() error {
	if s.fp.IsZero() {
		return errors.New("session: the store was opened without a model fingerprint")
	}
	return nil
}

// turnFile is one turn snapshot of a session.
type turnFile struct {
	turn int
	path string
}

// turns lists a session's turn snapshots, oldest first; temporary files and
// anything else in the folder are ignored.
func (s *Store) turns(name string) ([]turnFile, error) {
	dir := s.sessionDir(name)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	var out []turnFile
	for _, e := range entries {
		if n, ok := parseTurn(e.Name()); ok && e.Type().IsRegular() {
			out = append(out, turnFile{n, filepath.Join(dir, e.Name())})
		}
	}
	slices.SortFunc(out, func(a, b turnFile) int { return a.turn - b.turn })
	return out, nil
}

// parseTurn reads the number of a "turn-00000012.snap" name.
func parseTurn(file string) (int, bool) {
	digits, ok := strings.CutPrefix(file, turnPrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, snapSuffix); !ok || digits == "" {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n > 0
}

func noSession(name, dir string) error {
	return fmt.Errorf("session: %w %q (no snapshot in %s)", ErrNoSession, name, dir)
}

// isProperPrefix reports whether p is a non-empty prefix of prompt that
// leaves at least one prompt token to run: a snapshot holds no logits, so
// the last prompt token must be run after restoring to get them.
func isProperPrefix(p, prompt []int32) bool {
	return len(p) > 0 && len(p) < len(prompt) && slices.Equal(p, prompt[:len(p)])
}
