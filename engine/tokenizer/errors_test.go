package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyJSON returns the tiny tokenizer.json decoded, for tests that alter it.
func tinyJSON(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(oraclePath(t, "tiny-qwen36-moe-4bit/tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestUnsupportedTokenizerJSON(t *testing.T) {
	cases := []struct {
		name  string
		alter func(doc map[string]any)
		want  string
	}{
		{"wordpiece model", func(d map[string]any) { d["model"].(map[string]any)["type"] = "WordPiece" }, `model.type "WordPiece" is not supported`},
		{"unigram model", func(d map[string]any) {
			d["model"] = map[string]any{"type": "Unigram", "unk_id": 0, "vocab": []any{[]any{"<unk>", 0.0}}}
		}, `model.type "Unigram" is not supported`},
		{"model without type", func(d map[string]any) { delete(d["model"].(map[string]any), "type") }, "model.type is missing"},
		{"byte fallback", func(d map[string]any) { d["model"].(map[string]any)["byte_fallback"] = true }, "model.byte_fallback true is not supported"},
		{"word suffix", func(d map[string]any) { d["model"].(map[string]any)["end_of_word_suffix"] = "</w>" }, `model.end_of_word_suffix "</w>" is not supported`},
		{"merge of unknown tokens", func(d map[string]any) {
			m := d["model"].(map[string]any)
			m["merges"] = append([]any{[]any{"Ġ", "qq"}}, m["merges"].([]any)...)
		}, `model.merges[0] ("Ġ" "qq"): "qq" is not in the vocabulary`},
		{"unknown normalizer", func(d map[string]any) { d["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer.type "Lowercase" is not supported`},
		{"unknown normalizer in a sequence", func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
				map[string]any{"type": "NFC"}, map[string]any{"type": "Precompiled", "precompiled_charsmap": ""}}}
		}, `normalizer.normalizers[1].type "Precompiled" is not supported`},
		{"metaspace pre-tokenizer", func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁"}
		}, `pre_tokenizer.type "Metaspace" is not supported`},
		{"split merged with next", func(d map[string]any) {
			split := d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
			split["behavior"] = "MergedWithNext"
		}, `pre_tokenizer.pretokenizers[0].behavior "MergedWithNext" is not supported`},
		{"no byte level step", func(d map[string]any) {
			pre := d["pre_tokenizer"].(map[string]any)
			pre["pretokenizers"] = pre["pretokenizers"].([]any)[:1]
		}, "pre_tokenizer has no ByteLevel step"},
		{"bad split regex", func(d map[string]any) {
			split := d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)
			split["pattern"] = map[string]any{"Regex": "(unclosed"}
		}, "pre_tokenizer.pretokenizers[0].pattern:"},
		{"wordpiece decoder", func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece", "prefix": "##"} }, `decoder.type "WordPiece" is not supported`},
		{"no decoder", func(d map[string]any) { d["decoder"] = nil }, "decoder is missing"},
		{"lstrip added token", func(d map[string]any) {
			d["added_tokens"].([]any)[2].(map[string]any)["lstrip"] = true
		}, `added_tokens[2] ("<|im_end|>"): lstrip true is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := tinyJSON(t)
			c.alter(doc)
			_, err := FromJSON(mustJSON(t, doc))
			if err == nil {
				t.Fatalf("FromJSON accepted it; want an error containing %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), "tokenizer: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to start with \"tokenizer: \" and contain %q", err, c.want)
			}
		})
	}
	if _, err := FromJSON([]byte(`{"model": `)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("truncated JSON: error %v, want \"not valid JSON\"", err)
	}
}

// The unaltered tiny file must load through FromJSON too, so the cases above fail for their reason.
func TestTinyJSONRoundTripsThroughFromJSON(t *testing.T) {
	tk, err := FromJSON(mustJSON(t, tinyJSON(t)))
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Encode("Hello, world!"); len(got) == 0 || tk.Decode(got, false) != "Hello, world!" {
		t.Errorf("re-serialised tiny tokenizer encodes %v", got)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "tokenizer.json")) {
		t.Errorf("missing file: error %v, want the path in it", err)
	}
	doc := tinyJSON(t)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), mustJSON(t, doc), 0o644); err != nil {
		t.Fatal(err)
	}
	config := `{"eos_token": "<|im_end|>", "added_tokens_decoder": {"4072": {"content": "<|im_end|>", "special": false}}}`
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), cfgPath) || !strings.Contains(err.Error(), "added_tokens_decoder[4072]") {
		t.Errorf("conflicting config: error %v, want it to name %s and added_tokens_decoder[4072]", err, cfgPath)
	}
	if err := os.WriteFile(cfgPath, []byte(`{"eos_token": "<|nope|>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), cfgPath+`: eos_token "<|nope|>" is not a token`) {
		t.Errorf("unknown eos_token: error %v", err)
	}
}
