package tokenizer

// MinTokens is a lower bound on len(Encode(text)), found without the
// pre-tokenizer or the merges, in one cheap pass: text is split at added
// tokens and normalised as Encode does it, and every other token covers at
// most as many bytes of the normalised text as the vocabulary's longest
// token. A caller can refuse a text too long for a context from it before
// paying for tokenisation.
func (t *Tokenizer) MinTokens(text string) int {
	longest := max(t.longestToken(), 1)
	n := 0
	t.rawAdded.split(text, func(segment string, id int) {
		if id >= 0 {
			n++
			return
		}
		t.normAdded.split(t.normalize(segment), func(segment string, id int) {
			if id >= 0 {
				n++
				return
			}
			n += (len(segment) + longest - 1) / longest
		})
	})
	return n
}

// longestToken is the most bytes one token decodes to.
func (t *Tokenizer) longestToken() int {
	t.longestOnce.Do(func() {
		for _, b := range t.decodeRaw {
			t.longest = max(t.longest, len(b))
		}
	})
	return t.longest
}
