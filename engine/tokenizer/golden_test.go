package tokenizer

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestGoldensQwen3(t *testing.T) { checkGoldens(t, qwen3(t), readGoldens(t, "qwen3.json")) }
func TestGoldensTiny(t *testing.T)  { checkGoldens(t, tiny(t), readGoldens(t, "tiny.json")) }

func checkGoldens(t *testing.T, tk *Tokenizer, cases []goldenCase) {
	for i, c := range cases {
		t.Run(fmt.Sprintf("%02d", i), func(t *testing.T) {
			ids := tk.Encode(c.Input)
			if !slices.Equal(ids, c.IDs) {
				t.Errorf("Encode(%q)\n got %v\nwant %v", c.Input, ids, c.IDs)
			}
			tokens := make([]string, len(c.IDs))
			for j, id := range c.IDs {
				tokens[j] = tk.Token(id)
				if back, ok := tk.ID(c.Tokens[j]); !ok || back != id {
					t.Errorf("ID(%q) = %d, %v; want %d", c.Tokens[j], back, ok, id)
				}
			}
			if !slices.Equal(tokens, c.Tokens) {
				t.Errorf("tokens of %q\n got %q\nwant %q", c.Input, tokens, c.Tokens)
			}
			if got := tk.Decode(c.IDs, false); got != c.Decoded {
				t.Errorf("Decode(%v, false) = %q, want %q", c.IDs, got, c.Decoded)
			}
			if got := tk.Decode(c.IDs, true); got != c.DecodedSkipSpecial {
				t.Errorf("Decode(%v, true) = %q, want %q", c.IDs, got, c.DecodedSkipSpecial)
			}
			for _, skip := range []bool{false, true} {
				want := c.Decoded
				if skip {
					want = c.DecodedSkipSpecial
				}
				s := NewStream(tk, skip)
				got := ""
				for _, id := range c.IDs {
					got += s.Push(id)
				}
				if got += s.Flush(); got != want {
					t.Errorf("stream decode (skip special %v) = %q, want %q", skip, got, want)
				}
			}
		})
	}
}

// A Tokenizer is shared by goroutines; the piece cache is the only mutable state.
func TestConcurrentEncode(t *testing.T) {
	tk := qwen3(t)
	cases := readGoldens(t, "qwen3.json")
	errs := make(chan string, 8*len(cases))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range cases {
				c := cases[(k+g*7)%len(cases)]
				if ids := tk.Encode(c.Input); !slices.Equal(ids, c.IDs) {
					errs <- fmt.Sprintf("Encode(%q) = %v, want %v", c.Input, ids, c.IDs)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
