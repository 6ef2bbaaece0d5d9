package tokenizer

import (
	"strings"
	"sync"
)

// bpe is the byte-level BPE model: it turns one pre-token (raw bytes) into ids.
type bpe struct {
	byteIDs      [256]int32        // id of the single-byte token for each byte; -1 if the vocab lacks it
	merges       map[uint64]uint64 // pairKey(left, right) -> rank<<32 | merged id
	ignoreMerges bool
	wholeIDs     map[string]int32 // raw bytes of every vocab token; only built for ignore_merges
	unkID        int32            // -1 when the model has no unk_token
	fuseUnk      bool
	cache        pieceCache
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// appendPiece appends the ids of one pre-token to dst.
func (m *bpe) appendPiece(dst []int, piece string) []int {
	if ids, ok := m.cache.get(piece); ok {
		return append(dst, ids...)
	}
	start := len(dst)
	dst = m.tokenize(dst, piece)
	m.cache.put(piece, dst[start:])
	return dst
}

func (m *bpe) tokenize(dst []int, piece string) []int {
	if m.ignoreMerges {
		if id, ok := m.wholeIDs[piece]; ok {
			return append(dst, int(id))
		}
	}
	syms := make([]symbol, 0, len(piece))
	for i := 0; i < len(piece); i++ {
		id := m.byteIDs[piece[i]]
		if id < 0 {
			// As HF tokenizers: a character missing from the vocab becomes unk, or is dropped.
			if m.unkID < 0 {
				continue
			}
			if m.fuseUnk && len(syms) > 0 && syms[len(syms)-1].id == m.unkID {
				continue
			}
			id = m.unkID
		}
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1})
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1
	m.mergeAll(syms)
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, int(syms[i].id))
	}
	return dst
}

// symbol is one node of the doubly linked list of a word being merged; id < 0 marks a node
// absorbed by its left neighbour.
type symbol struct {
	id, prev, next int32
}

// mergeAll applies merges lowest rank first, leftmost first among equal ranks (spec §4.4). A heap
// of candidate pairs over a linked list keeps this O(n log n), so a megabyte-long word is cheap.
func (m *bpe) mergeAll(syms []symbol) {
	var q mergeQueue
	for i := 0; i+1 < len(syms); i++ {
		m.pushPair(&q, syms, int32(i))
	}
	for len(q) > 0 {
		top := q.pop()
		left := &syms[top.pos]
		if left.id < 0 || left.next < 0 {
			continue
		}
		right := &syms[left.next]
		// Entries go stale when a neighbour merged first; the pair must still make the same token.
		if v, ok := m.merges[pairKey(left.id, right.id)]; !ok || int32(uint32(v)) != top.newID {
			continue
		}
		left.id = top.newID
		right.id = -1
		left.next = right.next
		if left.next >= 0 {
			syms[left.next].prev = top.pos
		}
		if left.prev >= 0 {
			m.pushPair(&q, syms, left.prev)
		}
		m.pushPair(&q, syms, top.pos)
	}
}

func (m *bpe) pushPair(q *mergeQueue, syms []symbol, pos int32) {
	s := syms[pos]
	if s.next < 0 {
		return
	}
	if v, ok := m.merges[pairKey(s.id, syms[s.next].id)]; ok {
		q.push(mergeCandidate{rank: int32(v >> 32), pos: pos, newID: int32(uint32(v))})
	}
}

type mergeCandidate struct {
	rank, pos, newID int32
}

func (a mergeCandidate) before(b mergeCandidate) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeQueue is a binary min-heap ordered by (rank, position).
type mergeQueue []mergeCandidate

func (q *mergeQueue) push(c mergeCandidate) {
	h := append(*q, c)
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h[i].before(h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	*q = h
}

func (q *mergeQueue) pop() mergeCandidate {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l, r, best := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].before(h[best]) {
			best = l
		}
		if r < len(h) && h[r].before(h[best]) {
			best = r
		}
		if best == i {
			break
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
	*q = h
	return top
}

// pieceCache remembers the ids of short pre-tokens; natural text repeats them constantly. It is
// bounded: when full it starts over, which keeps memory flat on adversarial input.
type pieceCache struct {
	mu      sync.Mutex
	entries map[string][]int
}

const (
	cacheMaxEntries  = 1 << 16
	cacheMaxPieceLen = 256
)

func (c *pieceCache) get(piece string) ([]int, bool) {
	if len(piece) > cacheMaxPieceLen {
		return nil, false
	}
	c.mu.Lock()
	ids, ok := c.entries[piece]
	c.mu.Unlock()
	return ids, ok
}

func (c *pieceCache) put(piece string, ids []int) {
	if len(piece) > cacheMaxPieceLen {
		return
	}
	stored := append([]int(nil), ids...)
	key := strings.Clone(piece) // a substring would keep the caller's whole text alive
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= cacheMaxEntries {
		c.entries = make(map[string][]int)
	}
	c.entries[key] = stored
	c.mu.Unlock()
}
