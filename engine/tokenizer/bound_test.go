package tokenizer

import (
	"strings"
	"testing"
)

// MinTokens never exceeds the real count (so it never refuses a prompt that
// fits), on text made of long tokens (where it is tightest), on text
// NFC shrinks (decomposed Hangul and accents), and around added tokens.
func TestMinTokensIsALowerBound(t *testing.T) {
	texts := append([]string{
		strings.Repeat("--------------------------------", 50),
		strings.Repeat(" ", 35*20) + "x",
		strings.Repeat("\u1100\u1161\u11a8", 300),
		strings.Repeat("e\u0301", 500),
		strings.Repeat("<|im_start|>user\nhi<|im_end|>\n", 40),
		strings.Repeat("def f(x):\n    return x\n", 100),
		"\xff\xfe\xfd a\xe2\x82",
	}, roundTripSeeds...)
	for name, tk := range map[string]*Tokenizer{"qwen3": qwen3(t), "tiny": tiny(t)} {
		for _, s := range texts {
			low, n := tk.MinTokens(s), len(tk.Encode(s))
			if low > n {
				t.Errorf("%s: MinTokens %d > %d tokens for %.40q", name, low, n, s)
			}
		}
		if got := tk.MinTokens(strings.Repeat("a", 10*tk.longestToken())); got != 10 {
			t.Errorf("%s: %d for 10 longest tokens' worth of bytes", name, got)
		}
	}
}

// FuzzMinTokens: the bound holds on any text.
func FuzzMinTokens(f *testing.F) {
	for _, s := range roundTripSeeds {
		f.Add(s)
	}
	tk := tiny(f)
	f.Fuzz(func(t *testing.T, s string) {
		if low, n := tk.MinTokens(s), len(tk.Encode(s)); low > n {
			t.Fatalf("MinTokens %d > %d tokens for %q", low, n, s)
		}
	})
}
