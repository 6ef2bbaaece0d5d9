package cli

import (
	"strings"
	"testing"
)

// TestRunValidatesLikeBatch: run refuses the sampling values a job line
// may not have, with the flag named, exit 2, before loading the model.
func TestRunValidatesLikeBatch(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--temperature", "5"}, "--temperature"},
		{[]string{"--top-p", "2"}, "--top-p"},
		{[]string{"--top-p", "0"}, "--top-p"},
		{[]string{"--max-tokens", "0"}, "--max-tokens"},
		{[]string{"--max-tokens", "-3"}, "--max-tokens"},
		{[]string{"--stop", ""}, "--stop"},
		{[]string{"--stop", "x", "--stop", ""}, "--stop"},
		{[]string{"--min-p", "1.5"}, "--min-p"},
		{[]string{"--presence-penalty", "3"}, "--presence-penalty"},
		{[]string{"--frequency-penalty", "-2.5"}, "--frequency-penalty"},
		{[]string{"--repetition-penalty", "0"}, "--repetition-penalty"},
		{[]string{"--top-k", "-2"}, "--top-k"},
		{[]string{"--temperature", "NaN"}, "--temperature"},
		{[]string{"--temperature", "Inf"}, "--temperature"},
	} {
		args := append(append([]string{"run"}, tc.args...), "hi")
		code, out, errs := runMain(t, Streams{}, args...)
		if code != ExitUsage || !strings.Contains(errs, tc.flag) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %s", tc.args, code, out, errs, tc.flag)
		}
		if strings.Contains(errs, "field ") || strings.Contains(errs, "_") {
			t.Errorf("%v: stderr %q speaks of job fields, not flags", tc.args, errs)
		}
	}
	// the values batch accepts, run accepts too
	code, _, errs := runMain(t, Streams{}, "run", "--temperature", "0", "--top-p", "1", "--max-tokens", "1",
		"--stop", "a, b", "--top-k", "-1", "--quiet", "hi")
	if code != 0 {
		t.Fatalf("valid flags: exit %d, stderr %q", code, errs)
	}
}

// TestRunRawHasABoundedDefault: a plain completion without --max-tokens
// stops at rawDefaultMaxTokens, and --help says so.
func TestRunRawHasABoundedDefault(t *testing.T) {
	o := runOptions{Prompt: "def f(x):", Raw: true}
	job, err := o.job()
	if err != nil {
		t.Fatal(err)
	}
	if job.Params.MaxTokens == nil || *job.Params.MaxTokens != rawDefaultMaxTokens || rawDefaultMaxTokens > 1024 {
		t.Fatalf("--raw without --max-tokens: max tokens %v, want %d", job.Params.MaxTokens, rawDefaultMaxTokens)
	}
	chat := runOptions{Prompt: "hi"}
	if job, _ := chat.job(); job.Params.MaxTokens != nil {
		t.Errorf("a chat run got a default length %d: it runs to the end of the turn", *job.Params.MaxTokens)
	}
	_, out, _ := runMain(t, Streams{}, "run", "--help")
	if !strings.Contains(out, "--raw: 256") {
		t.Errorf("run --help does not give the --raw default:\n%s", out)
	}
	code, out, errs := runMain(t, Streams{}, "run", "--raw", "--temperature", "0", "--json", "x = 1")
	if code != 0 || !strings.Contains(out, `"completion_tokens":`) {
		t.Fatalf("exit %d, %s %s", code, out, errs)
	}
}
