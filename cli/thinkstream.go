package cli

import "strings"

// thinkSplitter routes streamed text to reasoning or answer as the Qwen
// <think>...</think> block opens and closes, holding back what might be the
// start of a tag until it is decided.
type thinkSplitter struct {
	inThinking bool
	pending    string
	reasoning  func(string)
	answer     func(string)
	seenAnswer bool // answer text started: a later <think> is plain text
	trimLead   bool // drop the newlines the template puts after </think>
}

func (s *thinkSplitter) write(text string) {
	s.pending += text
	for s.pending != "" {
		tag := "</think>"
		if !s.inThinking {
			tag = "<think>"
		}
		if s.inThinking || !s.seenAnswer {
			// an opening tag counts only before any answer text
			if i := strings.Index(s.pending, tag); i >= 0 && (s.inThinking || strings.TrimSpace(s.pending[:i]) == "") {
				s.emit(s.pending[:i])
				s.pending = s.pending[i+len(tag):]
				s.inThinking = !s.inThinking
				s.trimLead = !s.inThinking
				continue
			}
			// keep back a possible partial tag at the end
			keep := partialSuffix(s.pending, tag)
			s.emit(s.pending[:len(s.pending)-keep])
			s.pending = s.pending[len(s.pending)-keep:]
			return
		}
		s.emit(s.pending)
		s.pending = ""
	}
}

func (s *thinkSplitter) emit(text string) {
	if text == "" {
		return
	}
	if s.inThinking {
		s.reasoning(text)
		return
	}
	if s.trimLead {
		if text = strings.TrimLeft(text, "\n"); text == "" {
			return
		}
		s.trimLead = false
	}
	if strings.TrimSpace(text) != "" {
		s.seenAnswer = true
	}
	s.answer(text)
}

func (s *thinkSplitter) flush() {
	s.emit(s.pending)
	s.pending = ""
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
