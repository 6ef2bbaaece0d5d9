package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/engine/executor"
	"petal/jobs"
)

func runMain(t *testing.T, st Streams, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	st.Out, st.Err = &out, &errb
	if st.In == nil {
		st.In = strings.NewReader("")
	}
	cache := t.TempDir()
	st.Getenv = func(k string) string {
		if k == "PETAL_CACHE" {
			return cache
		}
		return ""
	}
	code := Main(context.Background(), append([]string{"petal"}, args...), st)
	return code, out.String(), errb.String()
}

// TestBatchProgressOnlyOnATerminal: a progress bar and a summary go to
// stderr when it is a terminal, nothing when it is not (or with --quiet).
func TestBatchProgressOnlyOnATerminal(t *testing.T) {
	in := filepath.Join(t.TempDir(), "jobs.jsonl")
	os.WriteFile(in, []byte(`{"prompt": "x = 1", "max_tokens": 2}`+"\n"+`{"prompt": "y = 2", "max_tokens": 2}`+"\n"), 0o644)

	code, out, errs := runMain(t, Streams{ErrIsTerminal: true}, "batch", in)
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if !strings.Contains(errs, "jobs") || !strings.Contains(errs, "2 succeeded, 0 failed") {
		t.Errorf("terminal stderr %q: want a progress bar and a summary", errs)
	}
	if code, _, errs := runMain(t, Streams{ErrIsTerminal: true}, "batch", in, "--quiet"); code != 0 || errs != "" {
		t.Errorf("--quiet: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runMain(t, Streams{}, "batch", in); code != 0 || errs != "" {
		t.Errorf("not a terminal: exit %d, stderr %q", code, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"batch", "no-such-file.jsonl"},
		{"batch", "a", "b"},
		{"batch", "--resume", "x.jsonl"},
		{"batch", "x.jsonl", "--shard", "3/2"},
		{"run", "--backend", "tpu", "hi"},
		{"run", "--no-such-flag", "hi"},
		{"perplexity"},
	} {
		code, _, errs := runMain(t, Streams{InIsTerminal: true}, args...)
		if code != ExitUsage || !strings.HasPrefix(errs, "petal: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errs)
		}
	}
}

// TestBatchRefusesOutputOverInput: -o naming the input itself, a symlink to
// it or a hard link of it exits 2 naming both paths, and the input keeps
// every byte.
func TestBatchRefusesOutputOverInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "jobs.jsonl")
	const jobsText = `{"prompt": "x = 1", "max_tokens": 2}` + "\n"
	if err := os.WriteFile(in, []byte(jobsText), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	hard := filepath.Join(dir, "hard.jsonl")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"batch", in, "-o", in},
		{"batch", in, "-o", link},
		{"batch", in, "-o", hard},
		{"batch", link, "-o", in, "--resume"},
		{"batch", in, "-o", hard, "--shard", "0/2"},
	} {
		code, _, errs := runMain(t, Streams{}, args...)
		if code != ExitUsage || !strings.Contains(errs, args[1]) || !strings.Contains(errs, args[3]) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming both files", args, code, errs)
		}
		if data, _ := os.ReadFile(in); string(data) != jobsText {
			t.Fatalf("%v: the input now holds %q", args, data)
		}
	}
	// standard input redirected from the output file is the same mistake
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if code, _, errs := runMain(t, Streams{In: f}, "batch", "-", "-o", hard); code != ExitUsage || !strings.Contains(errs, hard) {
		t.Errorf("stdin is the output: exit %d, stderr %q", code, errs)
	}
	if data, _ := os.ReadFile(in); string(data) != jobsText {
		t.Fatalf("stdin case: the input now holds %q", data)
	}
}

// TestBatchOutputDash: -o - is standard output, not a file named "-".
func TestBatchOutputDash(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "jobs.jsonl")
	os.WriteFile(in, []byte(`{"prompt": "x = 1", "max_tokens": 2}`+"\n"), 0o644)
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	code, out, errs := runMain(t, Streams{}, "batch", in, "-o", "-")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`-o - created a file named "-"`)
	}
	if code, _, errs := runMain(t, Streams{}, "batch", in, "-o", "-", "--resume"); code != ExitUsage || !strings.Contains(errs, "--resume") {
		t.Errorf("--resume with -o -: exit %d, stderr %q", code, errs)
	}
}

// TestBatchUnreadableInput: a folder or an unreadable file is a usage error
// (exit 2) naming it.
func TestBatchUnreadableInput(t *testing.T) {
	dir := t.TempDir()
	code, _, errs := runMain(t, Streams{}, "batch", dir)
	if code != ExitUsage || !strings.Contains(errs, dir) {
		t.Errorf("batch DIR: exit %d, stderr %q", code, errs)
	}
	code, _, errs = runMain(t, Streams{}, "merge", dir)
	if code != ExitUsage || !strings.Contains(errs, dir) {
		t.Errorf("merge DIR: exit %d, stderr %q", code, errs)
	}
	code, _, errs = runMain(t, Streams{}, "merge", "--jobs", dir, filepath.Join(dir, "none.jsonl"))
	if code != ExitUsage {
		t.Errorf("merge missing file: exit %d, stderr %q", code, errs)
	}
}

