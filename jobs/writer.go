package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// WriterOptions tune a Writer.
type WriterOptions struct {
	// Sync fsyncs each line when the destination is a regular file, so a
	// result survives a machine crash, not only a killed process.
	Sync bool
}

// Writer writes result lines, each whole in a single Write so an
// interrupted run leaves at most one partial line (which resume cuts off).
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	file *os.File // set when lines are to be synced
	buf  bytes.Buffer
	enc  *json.Encoder
}

// NewWriter writes result lines to w.
func NewWriter(w io.Writer, opts WriterOptions) *Writer {
	jw := &Writer{w: w}
	jw.enc = json.NewEncoder(&jw.buf)
	jw.enc.SetEscapeHTML(false)
	if f, ok := w.(*os.File); ok && opts.Sync {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			jw.file = f
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
		return fmt.Errorf("jobs: write result: %w", err)
	}
	if f, ok := w.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("jobs: flush result: %w", err)
		}
	}
	if w.file != nil {
		if err := w.file.Sync(); err != nil {
			return fmt.Errorf("jobs: sync %s: %w", w.file.Name(), err)
		}
	}
	return nil
}
