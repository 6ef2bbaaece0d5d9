package tokenizer

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// roundTripSeeds are awkward inputs besides the golden strings.
var roundTripSeeds = []string{
	"", "a", " ", "  \n\n  \t", "x   \ny", "a\n\n b", "e\u0301", "\u212b", "\u1100\u1161\u11a8",
	"\u00a0\u3000\u2028\u0085", "'S'LL'd 're", "12345", "\U0001f469\u200d\U0001f4bb", "\ufeff",
	"\x00\x01\x7f", "٣٤٥ ١٢", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "a\u0300\u0301\u0302b", "\r\n\r\r\n", "<|im_start", "<|im_end|",
}

// FuzzRoundTrip: decoding the encoding of valid UTF-8 gives back its NFC form. Invalid bytes are
// encoded byte for byte, so they come back as U+FFFD, one per maximal ill-formed subpart.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range roundTripSeeds {
		f.Add(s)
	}
	for _, c := range readGoldens(f, "qwen3.json") {
		f.Add(c.Input)
	}
	f.Add("\xff\xfe a\xe2\x82 x")
	f.Add("A\u030a\xcc")
	tk := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		// Added tokens are cut out before NFC, so NFC(s) is only the target when none occurs:
		// NFC would turn "<|im_end|>\u0338" into "<|im_end|≯".
		for _, a := range tk.added {
			if strings.Contains(s, a.Content) {
				t.Skip("contains an added token")
			}
		}
		want := norm.NFC.String(s)
		if !utf8.ValidString(s) {
			lossy, _ := appendLossyUTF8(nil, []byte(want), true)
			want = string(lossy)
		}
		ids := tk.Encode(s)
		if got := tk.Decode(ids, false); got != want {
			t.Fatalf("Decode(Encode(%+q)) = %+q, want %+q (ids %v)", s, got, want, ids)
		}
		if got := tk.Decode(ids, true); got != want {
			t.Fatalf("with skipSpecial: Decode(Encode(%+q)) = %+q, want %+q", s, got, want)
		}
	})
}

// streamIDs turns fuzz bytes into ids that stress the stream decoder: single bytes (mostly
// partial UTF-8), arbitrary vocabulary ids, added tokens (special or not) and unknown ids.
func streamIDs(tk *Tokenizer, data []byte) []int {
	var ids []int
	for ; len(data) >= 3; data = data[3:] {
		v := int(binary.LittleEndian.Uint16(data[1:3]))
		switch data[0] % 6 {
		case 0, 1, 2:
			ids = append(ids, int(tk.model.byteIDs[byte(v)]))
		case 3:
			ids = append(ids, v*tk.VocabSize()/65536)
		case 4:
			ids = append(ids, tk.added[v%len(tk.added)].ID)
		default:
			ids = append(ids, []int{-1, tk.VocabSize(), tk.VocabSize() + v}[v%3])
		}
	}
	return ids
}

// FuzzStream: a stream decoder never emits broken UTF-8, and what it emits adds up to Decode.
func FuzzStream(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0xE2, 0, 0, 0x82, 0, 0, 0xAC, 0})                      // "€" one byte per id
	f.Add([]byte{0, 0xF0, 0, 0, 0x9F, 0, 4, 1, 0, 0, 0x98, 0, 0, 0x80, 0}) // a special token inside "😀"
	f.Add([]byte{0, 0xE2, 0, 0, 0x82, 0, 0, 'A', 0})                       // truncated, then ASCII
	f.Add([]byte{0, 0xC3, 0, 5, 7, 0, 0, 0xA9, 0})                         // unknown id inside "é"
	f.Add([]byte{3, 0x34, 0x12, 3, 0xFF, 0xEE, 0, 0xF0, 0, 3, 0, 0x80})    // vocabulary ids around a lead byte
	tk := qwen3(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ids := streamIDs(tk, data)
		for _, skip := range []bool{false, true} {
			s := NewStream(tk, skip)
			var got strings.Builder
			for _, id := range ids {
				out := s.Push(id)
				if !utf8.ValidString(out) {
					t.Fatalf("Push(%d) returned invalid UTF-8 %q", id, out)
				}
				got.WriteString(out)
			}
			got.WriteString(s.Flush())
			if want := tk.Decode(ids, skip); got.String() != want {
				t.Fatalf("skip special %v, ids %v: stream %+q, Decode %+q", skip, ids, got.String(), want)
			}
		}
	})
}
