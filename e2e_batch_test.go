package main

// End-to-end tests of batch output under faults: closed or failing standard
// output, signals, resume after damage. They need only the embedded model.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const twoJobs = `{"prompt": "x = 1", "max_tokens": 2}` + "\n" + `{"prompt": "y = 2", "max_tokens": 2}` + "\n"

func writeJobs(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exitCode runs cmd and returns its exit code (-1 when a signal ended it)
// and its stderr.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, errb.String()
}

// TestBatchStdoutFailures: results that cannot reach standard output (it is
// closed, a pipe nobody reads, a full device) are an error exit (with a
// message, but for the broken pipe, which exits 141 as a filter does),
// never a silent exit 0.
func TestBatchStdoutFailures(t *testing.T) {
	in := writeJobs(t, twoJobs)

	// closed: the shell closes fd 1 before petal starts
	code, stderr := exitCode(t, exec.Command("sh", "-c", `exec "$0" batch "$1" >&-`, petalBin, in))
	if code == 0 || !strings.Contains(stderr, "standard output") {
		t.Errorf("stdout closed: exit %d, stderr %q; want an error naming standard output", code, stderr)
	}

	// a pipe whose reader is gone
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := exec.Command(petalBin, "batch", in)
	cmd.Stdout = w
	code, stderr = exitCode(t, cmd)
	w.Close()
	if code != 141 || strings.Contains(stderr, "broken pipe") {
		t.Errorf("stdout a broken pipe: exit %d, stderr %q; want 141 (as for SIGPIPE) and no message", code, stderr)
	}

	// a full device
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	cmd = exec.Command(petalBin, "batch", in)
	cmd.Stdout = full
	if code, stderr = exitCode(t, cmd); code != 1 || !strings.Contains(stderr, "no space") {
		t.Errorf("stdout /dev/full: exit %d, stderr %q", code, stderr)
	}

	// run's answer is results too
	cmd = exec.Command(petalBin, "run", "--raw", "--max-tokens", "4", "def f(x):")
	cmd.Stdout = full
	if code, stderr = exitCode(t, cmd); code == 0 || !strings.Contains(stderr, "standard output") {
		t.Errorf("run to /dev/full: exit %d, stderr %q", code, stderr)
	}
}

// TestSIGTERMFinishesTheLine: SIGTERM (what Kubernetes and systemd send)
// is treated as Ctrl-C: the current job finishes its line, the exit code is
// 143, and --resume completes the batch.
func TestSIGTERMFinishesTheLine(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "jobs.jsonl"), filepath.Join(dir, "out.jsonl")
	var jobs strings.Builder
	const n = 30
	for i := range n {
		fmt.Fprintf(&jobs, `{"custom_id": "j%d", "prompt": "def f%d(x):", "max_tokens": 200, "temperature": 0}`+"\n", i, i)
	}
	os.WriteFile(in, []byte(jobs.String()), 0o644)

	cmd := exec.Command(petalBin, "batch", in, "-o", out)
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLines(t, out, 1)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v (stderr %q), want exit code 143", err, errb.String())
	}
	first := readLines(t, out) // fails on a torn line
	if len(first) == 0 || len(first) >= n {
		t.Fatalf("terminated run wrote %d of %d results", len(first), n)
	}
	if !strings.Contains(errb.String(), "--resume") {
		t.Errorf("stderr %q does not say how to continue", errb.String())
	}
	if r := petal(t, "", "batch", in, "-o", out, "--resume"); r.code != 0 {
		t.Fatalf("resume: exit %d, stderr %s", r.code, r.stderr)
	}
	if got := readLines(t, out); len(got) != n {
		t.Errorf("%d results after resume, want %d", len(got), n)
	}

	// run: the answer so far is printed, then exit 143. Greedy, so that the
	// answer is long (thousands of tokens on the embedded model): a sampled
	// one can end in a few tokens, before the signal (seed 3: 53 bytes).
	cmd = exec.Command(petalBin, "run", "--raw", "--temperature", "0", "--max-tokens", "100000", "--max-context", "100000", "def f(x):")
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	var stdout syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for stdout.Len() < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 {
		t.Fatalf("run after SIGTERM: %v, want exit code 143", err)
	}
}

// waitForLines waits until the file holds at least n newlines.
func waitForLines(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(path); bytes.Count(data, []byte("\n")) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s did not reach %d lines", path, n)
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// TestResumeChangedInput: resuming over an input that was edited since
// refuses (exit 2) naming the line and both files; --rerun-changed runs the
// changed lines again, each line answered once, with its line_hash.
func TestResumeChangedInput(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "jobs.jsonl"), filepath.Join(dir, "out.jsonl")
	jobs := []string{
		`{"custom_id": "a", "prompt": "x = 1", "max_tokens": 2}`,
		`{"custom_id": "b", "prompt": "y = 2", "max_tokens": 2}`,
		`{"custom_id": "c", "prompt": "z = 3", "max_tokens": 2}`,
	}
	os.WriteFile(in, []byte(strings.Join(jobs, "\n")+"\n"), 0o644)
	if r := petal(t, "", "batch", in, "-o", out); r.code != 0 {
		t.Fatalf("batch: exit %d %s", r.code, r.stderr)
	}
	jobs[1] = `{"custom_id": "b", "prompt": "y = 20", "max_tokens": 2}`
	os.WriteFile(in, []byte(strings.Join(jobs, "\n")+"\n"), 0o644)
	before, _ := os.ReadFile(out)
	r := petal(t, "", "batch", in, "-o", out, "--resume")
	if r.code != 2 || !strings.Contains(r.stderr, "line 2 of "+in) || !strings.Contains(r.stderr, out) || !strings.Contains(r.stderr, "--rerun-changed") {
		t.Fatalf("resume over an edited input: exit %d, stderr %q", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(after, before) {
		t.Fatal("a refused resume changed the output")
	}
	if r := petal(t, "", "batch", in, "-o", out, "--resume", "--rerun-changed"); r.code != 0 {
		t.Fatalf("--rerun-changed: exit %d %s", r.code, r.stderr)
	}
	lines := readLines(t, out)
	seen := map[string]int{}
	for _, l := range lines {
		seen[l["custom_id"].(string)]++
		if h, _ := l["line_hash"].(string); len(h) != 16 {
			t.Errorf("result %v has no line_hash", l)
		}
	}
	if len(lines) != 3 || seen["a"] != 1 || seen["b"] != 1 || seen["c"] != 1 {
		t.Errorf("results after --rerun-changed: %v", seen)
	}
	// merge puts the rerun line back in order and checks it against the jobs
	r = petal(t, "", "merge", out, "--jobs", in)
	if r.code != 0 || !strings.Contains(strings.Split(r.stdout, "\n")[1], `"custom_id":"b"`) {
		t.Errorf("merge: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}
	// standard input resumes too
	if r := petal(t, strings.Join(jobs, "\n")+"\n", "batch", "-", "-o", out, "--resume"); r.code != 0 {
		t.Errorf("resume from stdin: exit %d %s", r.code, r.stderr)
	}
	if got := readLines(t, out); len(got) != 3 {
		t.Errorf("%d results after resuming from stdin", len(got))
	}
}
