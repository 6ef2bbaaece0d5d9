package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// hfCrosscheck is testdata/hf_crosscheck.json, written by HF tokenizers through
// testdata/make_hf_crosscheck.py.
type hfCrosscheck struct {
	Tokenizers         string             `json:"tokenizers"`
	Qwen35Regex        string             `json:"qwen35_regex"`
	Strings            []string           `json:"strings"`
	IDs                map[string][][]int `json:"ids"`
	IDSequences        [][]int            `json:"qwen3_id_sequences"`
	Decoded            []string           `json:"qwen3_decoded"`
	DecodedSkipSpecial []string           `json:"qwen3_decoded_skip_special"`
}

func readCrosscheck(t *testing.T) hfCrosscheck {
	data, err := os.ReadFile("testdata/hf_crosscheck.json")
	if err != nil {
		t.Fatal(err)
	}
	var c hfCrosscheck
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Strings) == 0 || len(c.IDSequences) == 0 || c.Qwen35Regex != qwen35Regex {
		t.Fatal("testdata/hf_crosscheck.json is incomplete or was made with another Qwen3.5 regex")
	}
	return c
}

// qwen3WithQwen35Regex is the real Qwen3 tokenizer.json with its Split regex swapped for
// Qwen3.5's, the only pre-tokenizer change of that family (spec §4.2).
func qwen3WithQwen35Regex(t *testing.T) *Tokenizer {
	data, err := os.ReadFile(oraclePath(t, "qwen3-tokenizer/tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	from, _ := json.Marshal(qwen3Regex)
	to, _ := json.Marshal(qwen35Regex)
	if n := bytes.Count(data, from); n != 1 {
		t.Fatalf("the Qwen3 regex occurs %d times in tokenizer.json, want 1", n)
	}
	tk, err := FromJSON(bytes.Replace(data, from, to, 1))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestEncodeMatchesHFOnRandomStrings(t *testing.T) {
	c := readCrosscheck(t)
	tokenizers := map[string]*Tokenizer{
		"qwen3":                    qwen3(t),
		"tiny":                     tiny(t),
		"qwen3_vocab_qwen35_regex": qwen3WithQwen35Regex(t),
	}
	for name, tk := range tokenizers {
		want := c.IDs[name]
		if len(want) != len(c.Strings) {
			t.Fatalf("%s: %d id lists for %d strings", name, len(want), len(c.Strings))
		}
		failures := 0
		for i, s := range c.Strings {
			if got := tk.Encode(s); !slices.Equal(got, want[i]) {
				if failures++; failures <= 5 {
					t.Errorf("%s: Encode(%+q)\n got %v\nwant %v (HF tokenizers %s)", name, s, got, want[i], c.Tokenizers)
				}
			}
		}
		if failures > 0 {
			t.Errorf("%s: %d of %d strings encode differently from HF", name, failures, len(c.Strings))
		}
	}
}

func TestDecodeMatchesHFOnRandomIDs(t *testing.T) {
	c := readCrosscheck(t)
	tk := qwen3(t)
	for i, ids := range c.IDSequences {
		if got := tk.Decode(ids, false); got != c.Decoded[i] {
			t.Errorf("Decode(%v, false) = %+q, HF gives %+q", ids, got, c.Decoded[i])
		}
		if got := tk.Decode(ids, true); got != c.DecodedSkipSpecial[i] {
			t.Errorf("Decode(%v, true) = %+q, HF gives %+q", ids, got, c.DecodedSkipSpecial[i])
		}
	}
}
