package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBF16KV: --backend cpu:kv=bf16 runs the greedy reference case to its
// reference text (the bf16 run of the reference agrees with float32 there),
// --help lists the option, and a session saved with bf16 KV caches is
// continued with them but refused, naming the option, by an f32 run.
func TestBF16KV(t *testing.T) {
	t.Run("reference", func(t *testing.T) {
		cases := greedyCases(t)
		r := petal(t, "", "run", "--backend", "cpu:kv=bf16", "--raw", cases[0].PromptText,
			"--temperature", "0", "--max-tokens", "32", "--quiet")
		if r.code != 0 || r.stdout != cases[0].GeneratedText+"\n" {
			t.Fatalf("kv=bf16: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, cases[0].GeneratedText)
		}
	})
	if r := petal(t, "", "run", "--help"); !strings.Contains(r.stdout, "kv=f32|bf16") {
		t.Errorf("--help does not list kv=:\n%s", r.stdout)
	}
	if r := petal(t, "", "run", "--backend", "cpu:kv=f16", "hi"); r.code != 2 || !strings.Contains(r.stderr, "f32 or bf16") {
		t.Errorf("kv=f16: exit %d, %s", r.code, r.stderr)
	}

	store := t.TempDir()
	turn := func(prompt string, backend string) result {
		return petal(t, "", "run", "--session", "s", "--sessions", store, "--backend", backend,
			"--temperature", "0", "--max-tokens", "8", "--no-think", "--json", prompt)
	}
	if r := turn("Say hello.", "cpu:kv=bf16"); r.code != 0 {
		t.Fatalf("turn 1: exit %d %s", r.code, r.stderr)
	}
	r := turn("Again.", "cpu:kv=bf16")
	if r.code != 0 {
		t.Fatalf("turn 2 with bf16: exit %d %s", r.code, r.stderr)
	}
	var c struct {
		Usage struct {
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	json.Unmarshal([]byte(r.stdout), &c)
	if c.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Errorf("turn 2 with bf16 restored nothing: %s", r.stdout)
	}
	r = turn("Once more.", "cpu")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "KV cache is bf16, this run keeps f32") || !strings.Contains(r.stdout+r.stderr, "kv= option") {
		t.Errorf("an f32 turn on a bf16 session: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestBenchProfile: bench --profile prints the time by layer kind and op
// family, and carries it in --json.
func TestBenchProfile(t *testing.T) {
	r := petal(t, "", "bench", "--lengths", "32", "--decode-tokens", "2", "--profile", "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"profile at 32", "full_attention (", "delta_net (", "attn.sdpa", "delta.rule", "moe.experts", "head.logits"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	r = petal(t, "", "bench", "--lengths", "32", "--decode-tokens", "2", "--profile", "--json", "--quiet")
	var rep struct {
		Results []struct {
			Profile struct {
				Decode struct {
					Ops []struct {
						Family    string `json:"family"`
						LayerKind string `json:"layer_kind"`
					} `json:"ops"`
				} `json:"decode"`
			} `json:"profile"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Results) != 1 || len(rep.Results[0].Profile.Decode.Ops) == 0 {
		t.Errorf("--json profile: %v %s", err, r.stdout)
	}
}
