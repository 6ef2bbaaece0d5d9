package tokenizer

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"unicode/utf8"
)

// utf8Golden is one case of testdata/utf8_replace.json, written by Python's
// bytes.decode("utf-8", errors="replace") (testdata/make_utf8_goldens.py).
type utf8Golden struct {
	Hex     string `json:"hex"`
	Decoded string `json:"decoded"`
}

func readUTF8Goldens(t *testing.T) []utf8Golden {
	data, err := os.ReadFile("testdata/utf8_replace.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []utf8Golden
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 256 {
		t.Fatalf("only %d cases in testdata/utf8_replace.json", len(cases))
	}
	return cases
}

func TestLossyUTF8MatchesPython(t *testing.T) {
	for _, c := range readUTF8Goldens(t) {
		src, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		got, used := appendLossyUTF8(nil, src, true)
		if string(got) != c.Decoded || used != len(src) {
			t.Errorf("% x: got %+q (used %d of %d), Python gives %+q", src, got, used, len(src), c.Decoded)
		}
	}
}

// Decoding single-byte tokens must give what Python gives for the bytes, in one shot and streamed.
func TestDecodeByteTokensMatchesPython(t *testing.T) {
	tk := qwen3(t)
	for _, c := range readUTF8Goldens(t) {
		src, _ := hex.DecodeString(c.Hex)
		ids := make([]int, len(src))
		for i, b := range src {
			id, ok := tk.ID(string(byteToRune[b]))
			if !ok {
				t.Fatalf("no token for byte %#x", b)
			}
			ids[i] = id
		}
		if got := tk.Decode(ids, false); got != c.Decoded {
			t.Errorf("Decode of bytes % x = %+q, Python gives %+q", src, got, c.Decoded)
		}
		s := NewStream(tk, false)
		streamed := ""
		for _, id := range ids {
			out := s.Push(id)
			if !utf8.ValidString(out) {
				t.Fatalf("Push returned invalid UTF-8 %q for bytes % x", out, src)
			}
			streamed += out
		}
		if streamed += s.Flush(); streamed != c.Decoded {
			t.Errorf("streamed bytes % x = %+q, Python gives %+q", src, streamed, c.Decoded)
		}
	}
}
