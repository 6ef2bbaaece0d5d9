package main

import (
	"strings"
	"testing"
)

// TestBackendOptions: --backend takes the backend's options in the form
// NAME:KEY=VALUE,...; --help lists them; a wrong one is a usage error that
// names it.
func TestBackendOptions(t *testing.T) {
	t.Run("reference", func(t *testing.T) {
		cases := greedyCases(t)
		r := petal(t, "", "run", "--backend", "cpu:delta=chunked,delta-chunk=8", "--raw", cases[0].PromptText,
			"--temperature", "0", "--max-tokens", "32", "--quiet")
		if r.code != 0 || r.stdout != cases[0].GeneratedText+"\n" {
			t.Fatalf("chunked delta rule: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, cases[0].GeneratedText)
		}
	})
	// the options take effect and keep the greedy answer (the chunked form
	// of the delta rule is the same math in another order)
	prompt := "def fibonacci(n):\n"
	seq := petal(t, "", "run", "--raw", prompt, "--temperature", "0", "--max-tokens", "24", "--quiet")
	chunked := petal(t, "", "run", "--backend", "cpu:delta=chunked,delta-chunk=8", "--raw", prompt,
		"--temperature", "0", "--max-tokens", "24", "--quiet")
	if seq.code != 0 || chunked.code != 0 || seq.stdout != chunked.stdout {
		t.Errorf("sequential %d %q, chunked %d %q (stderr %q): want the same greedy text", seq.code, seq.stdout, chunked.code, chunked.stdout, chunked.stderr)
	}
	r := petal(t, "", "run", "--backend", "cpu:delta=fast", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, `delta rule form "fast"`) {
		t.Errorf("a wrong option: exit %d, stderr %q", r.code, r.stderr)
	}
	r = petal(t, "", "run", "--backend", "cpu:kv", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, `"kv" is not KEY=VALUE`) {
		t.Errorf("an option without a value: exit %d, stderr %q", r.code, r.stderr)
	}
	r = petal(t, "", "run", "--help")
	if !strings.Contains(r.stdout, "delta=sequential|chunked|auto") {
		t.Errorf("--help does not list the cpu options:\n%s", r.stdout)
	}
}
