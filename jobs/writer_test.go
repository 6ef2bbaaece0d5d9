package jobs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// callRecorder records each Write call separately.
type callRecorder struct{ calls [][]byte }

func (c *callRecorder) Write(p []byte) (int, error) {
	c.calls = append(c.calls, append([]byte(nil), p...))
	return len(p), nil
}

func TestWriterOneWritePerLine(t *testing.T) {
	rec := &callRecorder{}
	w := NewWriter(rec, WriterOptions{})
	chat := &ChatCompletion{Choices: []ChatChoice{{Message: ChatMessage{Content: new("<b>a & b</b>\nline two")}}}}
	if err := w.Write(Success(Origin{Line: 1, CustomID: "a", Envelope: true}, chat, nil)); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Success(Origin{Line: 2}, chat, nil)); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) != 2 {
		t.Fatalf("%d Write calls, want 2", len(rec.calls))
	}
	for i, call := range rec.calls {
		if bytes.Count(call, []byte("\n")) != 1 || call[len(call)-1] != '\n' {
			t.Errorf("call %d is not one whole line: %q", i, call)
		}
		if !bytes.Contains(call, []byte(`<b>a & b</b>\nline two`)) {
			t.Errorf("call %d escapes HTML or mangles content: %s", i, call)
		}
		var v map[string]any
		if err := json.Unmarshal(call, &v); err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

func TestWriterFlushesBufferedWriter(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&out, 1<<16)
	w := NewWriter(bw, WriterOptions{})
	if err := w.Write(map[string]int{"line": 1}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "{\"line\":1}\n" {
		t.Errorf("after Write the underlying writer holds %q", out.String())
	}
}

func TestWriterEncodeErrorWritesNothing(t *testing.T) {
	rec := &callRecorder{}
	w := NewWriter(rec, WriterOptions{})
	if err := w.Write(map[string]any{"bad": make(chan int)}); err == nil || !strings.HasPrefix(err.Error(), "jobs: encode result") {
		t.Errorf("err = %v", err)
	}
	if len(rec.calls) != 0 {
		t.Errorf("wrote %q", rec.calls)
	}
}

func TestWriterSyncOption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := NewWriter(f, WriterOptions{Sync: true})
	if w.file != f || !w.sync {
		t.Error("a regular file is not synced")
	}
	if err := w.Write(map[string]int{"line": 1}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "{\"line\":1}\n" {
		t.Errorf("file holds %q", data)
	}

	// A pipe cannot be synced: the option must leave it alone.
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	pipeW := NewWriter(pw, WriterOptions{Sync: true})
	if pipeW.file != nil {
		t.Error("a pipe is marked for syncing")
	}
	if err := pipeW.Write(map[string]int{"line": 2}); err != nil {
		t.Errorf("write to a pipe: %v", err)
	}
	if NewWriter(f, WriterOptions{}).sync {
		t.Error("sync without the option")
	}
}

// fullDisk is a result file on a disk that fills up after room more bytes:
// a write that does not fit is cut short with ENOSPC, as write(2) does.
type fullDisk struct {
	*os.File
	room int
}

func (d *fullDisk) Write(p []byte) (int, error) {
	if len(p) <= d.room {
		d.room -= len(p)
		return d.File.Write(p)
	}
	n, _ := d.File.Write(p[:d.room])
	d.room = 0
	return n, syscall.ENOSPC
}

// TestWriterFullDiskLeavesWholeLines: a write that fails part way leaves the
// file ending at its last whole line, and the error says so.
func TestWriterFullDiskLeavesWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	earlier := "{\"line\":1}\n" // from a run being resumed
	if err := os.WriteFile(path, []byte(earlier), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := NewWriter(&fullDisk{File: f, room: 15}, WriterOptions{})
	if err := w.Write(map[string]int{"line": 2}); err != nil {
		t.Fatal(err)
	}
	err = w.Write(map[string]int{"line": 3})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "out.jsonl") {
		t.Errorf("err = %v, want ENOSPC naming the file", err)
	}
	if data, _ := os.ReadFile(path); string(data) != earlier+"{\"line\":2}\n" {
		t.Errorf("after the failed write the file holds %q", data)
	}
}

// failingWriter fails every write, as a closed pipe or descriptor does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

func TestWriterReportsWriteErrors(t *testing.T) {
	err := NewWriter(failingWriter{}, WriterOptions{}).Write(map[string]int{"line": 1})
	if !errors.Is(err, syscall.EPIPE) {
		t.Errorf("err = %v, want EPIPE", err)
	}
}
