package session

import (
	"slices"
	"sync"

	"petal/engine/model"
)

// PrefixCache is the anonymous prefix cache for requests without a session:
// recent states in memory (bounded in bytes, least recently used evicted),
// backed by a Store's on-disk prefix snapshots when one is given, so that
// prefixes are reused within a run and across runs. Safe for concurrent use.
type PrefixCache struct {
	store    *Store
	maxBytes int64

	mu      sync.Mutex
	entries []*memEntry // least recently used first
	used    int64
}

type memEntry struct {
	data  model.StateData
	bytes int64
}

// NewPrefixCache makes a cache keeping up to maxBytes of states in memory;
// store may be nil (memory only).
func NewPrefixCache(store *Store, maxBytes int64) *PrefixCache {
	return &PrefixCache{store: store, maxBytes: maxBytes}
}

// LongestPrefix returns the longest cached state whose tokens are a proper
// prefix of prompt, from memory or from disk (a disk hit is kept in memory
// too). The returned Data is shared with the cache: read it (model.Import
// copies it), never modify it.
func (c *PrefixCache) LongestPrefix(prompt []int32) (Restored, bool, error) {
	c.mu.Lock()
	var best *memEntry
	for _, e := range c.entries {
		if isProperPrefix(e.data.Tokens, prompt) && (best == nil || len(e.data.Tokens) > len(best.data.Tokens)) {
			best = e
		}
	}
	if best != nil {
		c.use(best)
	}
	c.mu.Unlock()

	var r Restored
	if best != nil {
		r = Restored{Data: best.data, Snapshot: SnapshotInfo{Tokens: len(best.data.Tokens), Bytes: best.bytes}}
	}
	if c.store == nil {
		return r, best != nil, nil
	}
	floor := 0
	if best != nil {
		floor = len(best.data.Tokens)
	}
	disk, ok, err := c.store.longestPrefix(prompt, floor)
	if err != nil || !ok {
		r.Skipped = disk.Skipped
		return r, best != nil, err
	}
	c.mu.Lock()
	c.insert(disk.Data)
	c.mu.Unlock()
	return disk, true, nil
}

// Add keeps d (which the cache then owns: do not modify it) in memory and,
// with a store, on disk; the error is the disk write's.
func (c *PrefixCache) Add(d model.StateData) error {
	c.mu.Lock()
	c.insert(d)
	c.mu.Unlock()
	if c.store == nil {
		return nil
	}
	_, err := c.store.SavePrefix(d)
	return err
}

// insert adds d as the most recently used entry, replacing one with the
// same tokens and evicting the least recently used beyond maxBytes.
func (c *PrefixCache) insert(d model.StateData) {
	size := stateBytes(&d)
	if size > c.maxBytes || len(d.Tokens) == 0 {
		return
	}
	c.entries = slices.DeleteFunc(c.entries, func(e *memEntry) bool {
		if slices.Equal(e.data.Tokens, d.Tokens) {
			c.used -= e.bytes
			return true
		}
		return false
	})
	for c.used+size > c.maxBytes {
		c.used -= c.entries[0].bytes
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, &memEntry{data: d, bytes: size})
	c.used += size
}

// use moves e to the most recently used end.
func (c *PrefixCache) use(e *memEntry) {
	i := slices.Index(c.entries, e)
	c.entries = append(slices.Delete(c.entries, i, i+1), e)
}

// stateBytes is the memory a state holds.
func stateBytes(d *model.StateData) int64 {
	n := int64(len(d.Tokens))
	for _, set := range [][][]float32{d.K, d.V, d.Conv, d.Recur} {
		for _, v := range set {
			n += int64(len(v))
		}
	}
	return 4 * n
}
