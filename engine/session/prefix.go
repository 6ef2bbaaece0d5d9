package session

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"petal/engine/model"
)

// staleTemp is the age after which a temporary file is taken for the
// leftover of a killed writer where files cannot be locked.
const staleTemp = time.Hour

// prefixFolder holds this model's anonymous prefix snapshots; each model
// has its own, so another model's files are never even read.
func (s *Store) prefixFolder() string {
	return filepath.Join(s.Dir, prefixDir, s.fp.String()[:16])
}

// prefixPath names the snapshot of a token sequence by its hash, so saving
// the same prefix twice keeps one file.
func (s *Store) prefixPath(tokens []int32) string {
	h := sha256.New()
	var b [4]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	return filepath.Join(s.prefixFolder(), "prefix-"+hex.EncodeToString(h.Sum(nil)[:16])+snapSuffix)
}

// SavePrefix keeps d in the on-disk anonymous prefix cache, for requests
// without a session that later resend the same tokens and more. The oldest
// (least recently used) prefix snapshots beyond the store's prefix
// retention are deleted.
func (s *Store) SavePrefix(d model.StateData) (SnapshotInfo, error) {
	if err := s.needModel(); err != nil {
		return SnapshotInfo{}, err
	}
	dir := s.prefixFolder()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return SnapshotInfo{}, err
	}
	path := s.prefixPath(d.Tokens)
	if info, tokens, err := readInfo(path); err == nil && info.Err == nil && info.Fingerprint == s.fp && info.KV == d.KVType() && slices.Equal(tokens, d.Tokens) {
		touch(path)
		return info, nil
	}
	size, err := WriteFile(path, s.fp, d)
	if err != nil {
		return SnapshotInfo{}, err
	}
	removeTemps(dir, false)
	files, _ := s.prefixFiles(dir)
	for _, f := range files[:max(0, len(files)-s.opts.PrefixRetention)] {
		if f.File != path {
			os.Remove(f.File)
		}
	}
	return SnapshotInfo{File: path, Tokens: len(d.Tokens), Bytes: size, Modified: time.Now(), Fingerprint: s.fp}, nil
}

// LongestPrefix reads the longest snapshot of the on-disk prefix cache whose
// tokens are a proper prefix of prompt. ok is false when none fits; damaged
// snapshots are passed over and listed in Skipped.
func (s *Store) LongestPrefix(prompt []int32) (r Restored, ok bool, err error) {
	return s.longestPrefix(prompt, 0)
}

func (s *Store) longestPrefix(prompt []int32, minTokens int) (Restored, bool, error) {
	if err := s.needModel(); err != nil {
		return Restored{}, false, err
	}
	files, err := s.prefixFiles(s.prefixFolder())
	if err != nil {
		return Restored{}, false, err
	}
	var cands []candidate
	for i := len(files) - 1; i >= 0; i-- {
		cands = append(cands, candidate{path: files[i].File})
	}
	r, ok, err := s.longest(cands, prompt, minTokens, false)
	if ok {
		touch(r.Snapshot.File)
	}
	return r, ok, err
}

// prefixFiles lists the prefix snapshots in dir, least recently used first.
func (s *Store) prefixFiles(dir string) ([]SnapshotInfo, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SnapshotInfo
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "prefix-") || !strings.HasSuffix(e.Name(), snapSuffix) {
			continue
		}
		st, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, SnapshotInfo{File: filepath.Join(dir, e.Name()), Bytes: st.Size(), Modified: st.ModTime()})
	}
	slices.SortFunc(out, func(a, b SnapshotInfo) int { return a.Modified.Compare(b.Modified) })
	return out, nil
}

// touch marks a prefix snapshot as just used, for least-recently-used
// eviction.
func touch(path string) {
	now := time.Now()
	os.Chtimes(path, now, now)
}
