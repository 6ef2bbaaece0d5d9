package main

// End-to-end tests of damaged checkpoints: a model whose weights hold NaN
// or infinities must fail each job cleanly, never panic, never answer.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/fixtures"
)

// poisonedModel unpacks the embedded model into a temporary folder and
// overwrites count values of a bfloat16 tensor (from element first) with
// the bit pattern bits: 0x7fc0 is NaN, 0x7f80 +Inf.
func poisonedModel(t *testing.T, tensor string, first, count int, bits uint16) string {
	t.Helper()
	dir, err := fixtures.DefaultModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil || json.Unmarshal(data, &index) != nil {
		t.Fatalf("index: %v", err)
	}
	shard := filepath.Join(dir, index.WeightMap[tensor])
	file, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(file)
	var header map[string]struct {
		DType       string  `json:"dtype"`
		DataOffsets []int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(file[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	e, ok := header[tensor]
	if !ok || e.DType != "BF16" {
		t.Fatalf("tensor %s: %+v, want a BF16 tensor", tensor, e)
	}
	at := 8 + int64(n) + e.DataOffsets[0] + 2*int64(first)
	if at+2*int64(count) > 8+int64(n)+e.DataOffsets[1] {
		t.Fatalf("tensor %s has fewer than %d values", tensor, first+count)
	}
	for i := 0; i < count; i++ {
		binary.LittleEndian.PutUint16(file[at+2*int64(i):], bits)
	}
	if err := os.WriteFile(shard, file, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const poisonedJobs = `{"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}}
{"custom_id": "text", "method": "POST", "url": "/v1/completions", "body": {"prompt": "def f(x):", "max_tokens": 8, "temperature": 0.7, "seed": 3, "logprobs": 2, "echo": true}}
`

// TestBatchPoisonedWeights: NaN or an infinity in the lm_head, a router, a
// norm or the embedding gives every job an error line (status 500, the
// non-finite logits named) and exit 1, and perplexity an error for the
// line: no panic, no garbage answered.
func TestBatchPoisonedWeights(t *testing.T) {
	const nan, inf = 0x7fc0, 0x7f80
	for _, tc := range []struct {
		name, tensor string
		first, count int
		bits         uint16
	}{
		{"lm_head", "language_model.lm_head.scales", 0, 8, nan}, // two rows of logits only
		{"router", "language_model.model.layers.0.mlp.gate.scales", 0, 4, nan},
		{"router inf", "language_model.model.layers.2.mlp.gate.scales", 4, 1, inf},
		{"final norm", "language_model.model.norm.weight", 5, 1, nan},
		{"input norm", "language_model.model.layers.0.input_layernorm.weight", 0, 1, inf},
		{"embedding", "language_model.model.embed_tokens.scales", 0, 4096 * 4, nan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := poisonedModel(t, tc.tensor, tc.first, tc.count, tc.bits)
			in := filepath.Join(t.TempDir(), "jobs.jsonl")
			out := filepath.Join(t.TempDir(), "out.jsonl")
			if err := os.WriteFile(in, []byte(poisonedJobs), 0o644); err != nil {
				t.Fatal(err)
			}
			r := petal(t, "", "batch", in, "-o", out, "--model", model)
			if r.code != 1 || strings.Contains(r.stderr, "panic") {
				t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
			}
			lines := readLines(t, out)
			if len(lines) != 2 {
				t.Fatalf("%d result lines, want 2:\n%s", len(lines), strings.Join(rawLines(t, out), "\n"))
			}
			for i, l := range lines {
				resp, _ := l["response"].(map[string]any)
				body, _ := resp["body"].(map[string]any)
				e, _ := body["error"].(map[string]any)
				if resp["status_code"] != float64(500) || e == nil ||
					!strings.Contains(fmt.Sprint(e["message"]), "the model produced non-finite logits at position") {
					t.Errorf("line %d: %v, want status 500 naming the non-finite logits", i+1, l)
				}
			}
			// scoring fails the same way: an error for the line, no NaN printed
			r = petal(t, `{"text": "def f(x):\n    return x"}`+"\n", "perplexity", "--json", "-", "--model", model)
			if r.code != 1 || strings.Contains(r.stdout, `"nll"`) || !strings.Contains(r.stderr+r.stdout, "non-finite logits at position") {
				t.Errorf("perplexity: exit %d, stdout %q, stderr %q; want exit 1 naming the non-finite logits", r.code, r.stdout, r.stderr)
			}
		})
	}
}
