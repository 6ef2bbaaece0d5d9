package tokenizer

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
)

// One megabyte that is a single pre-token must not take quadratic time: a naive merge loop needs
// minutes here. The bound is generous; a linear-logarithmic merge takes well under a second.
func TestPathologicalInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("megabyte inputs are skipped with -short")
	}
	tk := qwen3(t)
	for _, c := range []struct{ name, unit string }{{"x", "x"}, {"spaces", " "}, {"newlines", "\n"}} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Repeat(c.unit, 1<<20)
			start := time.Now()
			ids := tk.Encode(text)
			elapsed := time.Since(start)
			t.Logf("1 MiB of %q: %d ids in %v", c.unit, len(ids), elapsed)
			if elapsed > 20*time.Second {
				t.Errorf("encoding took %v; the merge is not O(n log n)", elapsed)
			}
			if got := tk.Decode(ids, false); got != text {
				t.Errorf("round trip of 1 MiB of %q changed the text", c.unit)
			}
			if len(ids) > len(text)/2 {
				t.Errorf("%d ids for %d bytes: repeated units were barely merged", len(ids), len(text))
			}
		})
	}
}

// naiveMerge is the textbook BPE loop (spec §4.4): merge the lowest-ranked adjacent pair, the
// leftmost among equals, until none is left. It is quadratic and only here to pin mergeAll.
func naiveMerge(m *bpe, ids []int32) []int32 {
	ids = slices.Clone(ids)
	for {
		best, bestRank := -1, uint64(1<<63)
		for i := 0; i+1 < len(ids); i++ {
			if v, ok := m.merges[pairKey(ids[i], ids[i+1])]; ok && v>>32 < bestRank {
				best, bestRank = i, v>>32
			}
		}
		if best < 0 {
			return ids
		}
		merged := int32(uint32(m.merges[pairKey(ids[best], ids[best+1])]))
		ids = slices.Replace(ids, best, best+2, merged)
	}
}

func TestHeapMergeMatchesNaiveMerge(t *testing.T) {
	tk := qwen3(t)
	rng := rand.New(rand.NewSource(1))
	units := []string{"a", "b", "ab", "x", " ", "  ", "\n", "the", "ing", "é", "中", "0", "!", "=", "\t"}
	words := []string{strings.Repeat("x", 5000), strings.Repeat(" ", 5000), strings.Repeat("\n", 5000)}
	for n := 0; n < 400; n++ {
		var sb strings.Builder
		for k := rng.Intn(300); k >= 0; k-- {
			sb.WriteString(units[rng.Intn(len(units))])
		}
		words = append(words, sb.String())
	}
	for _, word := range words {
		var syms []int32
		for i := 0; i < len(word); i++ {
			syms = append(syms, tk.model.byteIDs[word[i]])
		}
		want := naiveMerge(&tk.model, syms)
		got := tk.model.tokenize(nil, word)
		if len(got) != len(want) {
			t.Fatalf("%q: heap merge %v, naive merge %v", word, got, want)
		}
		for i := range got {
			if got[i] != int(want[i]) {
				t.Fatalf("%q: heap merge %v, naive merge %v", word, got, want)
			}
		}
	}
}
