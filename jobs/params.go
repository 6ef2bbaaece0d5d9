package jobs

import (
	"github.com/tidwall/gjson"
)

// maxTopLogprobs is the most alternatives a job may ask for per position.
const maxTopLogprobs = 20

// decodeParams reads the sampling options of a request body. The ranges
// follow OpenAI's, with llama.cpp's top_k/min_p/repetition_penalty added.
func decodeParams(f fields, kind Kind) (Params, *fieldError) {
	var p Params
	var err *fieldError

	if p.MaxTokens, err = maxTokens(f); err != nil {
		return p, err
	}
	floats := []struct {
		name string
		dst  **float64
		ok   func(float64) bool
		want string
	}{
		{"temperature", &p.Temperature, func(x float64) bool { return x >= 0 && x <= 2 }, "between 0 and 2"},
		{"top_p", &p.TopP, func(x float64) bool { return x > 0 && x <= 1 }, "greater than 0 and at most 1"},
		{"min_p", &p.MinP, func(x float64) bool { return x >= 0 && x <= 1 }, "between 0 and 1"},
		{"presence_penalty", &p.PresencePenalty, func(x float64) bool { return x >= -2 && x <= 2 }, "between -2 and 2"},
		{"frequency_penalty", &p.FrequencyPenalty, func(x float64) bool { return x >= -2 && x <= 2 }, "between -2 and 2"},
		{"repetition_penalty", &p.RepetitionPenalty, func(x float64) bool { return x > 0 }, "greater than 0"},
	}
	for _, fl := range floats {
		x, err := f.number(fl.name)
		if err != nil {
			return p, err
		}
		if x != nil && !fl.ok(*x) {
			return p, fieldErrorf(fl.name, codeInvalidValue, "field %q must be %s, got %v", fl.name, fl.want, *x)
		}
		*fl.dst = x
	}

	topK, err := f.integer("top_k")
	if err != nil {
		return p, err
	}
	if topK != nil {
		if *topK < -1 || *topK > int64(maxInt) {
			return p, fieldErrorf("top_k", codeInvalidValue, "field %q must be -1 (off) or greater, got %d", "top_k", *topK)
		}
		k := int(*topK)
		p.TopK = &k
	}
	if p.Seed, err = f.integer("seed"); err != nil {
		return p, err
	}
	if p.Stop, err = stopStrings(f); err != nil {
		return p, err
	}
	if err := singleChoice(f); err != nil {
		return p, err
	}
	if kind == Chat {
		err = chatLogprobs(f, &p)
	} else {
		err = completionLogprobs(f, &p)
	}
	if err != nil {
		return p, err
	}
	if p.MaxTokens != nil && *p.MaxTokens == 0 && !(kind == Completion && p.Echo) {
		name := "max_tokens"
		if !f.has("max_tokens") {
			name = "max_completion_tokens"
		}
		return p, fieldErrorf(name, codeInvalidValue,
			"field %q must be at least 1, got 0 (0 only scores the prompt, which needs \"echo\": true on /v1/completions)", name)
	}
	return p, nil
}

const maxInt = int(^uint(0) >> 1)

// maxTokens reads max_tokens and its newer chat name max_completion_tokens;
// 0 (scoring the prompt only) is checked against echo by the caller.
func maxTokens(f fields) (*int, *fieldError) {
	var out *int
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		n, err := f.integer(name)
		if err != nil {
			return nil, err
		}
		if n == nil {
			continue
		}
		if *n < 0 || *n > int64(maxInt) {
			return nil, fieldErrorf(name, codeInvalidValue, "field %q must be at least 1, got %d", name, *n)
		}
		if out != nil && *out != int(*n) {
			return nil, fieldErrorf(name, codeInvalidValue,
				"fields \"max_tokens\" and \"max_completion_tokens\" disagree (%d and %d): give one", *out, *n)
		}
		v := int(*n)
		out = &v
	}
	return out, nil
}

// stopStrings accepts one string or an array of them; empty strings would
// stop before the first token, so they are refused.
func stopStrings(f fields) ([]string, *fieldError) {
	v, ok := f.get("stop")
	if !ok {
		return nil, nil
	}
	if v.Type == gjson.String {
		if v.Str == "" {
			return nil, fieldErrorf("stop", codeInvalidValue, "field %q must not be an empty string", "stop")
		}
		return []string{v.Str}, nil
	}
	if !v.IsArray() {
		return nil, typeError("stop", "a string or an array of strings", v)
	}
	var out []string
	for i, s := range v.Array() {
		if s.Type != gjson.String {
			return nil, fieldErrorf("stop", codeInvalidType, "field %q must be a string or an array of strings, got %s at index %d", "stop", jsonType(s), i)
		}
		if s.Str == "" {
			return nil, fieldErrorf("stop", codeInvalidValue, "field %q must not contain an empty string (index %d)", "stop", i)
		}
		out = append(out, s.Str)
	}
	return out, nil
}

// singleChoice refuses what batch jobs cannot do: several choices per
// request, and streaming.
func singleChoice(f fields) *fieldError {
	n, err := f.integer("n")
	if err != nil {
		return err
	}
	if n != nil && *n != 1 {
		return fieldErrorf("n", codeUnsupported, "field %q must be 1 (one choice per request), got %d", "n", *n)
	}
	stream, _, err := f.boolean("stream")
	if err != nil {
		return err
	}
	if stream {
		return fieldErrorf("stream", codeUnsupported, "field %q must be false: streaming is not supported in batch", "stream")
	}
	return nil
}

// chatLogprobs reads chat's logprobs (boolean) and top_logprobs (0..20).
func chatLogprobs(f fields, p *Params) *fieldError {
	on, _, err := f.boolean("logprobs")
	if err != nil {
		return err
	}
	top, err := f.integer("top_logprobs")
	if err != nil {
		return err
	}
	p.Logprobs = on
	if top == nil {
		return nil
	}
	if *top < 0 || *top > maxTopLogprobs {
		return fieldErrorf("top_logprobs", codeInvalidValue, "field %q must be between 0 and %d, got %d", "top_logprobs", maxTopLogprobs, *top)
	}
	if *top > 0 && !on {
		return fieldErrorf("top_logprobs", codeInvalidValue, "field %q needs \"logprobs\": true", "top_logprobs")
	}
	p.TopLogprobs = int(*top)
	return nil
}

// completionLogprobs reads the legacy completions logprobs (an integer:
// how many alternatives, 0 for the chosen token only) and echo.
func completionLogprobs(f fields, p *Params) *fieldError {
	if v, ok := f.get("logprobs"); ok && v.Type != gjson.Number {
		return typeError("logprobs", "an integer between 0 and 20 for /v1/completions", v)
	}
	top, err := f.integer("logprobs")
	if err != nil {
		return err
	}
	if top != nil {
		if *top < 0 || *top > maxTopLogprobs {
			return fieldErrorf("logprobs", codeInvalidValue, "field %q must be between 0 and %d, got %d", "logprobs", maxTopLogprobs, *top)
		}
		p.Logprobs = true
		p.TopLogprobs = int(*top)
	}
	p.Echo, _, err = f.boolean("echo")
	return err
}
