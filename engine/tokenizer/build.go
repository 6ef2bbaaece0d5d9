package tokenizer

import (
	"fmt"
	"sort"
)

// build makes the lookup tables: id -> token string and decoded bytes, the added-token matchers
// and, for ignore_merges, the whole-token index.
func (d *draft) build() (*Tokenizer, error) {
	t := d.t
	sort.SliceStable(d.added, func(i, j int) bool { return d.added[i].ID < d.added[j].ID })
	size := 0
	for _, id := range t.vocab {
		size = max(size, id+1)
	}
	for _, a := range d.added {
		size = max(size, a.ID+1)
	}
	t.tokens = make([]string, size)
	t.known = make([]bool, size)
	for tok, id := range t.vocab {
		if t.known[id] {
			return nil, fmt.Errorf("model.vocab: id %d is used by both %q and %q", id, t.tokens[id], tok)
		}
		t.tokens[id], t.known[id] = tok, true
	}
	t.added = d.added
	t.addedByID = make(map[int]int, len(d.added))
	var raw, normalized []matchToken
	seen := make(map[string]int, len(d.added))
	for i, a := range d.added {
		if other, dup := seen[a.Content]; dup {
			return nil, fmt.Errorf("added token %q has two ids, %d and %d", a.Content, other, a.ID)
		}
		if _, dup := t.addedByID[a.ID]; dup {
			return nil, fmt.Errorf("added token id %d is used twice", a.ID)
		}
		seen[a.Content] = a.ID
		t.addedByID[a.ID] = i
		t.tokens[a.ID], t.known[a.ID] = a.Content, true
		if a.Normalized {
			normalized = append(normalized, matchToken{text: t.normalize(a.Content), id: a.ID})
		} else {
			raw = append(raw, matchToken{text: a.Content, id: a.ID})
		}
	}
	t.rawAdded = newAddedMatcher(raw)
	t.normAdded = newAddedMatcher(normalized)
	t.buildDecodeTable()
	if t.model.ignoreMerges {
		t.model.wholeIDs = make(map[string]int32, len(t.vocab))
		for tok, id := range t.vocab {
			if raw, ok := byteLevelBytes(tok); ok {
				t.model.wholeIDs[string(raw)] = int32(id)
			}
		}
	}
	return t, nil
}

// buildDecodeTable stores the decoded bytes of every token in one buffer.
func (t *Tokenizer) buildDecodeTable() {
	ends := make([]int, len(t.tokens))
	var buf []byte
	for id, tok := range t.tokens {
		buf = append(buf, tokenBytes(tok)...)
		ends[id] = len(buf)
	}
	t.decodeRaw = make([][]byte, len(t.tokens))
	start := 0
	for id, end := range ends {
		t.decodeRaw[id] = buf[start:end:end]
		start = end
	}
}
