package tokenizer

import "testing"

// Facts about the oracle tokenizers stated in shared/oracle/README.md and their config files.
func TestVocabularyFacts(t *testing.T) {
	cases := []struct {
		name       string
		tk         *Tokenizer
		size       int
		firstAdded int
		eos        int
	}{
		{"qwen3", qwen3(t), 151669, 151643, 151645},
		{"tiny", tiny(t), 4096, 4070, 4072},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.tk.VocabSize(); got != c.size {
				t.Errorf("VocabSize = %d, want %d", got, c.size)
			}
			added := c.tk.AddedTokens()
			if len(added) != 26 {
				t.Fatalf("%d added tokens, want 26", len(added))
			}
			// Qwen's order: <|endoftext|>, <|im_start|>, <|im_end|>, …; the first 14 are special.
			wantFirst := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
			for i, a := range added {
				if a.ID != c.firstAdded+i {
					t.Errorf("added[%d].ID = %d, want %d", i, a.ID, c.firstAdded+i)
				}
				if i < len(wantFirst) && a.Content != wantFirst[i] {
					t.Errorf("added[%d] = %q, want %q", i, a.Content, wantFirst[i])
				}
				if wantSpecial := i < 14; a.Special != wantSpecial || c.tk.IsSpecial(a.ID) != wantSpecial {
					t.Errorf("%q special = %v / IsSpecial %v, want %v", a.Content, a.Special, c.tk.IsSpecial(a.ID), wantSpecial)
				}
				if a.Normalized {
					t.Errorf("%q is normalized; Qwen's added tokens are matched in raw text", a.Content)
				}
				if c.tk.Token(a.ID) != a.Content {
					t.Errorf("Token(%d) = %q, want %q", a.ID, c.tk.Token(a.ID), a.Content)
				}
			}
			if id, ok := c.tk.ID("<think>"); !ok || id != c.firstAdded+24 || c.tk.IsSpecial(id) {
				t.Errorf("<think>: id %d ok %v special %v; want %d, not special", id, ok, c.tk.IsSpecial(id), c.firstAdded+24)
			}
			if id, ok := c.tk.EOS(); !ok || id != c.eos {
				t.Errorf("EOS = %d, %v; want %d (<|im_end|>)", id, ok, c.eos)
			}
			if c.tk.IsSpecial(0) || c.tk.Token(-1) != "" || c.tk.Token(c.size) != "" {
				t.Error("ids outside the added tokens must not be special, and unknown ids have no token")
			}
		})
	}
}

// Byte-level spelling of ordinary tokens (spec §4.3): space is Ġ, newline Ċ.
func TestByteTable(t *testing.T) {
	cases := map[byte]rune{0: 0x100, ' ': 0x120, '\n': 0x10A, 0x7F: 0x121, 0xAD: 0x143, 'A': 'A', 0xFF: 0xFF}
	for b, r := range cases {
		if byteToRune[b] != r {
			t.Errorf("byte %#x -> %U, want %U", b, byteToRune[b], r)
		}
	}
	tk := qwen3(t)
	if id, ok := tk.ID("Ġworld"); !ok || tk.Decode([]int{id}, false) != " world" {
		t.Errorf(`"Ġworld" must exist and decode to " world"`)
	}
	if ids := tk.Encode("\n"); len(ids) != 1 || tk.Token(ids[0]) != "Ċ" {
		t.Errorf(`Encode("\n") = %v, want the single token "Ċ"`, ids)
	}
}

func TestTokenBytes(t *testing.T) {
	tk := qwen3(t)
	id, _ := tk.ID("Ġworld")
	if got := string(tk.TokenBytes(id)); got != " world" {
		t.Errorf("TokenBytes(Ġworld) = %q, want \" world\"", got)
	}
	// "ä¸" is the first two bytes of a three-byte CJK character.
	if id, ok := tk.ID("ä¸"); !ok || string(tk.TokenBytes(id)) != "\xe4\xb8" {
		t.Errorf("TokenBytes(ä¸) = % x, want e4 b8", tk.TokenBytes(id))
	}
	if tk.TokenBytes(-1) != nil || tk.TokenBytes(tk.VocabSize()) != nil {
		t.Error("unknown ids must give nil")
	}
	if got := string(tk.TokenBytes(151644)); got != "<|im_start|>" {
		t.Errorf("TokenBytes of <|im_start|> = %q", got)
	}
}
