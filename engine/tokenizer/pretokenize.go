package tokenizer

import (
	"fmt"

	"github.com/dlclark/regexp2/v2"
)

// gpt2Pattern is the split that HF's ByteLevel pre-tokenizer applies itself when use_regex is
// true; tokenizer.json does not spell it out.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// preTokenizer cuts normalised text into the pieces that BPE sees: the Split steps of
// tokenizer.json in order, then the ByteLevel step (optional prefix space, optional GPT-2 split).
type preTokenizer struct {
	splits      []*regexp2.Regexp
	prefixSpace bool
	byteRegex   *regexp2.Regexp // nil unless ByteLevel has use_regex
}

func compileSplit(pattern string) (*regexp2.Regexp, error) {
	// No backtracking limit: a megabyte of whitespace must split, not fail.
	return regexp2.Compile(pattern, regexp2.OptionMaxBacktrackingStackSize(-1))
}

// each calls emit with every piece of text, in order.
func (p *preTokenizer) each(text string, emit func(piece string)) {
	if text != "" {
		p.splitFrom(0, text, emit)
	}
}

func (p *preTokenizer) splitFrom(step int, text string, emit func(string)) {
	if step < len(p.splits) {
		isolate(p.splits[step], text, func(piece string) { p.splitFrom(step+1, piece, emit) })
		return
	}
	if p.prefixSpace && text[0] != ' ' {
		text = " " + text
	}
	if p.byteRegex != nil {
		isolate(p.byteRegex, text, emit)
		return
	}
	emit(text)
}

// isolate is HF's Split with behavior "Isolated": every match is a piece and so is every gap
// between matches. Empty pieces are dropped.
func isolate(re *regexp2.Regexp, text string, emit func(string)) {
	matches, err := re.FindAllStringIndex(text, -1)
	if err != nil {
		// Only a timeout or a stack limit can fail a match, and both are disabled at compile time.
		panic(fmt.Sprintf("tokenizer: split regex %q failed: %v", re.String(), err))
	}
	last := 0
	for _, m := range matches {
		if m[0] > last {
			emit(text[last:m[0]])
		}
		if m[1] > m[0] {
			emit(text[m[0]:m[1]])
		}
		last = m[1]
	}
	if last < len(text) {
		emit(text[last:])
	}
}
