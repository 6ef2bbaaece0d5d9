package chat

import (
	"strings"
	"testing"
)

func TestThinkSplitterAnySplit(t *testing.T) {
	cases := []struct {
		text, reasoning, answer string
		inThinking              bool
	}{
		{"I consider.\n</think>\n\nParis.", "I consider.\n", "Paris.", true},
		{"<think>\nhmm\n</think>\n\nYes <think> stays", "\nhmm\n", "Yes <think> stays", false},
		{"Plain answer, no tags.", "", "Plain answer, no tags.", false},
		{"cut off while thinking </thi", "cut off while thinking </thi", "", true},
	}
	for _, c := range cases {
		for cut := 0; cut <= len(c.text); cut++ {
			var r, a strings.Builder
			s := NewThinkSplitter(c.inThinking, func(x string) { r.WriteString(x) }, func(x string) { a.WriteString(x) })
			for _, piece := range []string{c.text[:cut], c.text[cut:]} {
				s.Write(piece)
			}
			s.Flush()
			if r.String() != c.reasoning || a.String() != c.answer {
				t.Errorf("%q split at %d: reasoning %q answer %q; want %q and %q", c.text, cut, r.String(), a.String(), c.reasoning, c.answer)
			}
		}
	}
}
