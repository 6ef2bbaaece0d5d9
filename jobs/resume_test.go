package jobs

import (
	"errors"
	"fmt"
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

// resumeJobs is an input of five jobs; results answers them as a run would.
const resumeJobs = `{"custom_id":"a","prompt":"1"}
{"prompt":"2"}

{"custom_id":"c","method":"POST","url":"/v1/completions","body":{"prompt":"4"}}
not json
{"prompt":"6"}
`

// results answers the given input lines of input, in that order, with
// what fail says (status and error type) or a completion.
func results(t *testing.T, input string, lines []int, fail map[int]Output) string {
	t.Helper()
	var b strings.Builder
	w := NewWriter(&b, WriterOptions{})
	r := NewReader(strings.NewReader(input))
	byLine := map[int]Output{}
	for {
		j, lerr, err := r.Next()
		if err != nil {
			break
		}
		if lerr != nil {
			byLine[lerr.Line] = lerr.Output()
			continue
		}
		out := Success(j.Origin(), &TextCompletion{Choices: []TextChoice{{Text: "ok", FinishReason: FinishStop}}}, nil)
		if f, ok := fail[j.Line]; ok {
			f.Origin = j.Origin()
			out = f
		}
		byLine[j.Line] = out
	}
	for _, n := range lines {
		if err := w.Write(byLine[n]); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func failure(status int, typ string) Output {
	o := Failure(Origin{}, APIError{Message: "boom", Type: typ})
	o.StatusCode = status
	return o
}

func plan(t *testing.T, outPath, input string, opts ResumeOptions) (*Resume, error) {
	t.Helper()
	prev, err := ReadPrevious(outPath)
	if err != nil {
		return nil, err
	}
	if opts.InputName == "" {
		opts.InputName = "jobs.jsonl"
	}
	return prev.Plan(strings.NewReader(input), opts)
}

func doneLines(d Done, lines ...int) string {
	var got []string
	for _, n := range lines {
		if d.HasLine(n) {
			got = append(got, fmt.Sprint(n))
		}
	}
	return strings.Join(got, ",")
}

// TestResumeRerunsFailuresNotTheJobsFault: a 409 (lock timeout), 429 or any
// 5xx result runs again and its line leaves the file; a 400 stays done.
func TestResumeRerunsFailuresNotTheJobsFault(t *testing.T) {
	content := results(t, resumeJobs, []int{1, 2, 4, 5, 6}, map[int]Output{
		1: failure(409, InvalidRequest),
		2: failure(500, ServerError),
		4: failure(429, InvalidRequest),
		6: failure(400, InvalidRequest),
	})
	path := writeFile(t, content)
	r, err := plan(t, path, resumeJobs, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := doneLines(r.Done, 1, 2, 4, 5, 6); got != "5,6" {
		t.Errorf("done lines %s, want 5,6 (a bad line and a 400)", got)
	}
	if r.Done.Has(&Job{Line: 1, CustomID: "a"}) || r.Rerun != 3 {
		t.Errorf("job a (409) counts as done, or %d reruns (want 3)", r.Rerun)
	}
	if err := r.Apply(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != results(t, resumeJobs, []int{5, 6}, map[int]Output{6: failure(400, InvalidRequest)}) {
		t.Errorf("after Apply the file holds\n%s", data)
	}
	// a bare line from before status_code was written: type server_error reruns
	old := `{"error":{"message":"x","type":"server_error","param":null,"code":null},"line":2,"line_hash":"` + LineHash([]byte(`{"prompt":"2"}`)) + `"}` + "\n"
	r, err = plan(t, writeFile(t, old), resumeJobs, ResumeOptions{})
	if err != nil || r.Done.HasLine(2) {
		t.Errorf("old server_error line: %v, done %v", err, r.Done.HasLine(2))
	}
}

// TestResumeRefusesAChangedInput: a result whose line_hash is not that of
// the input line it names (the line was edited, a line was inserted, the
// output is another input's) stops the resume, naming the first such line
// and both files; RerunChanged runs those lines again instead.
func TestResumeRefusesAChangedInput(t *testing.T) {
	content := results(t, resumeJobs, []int{1, 2, 4, 5, 6}, nil)
	edited := strings.Replace(resumeJobs, `"prompt":"4"`, `"prompt":"four"`, 1)
	inserted := `{"prompt":"new"}` + "\n" + resumeJobs
	shorter := strings.Join(strings.SplitAfter(resumeJobs, "\n")[:4], "")
	for _, c := range []struct {
		name, input string
		want        string
		rerun       []int
	}{
		{"edited", edited, "results.jsonl line 3 answers line 4 of jobs.jsonl", []int{4}},
		{"inserted", inserted, "results.jsonl line 1 answers line 1 of jobs.jsonl", []int{1, 2, 4, 5, 6}},
		{"shorter", shorter, "results.jsonl line 4 answers line 5 of jobs.jsonl, which has only 4 lines", []int{5, 6}},
	} {
		path := writeFile(t, content)
		_, err := plan(t, path, c.input, ResumeOptions{})
		var mm *MismatchError
		if !errors.As(err, &mm) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--rerun-changed") {
			t.Errorf("%s: err = %v, want a mismatch: %q", c.name, err, c.want)
			continue
		}
		r, err := plan(t, path, c.input, ResumeOptions{RerunChanged: true})
		if err != nil {
			t.Fatalf("%s, rerunning changed lines: %v", c.name, err)
		}
		if r.Changed != len(c.rerun) {
			t.Errorf("%s: %d changed, want %d", c.name, r.Changed, len(c.rerun))
		}
		for _, n := range c.rerun {
			if r.Done.HasLine(n) {
				t.Errorf("%s: line %d counts as done", c.name, n)
			}
		}
		if err := r.Apply(); err != nil {
			t.Fatal(err)
		}
		again, err := plan(t, path, c.input, ResumeOptions{})
		if err != nil || again.Changed != 0 {
			t.Errorf("%s: after Apply: %v", c.name, err)
		}
	}
	// a result that runs again anyway (a 500) need not match its line
	path := writeFile(t, results(t, resumeJobs, []int{1, 4}, map[int]Output{4: failure(500, ServerError)}))
	if r, err := plan(t, path, edited, ResumeOptions{}); err != nil || r.Rerun != 1 || !r.Done.HasLine(1) {
		t.Errorf("edited line with a 500 result: %v", err)
	}
	// the same input resumes cleanly
	if r, err := plan(t, writeFile(t, content), resumeJobs, ResumeOptions{}); err != nil || doneLines(r.Done, 1, 2, 4, 5, 6) != "1,2,4,5,6" {
		t.Errorf("unchanged input: %v", err)
	}
}

// TestResumeShardMismatch: a result for a line this shard does not run
// means the file was written by another shard.
func TestResumeShardMismatch(t *testing.T) {
	path := writeFile(t, results(t, resumeJobs, []int{1, 2}, nil))
	_, err := plan(t, path, resumeJobs, ResumeOptions{Take: ShardSpec{Index: 0, Count: 2}.Takes})
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "shard") {
		t.Errorf("err = %v", err)
	}
}

// TestResumeResultsWithoutHash: results of an older petal (no line_hash)
// and of other tools (no line) are kept unverified and counted.
func TestResumeResultsWithoutHash(t *testing.T) {
	old := `{"id":"x","object":"text_completion","choices":[],"line":2}` + "\n" +
		`{"id":"batch_req_1","custom_id":"c","response":{"status_code":200,"body":{}},"error":null}` + "\n"
	r, err := plan(t, writeFile(t, old), resumeJobs, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Unverified != 2 || r.FirstUnverified != 1 || !r.Done.HasLine(2) || !r.Done.Has(&Job{Line: 4, CustomID: "c"}) {
		t.Errorf("unverified %d (first %d), done %v", r.Unverified, r.FirstUnverified, r.Done)
	}
}

func TestResumeTornLastLine(t *testing.T) {
	complete := results(t, resumeJobs, []int{1, 2}, nil)
	for _, tail := range []string{`{"id":"batch_req_x","custom_id":"d","response":{"status_co`, "\x00\x00\x00\x00", "\x00\x00\n", "{\"line\":\n\n"} {
		path := writeFile(t, complete+tail)
		r, err := plan(t, path, resumeJobs, ResumeOptions{})
		if err != nil {
			t.Errorf("tail %q: %v", tail, err)
			continue
		}
		if doneLines(r.Done, 1, 2, 4) != "1,2" {
			t.Errorf("tail %q: done %v", tail, r.Done)
		}
		if err := r.Apply(); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); string(data) != complete {
			t.Errorf("tail %q: cut to %q", tail, data)
		}
	}
	// a clean file is left alone
	path := writeFile(t, complete)
	r, err := plan(t, path, resumeJobs, ResumeOptions{})
	if err != nil || r.Apply() != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != complete {
		t.Error("a clean file was changed")
	}
}

func TestResumeDamagedFile(t *testing.T) {
	r, err := plan(t, filepath.Join(t.TempDir(), "none.jsonl"), resumeJobs, ResumeOptions{})
	if err != nil || r.Done.HasLine(1) || r.Apply() != nil {
		t.Errorf("missing file: %+v, %v", r, err)
	}
	good := results(t, resumeJobs, []int{1}, nil)
	for content, want := range map[string]string{
		good + "garbage\n" + good:   "results.jsonl line 2: not valid JSON",
		`{"id":"x"}` + "\n" + good:  `results.jsonl line 1: result has neither "line" nor "custom_id"`,
		good + "\n\n[1]\n\n" + good: "results.jsonl line 4: not a JSON object",
	} {
		_, err := plan(t, writeFile(t, content), resumeJobs, ResumeOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// TestResumeCancelledRunsAgain: a job an interrupt cut short is not done,
// wherever its line is; Apply removes it so that it appears once.
func TestResumeCancelledRunsAgain(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b, WriterOptions{})
	r := NewReader(strings.NewReader(resumeJobs))
	for {
		j, _, err := r.Next()
		if err != nil {
			break
		}
		if j == nil {
			continue
		}
		reason := FinishStop
		if j.Line == 2 || j.Line == 6 {
			reason = FinishCancelled
		}
		w.Write(Success(j.Origin(), &TextCompletion{Choices: []TextChoice{{FinishReason: reason}}}, nil))
	}
	path := writeFile(t, b.String())
	res, err := plan(t, path, resumeJobs, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := doneLines(res.Done, 1, 2, 4, 6); got != "1,4" || res.Rerun != 2 {
		t.Errorf("done %s, rerun %d; want 1,4 and 2", got, res.Rerun)
	}
	if err := res.Apply(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), FinishCancelled) || strings.Count(string(data), "\n") != 2 {
		t.Errorf("after Apply: %s", data)
	}
}

// TestResumeApplyFollowsSymlink: rewriting an output reached through a
// symlink rewrites the file it points to and keeps the link.
func TestResumeApplyFollowsSymlink(t *testing.T) {
	content := results(t, resumeJobs, []int{1, 2, 4}, map[int]Output{1: failure(500, ServerError)})
	target := writeFile(t, content)
	link := filepath.Join(t.TempDir(), "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	r, err := plan(t, link, resumeJobs, ResumeOptions{})
	if err != nil || r.Apply() != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is gone: %v", err)
	}
	if data, _ := os.ReadFile(target); string(data) != results(t, resumeJobs, []int{2, 4}, nil) {
		t.Errorf("target holds %s", data)
	}
}
