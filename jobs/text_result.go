package jobs

// TextCompletion is the body of a /v1/completions result.
type TextCompletion struct {
	ID      string       `json:"id"` // filled by Success when empty
	Object  string       `json:"object"`
	Created int64        `json:"created"` // Unix seconds
	Model   string       `json:"model"`
	Choices []TextChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
	Timings Timings      `json:"timings"`
}

// MarshalJSON writes the fixed object name and an empty choice list as [].
func (c TextCompletion) MarshalJSON() ([]byte, error) {
	type plain TextCompletion
	c.Object = "text_completion"
	if c.Choices == nil {
		c.Choices = []TextChoice{}
	}
	return marshal(plain(c))
}

type TextChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"` // with echo, the prompt comes first
	Logprobs     *TextLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

// TextLogprobs are the legacy completions log-probabilities, one entry per
// token in each list. With echo the prompt's tokens come first, and the
// very first token, having no context, has null in TokenLogprobs and
// TopLogprobs.
type TextLogprobs struct {
	Tokens        []string    `json:"tokens"`
	TokenLogprobs []*Logprob  `json:"token_logprobs"`
	TopLogprobs   []TopTokens `json:"top_logprobs"`
	TextOffset    []int       `json:"text_offset"` // byte offset of each token in Text
}

func (l TextLogprobs) MarshalJSON() ([]byte, error) {
	type plain TextLogprobs
	if l.Tokens == nil {
		l.Tokens = []string{}
	}
	if l.TokenLogprobs == nil {
		l.TokenLogprobs = []*Logprob{}
	}
	if l.TopLogprobs == nil {
		l.TopLogprobs = []TopTokens{}
	}
	if l.TextOffset == nil {
		l.TextOffset = []int{}
	}
	return marshal(plain(l))
}

// TopTokens are a position's most likely tokens, most likely first. They are
// written as the legacy API's object {token: logprob} with its keys in that
// order (a Go map would sort them by token); a token text seen twice (two
// ids that decode alike) keeps its first, likelier, entry. nil is null.
type TopTokens []TopToken

type TopToken struct {
	Token   string
	Logprob Logprob
}

func (tt TopTokens) MarshalJSON() ([]byte, error) {
	if tt == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	seen := make(map[string]bool, len(tt))
	for _, t := range tt {
		if seen[t.Token] {
			continue
		}
		seen[t.Token] = true
		key, err := marshal(t.Token)
		if err != nil {
			return nil, err
		}
		val, err := t.Logprob.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(append(append(b, key...), ':'), val...)
	}
	return append(b, '}'), nil
}
