package jobs

import "encoding/json"

// Kind is the endpoint a job addresses.
type Kind int

const (
	Chat       Kind = iota // /v1/chat/completions
	Completion             // /v1/completions
)

const (
	chatURL       = "/v1/chat/completions"
	completionURL = "/v1/completions"
)

func (k Kind) String() string {
	if k == Completion {
		return "completion"
	}
	return "chat"
}

// URL is the OpenAI endpoint path of the kind.
func (k Kind) URL() string {
	if k == Completion {
		return completionURL
	}
	return chatURL
}

// Job is one validated request read from a job line.
type Job struct {
	Line     int    // 1-based physical line number in the input
	LineHash string // LineHash of the line's bytes, so its result can prove which line it answers
	CustomID string // empty only on a bare line without one
	Envelope bool   // OpenAI Batch envelope rather than a bare body
	Kind     Kind
	Model    string // the request's model, echoed back; not used for selection

	// Chat.
	Messages       json.RawMessage // validated, kept raw for the chat template
	Tools          json.RawMessage // validated array of function tools, or nil
	TemplateKwargs json.RawMessage // chat_template_kwargs object (enable_thinking folded in), or nil

	// Completions: a text prompt or token ids, never both.
	Prompt    string
	PromptIDs []int32
	// Prompts holds every prompt of a request that gives a list of several
	// (one choice each); nil when it gives one, in Prompt or PromptIDs.
	Prompts []Prompt

	Params Params

	// petal extensions.
	Session  string // persistent session the messages continue
	ForkFrom string // session whose saved state this one starts from

	// Body fields petal does not honour (user, metadata, response_format, ...),
	// in input order, so the caller may warn about them.
	Ignored []string
	// Warnings say how the request was read where it differs from what it
	// says (a developer message rendered as system, ...).
	Warnings []string
}

// Prompt is one completions prompt: text or token ids, never both.
type Prompt struct {
	Text string
	IDs  []int32
}

// CompletionPrompts are the job's prompts in order: Prompts, else the one
// in Prompt or PromptIDs.
func (j *Job) CompletionPrompts() []Prompt {
	if len(j.Prompts) > 0 {
		return j.Prompts
	}
	return []Prompt{{Text: j.Prompt, IDs: j.PromptIDs}}
}

// ScoreOnly says the job only scores its prompt: a completion with echo and
// max_tokens 0 generates nothing.
func (j *Job) ScoreOnly() bool {
	p := j.Params
	return j.Kind == Completion && p.Echo && p.MaxTokens != nil && *p.MaxTokens == 0
}

// Params are the sampling and output options of a job; nil means unset.
type Params struct {
	MaxTokens         *int // max_tokens or max_completion_tokens
	Temperature       *float64
	TopP              *float64
	TopK              *int // -1 or 0: off
	MinP              *float64
	PresencePenalty   *float64
	FrequencyPenalty  *float64
	RepetitionPenalty *float64
	Seed              *int64
	Stop              []string

	// Logprobs asks for the log-probability of each output token and
	// TopLogprobs for that many alternatives at each position (chat:
	// logprobs + top_logprobs; completions: logprobs N).
	Logprobs    bool
	TopLogprobs int
	// Echo (completions) returns the prompt before the completion, and with
	// Logprobs scores the prompt tokens too.
	Echo bool
}

// Origin identifies the input line a result answers.
type Origin struct {
	Line     int
	LineHash string // LineHash of the input line, written as "line_hash"
	CustomID string
	Envelope bool
}

// Origin is the identity of the job's line, for its result.
func (j *Job) Origin() Origin {
	return Origin{Line: j.Line, LineHash: j.LineHash, CustomID: j.CustomID, Envelope: j.Envelope}
}
