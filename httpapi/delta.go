package httpapi

import (
	"strings"
	"unicode"

	"petal/engine/chat"
)

// chatDeltas turns a chat reply's text, as it streams, into reasoning and
// content deltas that add up to the reply's final message (what
// chat.ParseOutput makes of the whole text): the <think> block goes to
// reasoning; newlines the parser trims and whitespace that may turn out to
// be trailing are held back; a <tool_call> ends the streamed content (the
// calls are sent whole once the reply is parsed). finish sends what the
// final message has beyond what was streamed.
type chatDeltas struct {
	think     *chat.ThinkSplitter
	reasoning deltaChannel
	content   deltaChannel
}

func newChatDeltas(inThinking bool, reasoning, content func(string)) *chatDeltas {
	d := &chatDeltas{
		reasoning: deltaChannel{send: reasoning, trimLeadingNewlines: true},
		content:   deltaChannel{send: content},
	}
	d.think = chat.NewThinkSplitter(inThinking, d.reasoning.write, d.content.write)
	return d
}

func (d *chatDeltas) write(text string) { d.think.Write(text) }

// finish sends the rest of the final reasoning and content: the parts that
// extend what was streamed (a part that does not, as when the parser moved
// text elsewhere, is left as streamed).
func (d *chatDeltas) finish(reasoning, content string) {
	d.reasoning.finish(reasoning)
	d.content.finish(content)
}

const toolCallOpen = "<tool_call>"

// deltaChannel is one streamed part of the message.
type deltaChannel struct {
	send                func(string)
	trimLeadingNewlines bool
	sent                strings.Builder
	held                string // whitespace and a possible partial tag, not yet sent
	stopped             bool   // a tool call began: nothing more is streamed
}

func (c *deltaChannel) write(text string) {
	if c.stopped {
		return
	}
	buf := c.held + text
	if c.trimLeadingNewlines && c.sent.Len() == 0 {
		buf = strings.TrimLeft(buf, "\n")
	}
	if i := strings.Index(buf, toolCallOpen); i >= 0 {
		c.emit(strings.TrimRightFunc(buf[:i], unicode.IsSpace))
		c.held, c.stopped = "", true
		return
	}
	keep := partialSuffix(buf, toolCallOpen)
	ready := buf[:len(buf)-keep]
	body := strings.TrimRightFunc(ready, unicode.IsSpace)
	c.emit(body)
	c.held = ready[len(body):] + buf[len(buf)-keep:]
}

func (c *deltaChannel) emit(s string) {
	if s == "" {
		return
	}
	c.sent.WriteString(s)
	c.send(s)
}

func (c *deltaChannel) finish(final string) {
	if rest, ok := strings.CutPrefix(final, c.sent.String()); ok {
		c.emit(rest)
	}
	c.held, c.stopped = "", true
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
