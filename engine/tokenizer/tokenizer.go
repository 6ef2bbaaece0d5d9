// Package tokenizer is the byte-level BPE tokenizer of the Qwen family, read from a Hugging Face
// tokenizer.json: added tokens, NFC, the Split regex of the file, the GPT-2 byte table and ranked
// merges (spec §4). Encoding and decoding give the same ids and text as HF tokenizers.
package tokenizer

import (
	"sync"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to ids and back. It is safe for concurrent use.
type Tokenizer struct {
	normalizers []norm.Form
	pre         preTokenizer
	model       bpe

	vocab      map[string]int // vocabulary strings of the model
	tokens     []string       // id -> token string (model tokens, then added tokens over them)
	known      []bool         // id -> whether the id names a token
	decodeRaw  [][]byte       // id -> the bytes the token decodes to
	added      []AddedToken
	addedByID  map[int]int // id -> index in added
	rawAdded   *addedMatcher
	normAdded  *addedMatcher
	eosID      int
	eosPresent bool

	longestOnce sync.Once // longest: the most bytes a token decodes to (MinTokens)
	longest     int
}

// Encode returns the ids of text. Special tokens written in the text are recognised; no BOS or
// EOS is ever added. Invalid UTF-8 bytes in text are encoded byte for byte.
func (t *Tokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text)/3+1)
	t.rawAdded.split(text, func(segment string, id int) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		t.normAdded.split(t.normalize(segment), func(segment string, id int) {
			if id >= 0 {
				ids = append(ids, id)
				return
			}
			t.pre.each(segment, func(piece string) {
				ids = t.model.appendPiece(ids, piece)
			})
		})
	})
	return ids
}

func (t *Tokenizer) normalize(s string) string {
	for _, f := range t.normalizers {
		s = f.String(s)
	}
	return s
}

// Token returns the vocabulary string of id (byte-level spelling, e.g. "Ġworld"), or "" when no
// token has that id.
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id of a vocabulary string or added token.
func (t *Tokenizer) ID(token string) (int, bool) {
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	id, ok := t.vocab[token]
	return id, ok
}

// VocabSize is one more than the highest id of the tokenizer (model vocabulary and added tokens).
// A model's embedding table may be larger.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// IsSpecial reports whether id is an added token flagged special.
func (t *Tokenizer) IsSpecial(id int) bool {
	i, ok := t.addedByID[id]
	return ok && t.added[i].Special
}

// AddedTokens returns the added tokens in id order.
func (t *Tokenizer) AddedTokens() []AddedToken {
	return append([]AddedToken(nil), t.added...)
}

// EOS returns the id of eos_token from tokenizer_config.json, when Load found one.
func (t *Tokenizer) EOS() (int, bool) { return t.eosID, t.eosPresent }
