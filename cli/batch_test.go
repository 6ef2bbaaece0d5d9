package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
