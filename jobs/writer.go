package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"sync"
)

// WriterOptions tune a Writer.
type WriterOptions struct {
	// Sync fsyncs each line when the destination is a regular file, so a
	// result survives a machine crash, not only a killed process.
	Sync bool
}

// resultFile is what a Writer needs of a regular file: its size, to know
// where whole lines end, truncation, to cut a torn line off, and fsync.
type resultFile interface {
	Stat() (fs.FileInfo, error)
	Truncate(size int64) error
	Sync() error
	Name() string
}

// Writer writes result lines, each whole in a single Write so an
// interrupted run leaves at most one partial line (which resume cuts off).
// On a regular file a write that fails part way (a full disk) is undone, so
// the file always ends at its last whole line.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	file resultFile // set when w is a regular file
	sync bool
	end  int64 // where the last whole line ends in file
	buf  bytes.Buffer
	enc  *json.Encoder
}

// NewWriter writes result lines to w, appending to a regular file (opened
// for appending, or empty).
func NewWriter(w io.Writer, opts WriterOptions) *Writer {
	jw := &Writer{w: w}
	jw.enc = json.NewEncoder(&jw.buf)
	jw.enc.SetEscapeHTML(false)
	if f, ok := w.(resultFile); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			jw.file, jw.sync, jw.end = f, opts.Sync, st.Size()
		}
	}
	return jw
}

// Write encodes v as one line and writes it out, flushing w if it buffers.
func (w *Writer) Write(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	if err := w.enc.Encode(v); err != nil { // Encode ends the line with '\n'
		return fmt.Errorf("jobs: encode result: %w", err)
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return w.undo(err)
	}
	if f, ok := w.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("jobs: flush result: %w", err)
		}
	}
	if w.file != nil {
		w.end += int64(w.buf.Len())
		if w.sync {
			if err := w.file.Sync(); err != nil {
				return fmt.Errorf("jobs: sync %s: %w", w.file.Name(), err)
			}
		}
	}
	return nil
}

// undo cuts a partly written line off a regular file, so that no reader
// sees a torn result, and says where the file now ends.
func (w *Writer) undo(err error) error {
	if w.file == nil {
		return fmt.Errorf("jobs: write result: %w", err)
	}
	if terr := w.file.Truncate(w.end); terr != nil {
		return fmt.Errorf("jobs: write result to %s: %w (and cutting off the partial line failed too: %v; resume cuts it off)", w.file.Name(), err, terr)
	}
	return fmt.Errorf("jobs: write result to %s: %w (the file ends at its last whole result line)", w.file.Name(), err)
}
