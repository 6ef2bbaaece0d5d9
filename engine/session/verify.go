package session

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Problem is a damaged file of the store.
type Problem struct {
	File string
	Err  error // a *SnapshotError (errors.Is with ErrCorrupt, ErrTruncated, ErrVersion), or a read error
}

// Verify reads every byte of every snapshot (and the conversation) of the
// named sessions, or of every session and every prefix snapshot when no
// name is given, and returns each damaged file with the reason, in store
// order. It checks structure and checksums, not which model a snapshot is
// for: a store opened for management has no model. Naming a session
// without snapshots or a conversation gives an error wrapping ErrNoSession.
func (s *Store) Verify(names ...string) ([]Problem, error) {
	all := len(names) == 0
	if all {
		infos, err := s.sessionNames()
		if err != nil {
			return nil, err
		}
		names = infos
	}
	var probs []Problem
	for _, name := range names {
		if err := ValidateName(name); err != nil {
			return nil, err
		}
		turns, err := s.turns(name)
		if err != nil {
			return nil, err
		}
		convPath := filepath.Join(s.sessionDir(name), conversationFile)
		_, convErr := os.Stat(convPath)
		if len(turns) == 0 && convErr != nil {
			if all {
				continue // a lock file or an empty folder: nothing to verify
			}
			return nil, noSession(name, s.sessionDir(name))
		}
		for _, t := range turns {
			if err := verifyFile(t.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				probs = append(probs, Problem{t.path, err})
			}
		}
		if convErr == nil {
			if _, err := s.Conversation(name); err != nil {
				probs = append(probs, Problem{convPath, err})
			}
		}
	}
	if !all {
		return probs, nil
	}
	models, err := os.ReadDir(filepath.Join(s.Dir, prefixDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("session: %w", err)
	}
	for _, m := range models {
		if !m.IsDir() {
			continue
		}
		files, err := s.prefixFiles(filepath.Join(s.Dir, prefixDir, m.Name()))
		if err != nil {
			return nil, fmt.Errorf("session: %w", err)
		}
		for _, f := range files {
			if err := verifyFile(f.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
				probs = append(probs, Problem{f.File, err})
			}
		}
	}
	return probs, nil
}

// verifyFile checks a snapshot's structure and both checksums, reading the
// payload through the checksum without keeping it. A damaged file gives a
// *SnapshotError naming it.
func verifyFile(path string) error {
	f, size, err := openSized(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	h, sum, err := readHeader(r, size)
	if err != nil {
		return nameFile(err, path)
	}
	running := &crcUpdate{sum: sum}
	if _, err := io.CopyN(running, r, int64(h.payloadLen)); err != nil {
		return nameFile(readErr(err, "reading the payload"), path)
	}
	sum = running.sum
	var trailer [checksumSize]byte
	if _, err := io.ReadFull(r, trailer[:]); err != nil {
		return nameFile(readErr(err, "reading the checksum"), path)
	}
	if got := binary.LittleEndian.Uint32(trailer[:]); got != sum {
		return nameFile(snapErr(ErrCorrupt, "checksum %08x, computed %08x", got, sum), path)
	}
	return nil
}

// crcUpdate continues a running CRC32C over what is written to it.
type crcUpdate struct{ sum uint32 }

func (c *crcUpdate) Write(p []byte) (int, error) {
	c.sum = crc32.Update(c.sum, castagnoli, p)
	return len(p), nil
}
