package chat

import "strings"

// Output is a generated assistant turn split the OpenAI way.
type Output struct {
	Reasoning string     `json:"reasoning_content,omitempty"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is one entry of an OpenAI message's tool_calls.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as a JSON object in a string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ParseOptions says what ParseOutput needs to know about the request.
type ParseOptions struct {
	// InThinking says generation started inside an open <think> block, as it does after
	// the Qwen3.5/3.6 generation prompt "<think>\n" (see PromptOpensThink). Text cut off
	// before </think> is then reasoning; otherwise text without think tags is content.
	InThinking bool
	// Tools is the request's tools array (JSON). The parameter schemas in it type the
	// values of XML tool calls; nil leaves every value to the JSON-or-string rule.
	Tools []byte
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// PromptOpensThink reports whether a rendered prompt leaves a <think> block open, so the
// model's first tokens are reasoning.
func PromptOpensThink(prompt string) bool {
	open := strings.LastIndex(prompt, thinkOpen)
	return open >= 0 && strings.LastIndex(prompt, thinkClose) < open
}

// ParseOutput splits generated text (without the stop token) in the Qwen format into
// reasoning, content and tool calls.
//
// The think split follows vLLM's Qwen3ReasoningParser: reasoning is the text before
// </think> (after <think> when the model wrote one), content the text after it; without
// </think>, a <tool_call> followed by <function ends the reasoning, and otherwise all of
// the text is reasoning when the prompt opened the block (generation stopped inside it)
// and content when it did not. Unlike vLLM, which returns both parts verbatim, the
// newlines the template puts around the block are removed: reasoning loses its leading
// and trailing newlines and content its leading ones (llama-server strips these too).
// Both Qwen templates strip exactly these when they render the turn back as history, so
// nothing the prompt would contain is lost. Text before <think> that is not blank is kept
// in the content (vLLM drops it).
//
// Tool calls are then read from the content; see extractToolCalls.
func ParseOutput(text string, opts ParseOptions) Output {
	var out Output
	out.Reasoning, out.Content = splitThinking(text, opts.InThinking)
	out.Content, out.ToolCalls = extractToolCalls(out.Content, newToolSchemas(opts.Tools))
	return out
}

func splitThinking(text string, inThinking bool) (reasoning, content string) {
	var before string
	end := strings.Index(text, thinkClose)
	if start := strings.Index(text, thinkOpen); start >= 0 && (end < 0 || start < end) {
		before, text, inThinking = text[:start], text[start+len(thinkOpen):], true
		end = strings.Index(text, thinkClose)
	}
	if strings.TrimSpace(before) == "" {
		before = ""
	}
	switch {
	case end >= 0:
		reasoning, content = text[:end], strings.TrimLeft(text[end+len(thinkClose):], "\n")
	case !inThinking:
		return "", before + text
	default:
		if i := implicitThinkEnd(text); i >= 0 {
			reasoning, content = text[:i], text[i:]
		} else {
			reasoning = text
		}
	}
	return strings.Trim(reasoning, "\n"), before + content
}

// implicitThinkEnd finds a tool call begun inside the reasoning (Qwen3.5 models may call a
// tool without closing </think>): a <tool_call> whose next non-blank text opens a
// <function= tag. It returns -1 when there is none.
func implicitThinkEnd(text string) int {
	for from := 0; ; {
		i := strings.Index(text[from:], toolCallOpen)
		if i < 0 {
			return -1
		}
		i += from
		after := strings.TrimLeft(text[i+len(toolCallOpen):], " \t\r\n")
		if strings.HasPrefix(after, "<function=") || strings.HasPrefix(after, "<function ") {
			return i
		}
		from = i + len(toolCallOpen)
	}
}
