package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// source reads the files of a checkpoint folder: a directory on disk, whose
// shards are memory-mapped, or an fs.FS (an embedded model), read into memory.
type source interface {
	readFile(name string) ([]byte, error)
	// mapFile's id identifies the file on disk; nil for an fs.FS.
	mapFile(name string) (data []byte, id *fileID, unmap func() error, err error)
	// mapped: mapFile's data is a memory map (whole pages), not a copy.
	mapped() bool
	exists(name string) bool
}

type dirSource string

func (d dirSource) readFile(name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return b, nil
}

func (d dirSource) mapFile(name string) ([]byte, *fileID, func() error, error) {
	return mapFile(filepath.Join(string(d), name))
}

func (d dirSource) mapped() bool { return filesMapped }

func (d dirSource) exists(name string) bool {
	_, err := os.Stat(filepath.Join(string(d), name))
	return err == nil
}

type fsSource struct {
	fsys fs.FS
	dir  string
}

func (s fsSource) readFile(name string) ([]byte, error) {
	b, err := fs.ReadFile(s.fsys, path.Join(s.dir, name))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return b, nil
}

func (s fsSource) mapFile(name string) ([]byte, *fileID, func() error, error) {
	b, err := s.readFile(name)
	return b, nil, func() error { return nil }, err
}

func (s fsSource) mapped() bool { return false }

func (s fsSource) exists(name string) bool {
	_, err := fs.Stat(s.fsys, path.Join(s.dir, name))
	return err == nil
}

// isNotExist reports a missing file behind a wrapped error.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
