package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchSampling: --temperature with --top-k, --top-p and --min-p times
// a sampled pick, which the table and the JSON say; the shaping flags
// without a temperature, and values run refuses, are usage errors naming
// the flag.
func TestBenchSampling(t *testing.T) {
	code, out, errs := runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--backend", "cpu", "--lengths", "16",
		"--decode-tokens", "3", "--floors=false", "--temperature", "0.7", "--top-k", "20", "--top-p", "0.8", "--min-p", "0.05", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Settings struct {
			Sampling string `json:"sampling"`
		} `json:"settings"`
		Entries []struct {
			Decode *struct {
				TokensPerSecond float64 `json:"tokens_per_second"`
			} `json:"decode"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "a sampled next token (temperature 0.7, top-k 20, top-p 0.8, min-p 0.05)"; r.Settings.Sampling != want {
		t.Errorf("settings.sampling %q, want %q", r.Settings.Sampling, want)
	}
	if len(r.Entries) != 1 || r.Entries[0].Decode == nil || !(r.Entries[0].Decode.TokensPerSecond > 0) {
		t.Errorf("results %+v: want one decode measurement", r.Entries)
	}
	code, out, errs = runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--backend", "cpu", "--lengths", "16", "--decode-tokens", "2", "--floors=false")
	if code != ExitOK || !strings.Contains(out, "each with the greedy pick of the next token") {
		t.Errorf("greedy: exit %d, table %q (%s)", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--top-p", "0.8"}, "give --temperature above 0"},
		{[]string{"--temperature", "0", "--top-k", "20"}, "give --temperature above 0"},
		{[]string{"--temperature", "5"}, "--temperature must be between 0 and 2"},
		{[]string{"--temperature", "0.7", "--top-p", "1.5"}, "--top-p"},
	} {
		args := append([]string{"bench", "--synthetic", "tiny", "--backend", "cpu", "--lengths", "16"}, c.args...)
		if code, _, errs := runMain(t, Streams{}, args...); code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want a usage error saying %q", c.args, code, errs, c.want)
		}
	}
}
