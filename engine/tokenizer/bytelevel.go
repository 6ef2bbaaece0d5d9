package tokenizer

// The GPT-2 byte table (spec §4.3): byte-level BPE vocabularies spell every byte as a printable
// code point so that tokens are readable strings. Bytes 33–126, 161–172 and 174–255 stand for
// themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, …
var (
	byteToRune [256]rune
	runeToByte [0x144]int16 // -1 where the code point is not in the table
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printableByte(b) {
			r = next
			next++
		}
		byteToRune[b] = r
		runeToByte[r] = int16(b)
	}
}

func printableByte(b int) bool {
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)
}

// tokenBytes inverts the table for one token string. Like the ByteLevel decoder of HF tokenizers,
// a token holding any code point outside the table contributes its own UTF-8 bytes instead.
func tokenBytes(tok string) []byte {
	if raw, ok := byteLevelBytes(tok); ok {
		return raw
	}
	return []byte(tok)
}

// byteLevelBytes inverts the table; ok is false when tok has a code point outside it.
func byteLevelBytes(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r >= rune(len(runeToByte)) || runeToByte[r] < 0 {
			return nil, false
		}
		out = append(out, byte(runeToByte[r]))
	}
	return out, true
}
