package tokenizer

import (
	"encoding/json"
	"slices"
	"testing"
)

const (
	qwen3Regex  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen35Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// handMadeTokenizer is a Qwen-shaped tokenizer.json with the given Split regex, a vocabulary of
// the 256 single bytes (id = byte value) and merges that spell "x" + U+0301 (bytes CC 81) as one
// token. Because merges never cross pieces, that token appears only if x and the mark share a piece.
func handMadeTokenizer(t *testing.T, regex string) *Tokenizer {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	x, cc, x81 := "x", string(byteToRune[0xCC]), string(byteToRune[0x81])
	vocab[x+cc] = 256
	vocab[x+cc+x81] = 257
	doc := map[string]any{
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{
			[]any{x, cc}, []any{x + cc, x81},
		}},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// The Split regex is read from tokenizer.json: Qwen3.5 (spec §4.2) lets combining marks continue a
// word, Qwen3 starts a new piece at the mark. x + U+0301 has no precomposed form, so NFC keeps it.
func TestSplitRegexComesFromTheFile(t *testing.T) {
	text := "x\u0301y 12"
	cases := []struct {
		regex string
		want  []int
	}{
		// [\p{L}\p{M}]+ takes "x\u0301y" whole, so the two merges apply; digits stay one per piece.
		{qwen35Regex, []int{257, 'y', ' ', '1', '2'}},
		// \p{L}+ stops at the mark; "\u0301y" is the next piece (the mark as the optional lead).
		{qwen3Regex, []int{'x', 0xCC, 0x81, 'y', ' ', '1', '2'}},
	}
	for _, c := range cases {
		tk := handMadeTokenizer(t, c.regex)
		if got := tk.Encode(text); !slices.Equal(got, c.want) {
			t.Errorf("regex %s: Encode(%q) = %v, want %v", c.regex, text, got, c.want)
		}
		if got := tk.Decode(tk.Encode(text), false); got != text {
			t.Errorf("regex %s: round trip gave %q", c.regex, got)
		}
	}
}

// The plain ByteLevel pre-tokenizer with use_regex applies HF's built-in GPT-2 split; with
// add_prefix_space it puts a space before text that does not start with one.
func TestByteLevelRegexVariant(t *testing.T) {
	doc := tinyJSON(t)
	doc["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	tk, err := FromJSON(mustJSON(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	tk.pre.each("Hello world's 12345  \n\tend", func(p string) { pieces = append(pieces, p) })
	// GPT-2 keeps digit runs together and lets a space lead a word; Qwen splits digits one by one.
	// \s+(?!\S) leaves the last whitespace before "end" to the final \s+ alternative.
	want := []string{"Hello", " world", "'s", " 12345", "  \n", "\t", "end"}
	if !slices.Equal(pieces, want) {
		t.Errorf("pieces %q, want %q", pieces, want)
	}
	doc["pre_tokenizer"].(map[string]any)["add_prefix_space"] = true
	if tk, err = FromJSON(mustJSON(t, doc)); err != nil {
		t.Fatal(err)
	}
	pieces = nil
	tk.pre.each("Hello world", func(p string) { pieces = append(pieces, p) })
	if want := []string{" Hello", " world"}; !slices.Equal(pieces, want) {
		t.Errorf("with add_prefix_space: pieces %q, want %q", pieces, want)
	}
}
