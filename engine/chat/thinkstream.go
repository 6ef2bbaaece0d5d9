package chat

import "strings"

// ThinkSplitter routes streamed text to reasoning or answer as the Qwen
// <think>...</think> block opens and closes, holding back what might be the
// start of a tag until it is decided. An opening tag counts only before any
// answer text, and the newlines the template puts after </think> are
// dropped.
type ThinkSplitter struct {
	inThinking bool
	pending    string
	reasoning  func(string)
	answer     func(string)
	seenAnswer bool // answer text started: a later <think> is plain text
	trimLead   bool // drop the newlines the template puts after </think>
}

// NewThinkSplitter starts a splitter inside the block when the prompt
// opened it (see PromptOpensThink).
func NewThinkSplitter(inThinking bool, reasoning, answer func(string)) *ThinkSplitter {
	return &ThinkSplitter{inThinking: inThinking, reasoning: reasoning, answer: answer}
}

// Write takes the next piece of the stream.
func (s *ThinkSplitter) Write(text string) {
	s.pending += text
	for s.pending != "" {
		tag := thinkClose
		if !s.inThinking {
			tag = thinkOpen
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

// Flush sends what was held back: the stream has ended.
func (s *ThinkSplitter) Flush() {
	s.emit(s.pending)
	s.pending = ""
}

func (s *ThinkSplitter) emit(text string) {
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