// TestBatchJobPanicIsItsErrorLine: a panic while serving one job becomes
// that job's error result (status 500, "internal error: ..."), the batch
// goes on, and a resume runs the job again.
func TestBatchJobPanicIsItsErrorLine(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "jobs.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(in, []byte(`{"prompt": "x = 1", "max_tokens": 2}`+"\n"+
		`{"custom_id": "p", "method": "POST", "url": "/v1/completions", "body": {"prompt": "y = 2", "max_tokens": 2}}`+"\n"+
		`{"prompt": "z = 3", "max_tokens": 2}`+"\n"), 0o644)
	real := runJob
	defer func() { runJob = real }()
	runJob = func(x *executor.Executor, ctx context.Context, job *jobs.Job, out executor.Stream) (*executor.Outcome, *executor.JobError) {
		if job.Line == 2 {
			var m map[string]int
			m["boom"]++ // a nil map write: a runtime panic, as an engine bug would be
		}
		return real(x, ctx, job, out)
	}
	code, _, errs := runMain(t, Streams{}, "batch", in, "-o", out)
	if code != ExitJobsFailed || !strings.Contains(errs, "line 2") || !strings.Contains(errs, "panic") {
		t.Fatalf("exit %d, stderr %q; want 1 and the panic reported", code, errs)
	}
	lines := resultMaps(t, out)
	if len(lines) != 3 {
		t.Fatalf("%d result lines, want 3", len(lines))
	}
	resp, _ := lines[1]["response"].(map[string]any)
	if resp["status_code"] != 500.0 || !strings.Contains(fmt.Sprint(resp["body"]), "internal error: assignment to entry in nil map") {
		t.Errorf("line 2 result %v", lines[1])
	}
	runJob = real
	if code, _, errs := runMain(t, Streams{}, "batch", in, "-o", out, "--resume"); code != 0 {
		t.Fatalf("resume: exit %d, stderr %q", code, errs)
	}
	lines = resultMaps(t, out)
	if len(lines) != 3 {
		t.Fatalf("after resume %d result lines, want 3", len(lines))
	}
	for _, l := range lines {
		if r, ok := l["response"].(map[string]any); ok && r["status_code"] != 200.0 {
			t.Errorf("after resume: %v", l)
		}
	}
}

func resultMaps(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("result line %q: %v", l, err)
		}
		out = append(out, v)
	}
	return out
}

// TestMergeOutput: merge -o - is standard output; -o over the job file is
// refused; -o over one of the result files sorts it in place.
func TestMergeOutput(t *testing.T) {
	dir := t.TempDir()
	jobsPath, part := filepath.Join(dir, "jobs.jsonl"), filepath.Join(dir, "part.jsonl")
	jobLines := `{"prompt":"a"}` + "\n" + `{"prompt":"b"}` + "\n"
	os.WriteFile(jobsPath, []byte(jobLines), 0o644)
	var results strings.Builder
	w := jobs.NewWriter(&results, jobs.WriterOptions{})
	r := jobs.NewReader(strings.NewReader(jobLines))
	var outs []jobs.Output
	for {
		j, _, err := r.Next()
		if err != nil {
			break
		}
		outs = append(outs, jobs.Success(j.Origin(), &jobs.TextCompletion{}, nil))
	}
	w.Write(outs[1])
	w.Write(outs[0])
	os.WriteFile(part, []byte(results.String()), 0o644)

	if code, _, errs := runMain(t, Streams{}, "merge", part, "--jobs", jobsPath, "-o", jobsPath); code != ExitUsage || !strings.Contains(errs, jobsPath) {
		t.Errorf("-o over the job file: exit %d, stderr %q", code, errs)
	}
	if data, _ := os.ReadFile(jobsPath); string(data) != jobLines {
		t.Fatalf("the job file now holds %q", data)
	}
	code, out, errs := runMain(t, Streams{}, "merge", part, "--jobs", jobsPath, "-o", "-")
	if code != 0 || strings.Index(out, `"line":1`) > strings.Index(out, `"line":2`) {
		t.Errorf("-o -: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runMain(t, Streams{}, "merge", part, "-o", part); code != 0 {
		t.Errorf("-o over its input: exit %d, stderr %q", code, errs)
	}
	if data, _ := os.ReadFile(part); string(data) != out {
		t.Errorf("sorted in place: %q, want %q", data, out)
	}
}

// batchLines runs a batch of job lines with the given extra arguments and
// returns the exit code and the result lines.
func batchLines(t *testing.T, jobs string, args ...string) (int, []map[string]any, string) {
	t.Helper()
	code, out, errs := runMain(t, Streams{In: strings.NewReader(jobs)}, append([]string{"batch", "-"}, args...)...)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("result line %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	return code, lines, errs
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
