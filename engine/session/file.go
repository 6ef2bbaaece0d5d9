package session

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"petal/engine/backend"
	"petal/engine/model"
)

// SnapshotInfo describes one snapshot file from its verified header.
type SnapshotInfo struct {
	File        string
	Turn        int // turn number within its session; 0 for a prefix snapshot
	Tokens      int
	Bytes       int64
	Modified    time.Time
	Fingerprint Fingerprint
	KV          backend.DType // element type of the K and V sections
	Err         error         // why the header could not be read (the other fields but File, Bytes and Modified are then zero)
}

// WriteFile writes d as a snapshot at path atomically (temporary file in the
// same folder, fsync, rename, fsync of the folder) and returns its size.
func WriteFile(path string, fp Fingerprint, d model.StateData) (int64, error) {
	return writeAtomic(path, func(w io.Writer) error { return Encode(w, fp, d) })
}

// ReadFile reads and verifies the snapshot at path (see Decode). Refusals
// are *SnapshotError values naming the file.
func ReadFile(path string, fp Fingerprint) (model.StateData, error) {
	f, size, err := openSized(path)
	if err != nil {
		return model.StateData{}, err
	}
	defer f.Close()
	d, err := Decode(f, size, fp)
	return d, nameFile(err, path)
}

// readInfo reads the header of the snapshot at path; a damaged header is
// reported in Err, a missing file as an error.
func readInfo(path string) (SnapshotInfo, []int32, error) {
	f, size, err := openSized(path)
	if err != nil {
		return SnapshotInfo{}, nil, err
	}
	defer f.Close()
	info := SnapshotInfo{File: path, Bytes: size}
	if st, err := f.Stat(); err == nil {
		info.Modified = st.ModTime()
	}
	h, _, err := readHeader(bufio.NewReaderSize(f, 64<<10), size)
	if err != nil {
		info.Err = nameFile(err, path)
		return info, nil, nil
	}
	info.Tokens, info.Fingerprint, info.KV = len(h.tokens), h.fingerprint, h.kvType()
	return info, h.tokens, nil
}

func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("session: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("session: %w", err)
	}
	return f, st.Size(), nil
}

// nameFile puts the file name into a snapshot refusal.
func nameFile(err error, path string) error {
	var se *SnapshotError
	if errors.As(err, &se) && se.File == "" {
		se.File = path
	}
	var ie *ioError
	if errors.As(err, &ie) {
		return fmt.Errorf("session: reading %s: %w", path, ie.err)
	}
	return err
}
