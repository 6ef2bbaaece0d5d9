package jobs

// Finish reasons.
const (
	FinishStop      = "stop"       // end of turn or a stop string
	FinishLength    = "length"     // max_tokens or the context was reached
	FinishToolCalls = "tool_calls" // the model called tools
	FinishCancelled = "cancelled"  // the run was interrupted
)

// ChatCompletion is the body of a /v1/chat/completions result.
type ChatCompletion struct {
	ID      string       `json:"id"` // filled by Success when empty
	Object  string       `json:"object"`
	Created int64        `json:"created"` // Unix seconds
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
	Timings Timings      `json:"timings"`
}

// MarshalJSON writes the fixed object name and an empty choice list as [].
func (c ChatCompletion) MarshalJSON() ([]byte, error) {
	type plain ChatCompletion
	c.Object = "chat.completion"
	if c.Choices == nil {
		c.Choices = []ChatChoice{}
	}
	return marshal(plain(c))
}

type ChatChoice struct {
	Index        int           `json:"index"`
	Message      ChatMessage   `json:"message"`
	Logprobs     *ChatLogprobs `json:"logprobs"` // null unless requested
	FinishReason string        `json:"finish_reason"`
}

// ChatMessage is the assistant's reply; the thinking block is apart from
// the answer, as vLLM and llama-server return it.
type ChatMessage struct {
	Role             string     `json:"role"`    // always "assistant"
	Content          *string    `json:"content"` // null when the reply is only tool calls
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

func (m ChatMessage) MarshalJSON() ([]byte, error) {
	type plain ChatMessage
	m.Role = "assistant"
	return marshal(plain(m))
}

type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"
	Function FunctionCall `json:"function"`
}

func (t ToolCall) MarshalJSON() ([]byte, error) {
	type plain ToolCall
	t.Type = "function"
	return marshal(plain(t))
}

type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object, as a string
}

// ChatLogprobs are the per-token log-probabilities of a chat reply.
type ChatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

func (l ChatLogprobs) MarshalJSON() ([]byte, error) {
	type plain ChatLogprobs
	if l.Content == nil {
		l.Content = []TokenLogprob{}
	}
	return marshal(plain(l))
}

type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     Logprob      `json:"logprob"`
	Bytes       TokenBytes   `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"` // [] when none were asked for
}

func (t TokenLogprob) MarshalJSON() ([]byte, error) {
	type plain TokenLogprob
	if t.TopLogprobs == nil {
		t.TopLogprobs = []TopLogprob{}
	}
	return marshal(plain(t))
}

type TopLogprob struct {
	Token   string     `json:"token"`
	Logprob Logprob    `json:"logprob"`
	Bytes   TokenBytes `json:"bytes"`
}
