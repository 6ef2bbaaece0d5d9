package jobs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// resultLines writes real result lines for the given origins.
func resultLines(t *testing.T, origins ...Origin) string {
	t.Helper()
	var b strings.Builder
	w := NewWriter(&b, WriterOptions{})
	for _, o := range origins {
		if err := w.Write(Success(o, &TextCompletion{}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestReadDoneTruncatedLastLine(t *testing.T) {
	complete := resultLines(t, Origin{Line: 1, CustomID: "a", Envelope: true}, Origin{Line: 3}, Origin{Line: 4, CustomID: "c"})
	partial := `{"id":"batch_req_x","custom_id":"d","response":{"status_co`
	path := writeFile(t, complete+partial)

	done, err := ReadDone(path)
	if err != nil {
		t.Fatal(err)
	}
	if done.Results != 3 || done.Partial != int64(len(partial)) {
		t.Errorf("results %d partial %d, want 3 and %d", done.Results, done.Partial, len(partial))
	}
	checks := []struct {
		job  Job
		want bool
	}{
		{Job{Line: 1, CustomID: "a"}, true},
		{Job{Line: 9, CustomID: "a"}, true}, // by custom_id even if lines moved
		{Job{Line: 3}, true},
		{Job{Line: 4, CustomID: "c"}, true},
		{Job{Line: 5, CustomID: "d"}, false}, // only in the partial line
		{Job{Line: 2}, false},
		{Job{Line: 3, CustomID: "z"}, false}, // a custom_id decides, not the line
	}
	for _, c := range checks {
		if got := done.Has(&c.job); got != c.want {
			t.Errorf("Has(line %d, %q) = %v, want %v", c.job.Line, c.job.CustomID, got, c.want)
		}
	}
	if !done.HasLine(4) || done.HasLine(5) {
		t.Error("HasLine wrong")
	}

	if err := TruncatePartial(path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != complete {
		t.Errorf("after truncation the file is\n%q\nwant\n%q", data, complete)
	}
	again, err := ReadDone(path)
	if err != nil || again.Partial != 0 || again.Results != 3 {
		t.Errorf("after truncation: %+v, %v", again, err)
	}
	if err := TruncatePartial(path); err != nil {
		t.Errorf("truncating a clean file: %v", err)
	}
	if data2, _ := os.ReadFile(path); string(data2) != complete {
		t.Error("a clean file was changed")
	}
}

func TestReadDoneGarbageLastLine(t *testing.T) {
	// After a power loss a file can end in zeros, newline or not.
	complete := resultLines(t, Origin{Line: 1})
	for _, tail := range []string{"\x00\x00\x00\x00", "\x00\x00\n", "{\"line\":2}", "{\"line\":\n\n"} {
		path := writeFile(t, complete+tail)
		done, err := ReadDone(path)
		if err != nil {
			t.Errorf("tail %q: %v", tail, err)
			continue
		}
		if done.Results != 1 || done.Partial != int64(len(tail)) || done.HasLine(2) {
			t.Errorf("tail %q: %+v", tail, done)
		}
		if err := TruncatePartial(path); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); string(data) != complete {
			t.Errorf("tail %q: truncated to %q", tail, data)
		}
	}
}

func TestReadDoneErrors(t *testing.T) {
	done, err := ReadDone(filepath.Join(t.TempDir(), "none.jsonl"))
	if err != nil || done.Results != 0 || done.Has(&Job{Line: 1}) {
		t.Errorf("missing file: %+v, %v", done, err)
	}
	good := resultLines(t, Origin{Line: 1})
	for content, want := range map[string]string{
		good + "garbage\n" + good:   "results.jsonl line 2: not valid JSON",
		`{"id":"x"}` + "\n" + good:  `results.jsonl line 1: result has neither "line" nor "custom_id"`,
		good + "\n\n[1]\n\n" + good: "results.jsonl line 4: not a JSON object",
	} {
		_, err := ReadDone(writeFile(t, content))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	// Another tool's Batch output has no "line": its custom_ids still count.
	done, err = ReadDone(writeFile(t, `{"id":"batch_req_1","custom_id":"q","response":{},"error":null}`+"\n"))
	if err != nil || !done.Has(&Job{Line: 7, CustomID: "q"}) {
		t.Errorf("foreign output: %+v, %v", done, err)
	}
}

// TestReadDoneCancelledLastLine: the job an interrupt cut short is not done;
// its line is cut off so that it runs again and appears once.
func TestReadDoneCancelledLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	ok := `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"x","finish_reason":"stop"}],"line":1,"custom_id":"a"}` + "\n"
	cut := `{"id":"b","custom_id":"b","response":{"status_code":200,"body":{"choices":[{"finish_reason":"cancelled"}]}},"error":null,"line":2}` + "\n"
	if err := os.WriteFile(path, []byte(ok+cut), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := ReadDone(path)
	if err != nil {
		t.Fatal(err)
	}
	if !d.HasLine(1) || d.HasLine(2) || d.Partial != int64(len(cut)) {
		t.Fatalf("done lines %v, partial %d; want line 1 only and %d bytes to cut", d.ByLine, d.Partial, len(cut))
	}
	if err := TruncatePartial(path); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != ok {
		t.Fatalf("after truncation: %q", data)
	}
	// a cancelled result that is not the last line stays a result
	if err := os.WriteFile(path, []byte(cut+ok), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err = ReadDone(path); err != nil || !d.HasLine(2) || d.Partial != 0 {
		t.Fatalf("cancelled line in the middle: %v %+v", err, d)
	}
}
