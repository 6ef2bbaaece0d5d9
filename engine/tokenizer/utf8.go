package tokenizer

import "unicode/utf8"

// appendLossyUTF8 appends src to dst with every ill-formed sequence replaced by U+FFFD, one per
// maximal subpart (the Unicode "substitution of maximal subparts" practice, which Python's
// bytes.decode(errors="replace") and Rust's String::from_utf8_lossy in HF tokenizers follow; Go's
// strings.ToValidUTF8 merges runs and utf8.DecodeRune replaces byte by byte, so neither matches).
// When final is false, a truncated but so far valid sequence at the end of src is left over: it
// returns how many bytes of src it consumed.
func appendLossyUTF8(dst, src []byte, final bool) ([]byte, int) {
	i := 0
	for i < len(src) {
		b := src[i]
		if b < utf8.RuneSelf {
			dst = append(dst, b)
			i++
			continue
		}
		n, lo, hi := sequenceShape(b)
		if n == 0 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			continue
		}
		// Count the bytes that still form a valid prefix of a sequence of length n.
		k := 1
		for k < n && i+k < len(src) {
			c := src[i+k]
			if k == 1 && (c < lo || c > hi) || k > 1 && (c < 0x80 || c > 0xBF) {
				break
			}
			k++
		}
		switch {
		case k == n:
			dst = append(dst, src[i:i+n]...)
		case i+k == len(src) && !final:
			return dst, i
		default:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		}
		i += k
	}
	return dst, i
}

// sequenceShape gives the length of the UTF-8 sequence that lead byte b starts and the allowed
// range of its second byte (which excludes overlongs, surrogates and code points over U+10FFFF);
// n is 0 for a byte that cannot start a sequence.
func sequenceShape(b byte) (n int, lo, hi byte) {
	switch {
	case b >= 0xC2 && b <= 0xDF:
		return 2, 0x80, 0xBF
	case b == 0xE0:
		return 3, 0xA0, 0xBF
	case b == 0xED:
		return 3, 0x80, 0x9F
	case b >= 0xE1 && b <= 0xEF:
		return 3, 0x80, 0xBF
	case b == 0xF0:
		return 4, 0x90, 0xBF
	case b >= 0xF1 && b <= 0xF3:
		return 4, 0x80, 0xBF
	case b == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}
