package tokenizer

// Decode returns the text of ids (spec §4.10): the bytes of every token in order, read as UTF-8
// with ill-formed sequences replaced by U+FFFD exactly as HF tokenizers do. Ids that name no token
// are skipped, as HF does; with skipSpecial, so are special added tokens.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	var raw []byte
	for _, id := range ids {
		raw = append(raw, t.bytesOf(id, skipSpecial)...)
	}
	out, _ := appendLossyUTF8(make([]byte, 0, len(raw)), raw, true)
	return string(out)
}

// bytesOf returns the bytes id contributes to decoded text.
func (t *Tokenizer) bytesOf(id int, skipSpecial bool) []byte {
	if id < 0 || id >= len(t.known) || !t.known[id] {
		return nil
	}
	if skipSpecial && t.IsSpecial(id) {
		return nil
	}
	return t.decodeRaw[id]
}

// Stream decodes ids one at a time, for printing text while it is generated. It never returns
// part of a multi-byte character: incomplete bytes wait for the ids that complete them. The
// concatenation of everything Push and Flush return equals Decode of all the ids. A Stream is
// not safe for concurrent use.
type Stream struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
}

// NewStream starts a stream decoder; skipSpecial leaves special added tokens out, as in Decode.
func NewStream(t *Tokenizer, skipSpecial bool) *Stream {
	return &Stream{t: t, skipSpecial: skipSpecial}
}

// Push adds one id and returns the text that is complete now (possibly "").
func (s *Stream) Push(id int) string {
	s.pending = append(s.pending, s.t.bytesOf(id, s.skipSpecial)...)
	out, used := appendLossyUTF8(nil, s.pending, false)
	s.pending = append(s.pending[:0], s.pending[used:]...)
	return string(out)
}

// Flush ends the stream: bytes still waiting for the rest of their character become U+FFFD, as
// they would at the end of Decode. The stream can then be reused from empty.
func (s *Stream) Flush() string {
	out, _ := appendLossyUTF8(nil, s.pending, true)
	s.pending = s.pending[:0]
	return string(out)
}
