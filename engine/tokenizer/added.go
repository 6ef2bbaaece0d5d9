package tokenizer

import (
	"sort"
	"strings"
)

// AddedToken is a token that is matched in the text as a whole before BPE runs (spec §4.5), such
// as <|im_start|> or <think>.
type AddedToken struct {
	ID      int
	Content string
	// Special tokens are left out by Decode and Stream when asked to skip special tokens.
	Special bool
	// Normalized tokens are matched in the normalised text rather than in the raw text.
	Normalized bool
}

// addedMatcher finds added tokens in a text: the leftmost match wins, and the longest token among
// those starting there, as the leftmost-longest automaton of HF tokenizers does.
type addedMatcher struct {
	byFirst [256][]matchToken // candidates by first byte, longest first
}

type matchToken struct {
	text string
	id   int
}

// newAddedMatcher returns nil when there is nothing to match.
func newAddedMatcher(toks []matchToken) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	m := &addedMatcher{}
	for _, tok := range toks {
		if tok.text == "" {
			continue
		}
		m.byFirst[tok.text[0]] = append(m.byFirst[tok.text[0]], tok)
	}
	for i := range m.byFirst {
		sort.SliceStable(m.byFirst[i], func(a, b int) bool {
			return len(m.byFirst[i][a].text) > len(m.byFirst[i][b].text)
		})
	}
	return m
}

// split calls emit, in text order, with each stretch of ordinary text (id -1) and each matched
// token (its id). Empty stretches are not reported.
func (m *addedMatcher) split(text string, emit func(segment string, id int)) {
	if m == nil {
		if text != "" {
			emit(text, -1)
		}
		return
	}
	last := 0
	for i := 0; i < len(text); {
		tok, ok := m.matchAt(text, i)
		if !ok {
			i++
			continue
		}
		if i > last {
			emit(text[last:i], -1)
		}
		emit(tok.text, tok.id)
		i += len(tok.text)
		last = i
	}
	if last < len(text) {
		emit(text[last:], -1)
	}
}

func (m *addedMatcher) matchAt(text string, i int) (matchToken, bool) {
	for _, tok := range m.byFirst[text[i]] {
		if strings.HasPrefix(text[i:], tok.text) {
			return tok, true
		}
	}
	return matchToken{}, false
}
