package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"petal/engine"
	"petal/engine/sample"
	"petal/jobs"
)

// checkFits refuses, before it is tokenised, a text that cannot fit in the
// context. MinTokens is a lower bound on its token count found in one cheap
// pass (every token covers at most the vocabulary's longest token's bytes),
// so what it refuses tokenising would refuse too, at far more cost.
func (x *Executor) checkFits(param, text string) *JobError {
	if n := x.e.Tokenizer.MinTokens(text); n >= x.e.MaxContext {
		return refuse(param, jobs.CodeContextLength,
			"the prompt has at least %d tokens (%d bytes); the context holds %d, one of them for the answer (see --max-context)",
			n, len(text), x.e.MaxContext)
	}
	return nil
}

// checkLength refuses a prompt that leaves no room in the context.
func (x *Executor) checkLength(param string, n int) *JobError {
	if n >= x.e.MaxContext {
		return refuse(param, jobs.CodeContextLength,
			"the prompt has %d tokens; the context holds %d, one of them for the answer (see --max-context)", n, x.e.MaxContext)
	}
	return nil
}

// request is the engine's request for a prompt of the job.
func (x *Executor) request(job *jobs.Job, prompt []int32, onText func(string)) engine.Request {
	p := job.Params
	req := engine.Request{
		Prompt: prompt, Sampling: samplingParams(x.e, p), Stop: p.Stop, OnText: onText,
		Logprobs: p.Logprobs, TopLogprobs: p.TopLogprobs,
		PromptLogprobs: job.Kind == jobs.Completion && p.Echo && p.Logprobs,
		ScoreOnly:      job.ScoreOnly(),
	}
	switch {
	case p.MaxTokens != nil:
		req.MaxTokens = *p.MaxTokens
	case job.Kind == jobs.Completion:
		req.MaxTokens = 16 // the completions API default
	}
	return req
}

// jobWarnings are the warnings a job earns before it runs.
func jobWarnings(job *jobs.Job) []string {
	var warnings []string
	if len(job.Ignored) > 0 {
		warnings = append(warnings, fmt.Sprintf("ignored fields: %s", strings.Join(job.Ignored, ", ")))
	}
	return append(warnings, job.Warnings...)
}

// renderChat renders the conversation, with the generation prompt or
// without it (where the conversation's messages end).
func (x *Executor) renderChat(job *jobs.Job, messages json.RawMessage, generationPrompt bool) (string, error) {
	withMessages := *job
	withMessages.Messages = messages
	req, err := renderRequest(&withMessages, generationPrompt)
	if err != nil {
		return "", err
	}
	text, err := x.e.RenderChat(req)
	if err != nil {
		return "", fmt.Errorf("chat template: %v", err)
	}
	return text, nil
}

// renderRequest builds the chat template's input: the messages, the tools,
// the template switches, and add_generation_prompt.
func renderRequest(job *jobs.Job, generationPrompt bool) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"messages":`)
	b.Write(job.Messages)
	if len(job.Tools) > 0 && string(job.Tools) != "null" {
		b.WriteString(`,"tools":`)
		b.Write(job.Tools)
	}
	fmt.Fprintf(&b, `,"add_generation_prompt":%t`, generationPrompt)
	if kw := bytes.TrimSpace(job.TemplateKwargs); len(kw) > 2 && kw[0] == '{' {
		var check map[string]json.RawMessage
		if err := json.Unmarshal(kw, &check); err != nil {
			return nil, fmt.Errorf("chat_template_kwargs: %v", err)
		}
		for _, own := range []string{"messages", "tools", "add_generation_prompt"} {
			if _, ok := check[own]; ok { // later keys win: it would replace the request's
				return nil, fmt.Errorf("chat_template_kwargs must not set %q", own)
			}
		}
		inner := bytes.TrimSpace(kw[1 : len(kw)-1])
		if len(inner) > 0 {
			b.WriteByte(',')
			b.Write(inner)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// samplingParams takes each setting from the request, else the model's
// generation_config.json, else greedy.
func samplingParams(e *engine.Engine, p jobs.Params) sample.Params {
	g := e.Checkpoint.Generation
	s := sample.Params{TopP: 1, RepetitionPenalty: 1}
	if g.HasTemperature {
		s.Temperature = g.Temperature
	}
	if g.HasTopP {
		s.TopP = g.TopP
	}
	if g.HasTopK {
		s.TopK = g.TopK
	}
	if g.HasMinP {
		s.MinP = g.MinP
	}
	if g.HasTemperature && g.HasDoSample && !g.DoSample {
		s.Temperature = 0
	}
	s = ShapeOver(s, p)
	if p.PresencePenalty != nil {
		s.PresencePenalty = *p.PresencePenalty
	}
	if p.FrequencyPenalty != nil {
		s.FrequencyPenalty = *p.FrequencyPenalty
	}
	if p.RepetitionPenalty != nil {
		s.RepetitionPenalty = *p.RepetitionPenalty
	}
	if p.Seed != nil {
		s.Seed = uint64(*p.Seed)
	} else {
		s.Seed = uint64(time.Now().UnixNano())
	}
	return s
}

// ShapeOver is s with the request's temperature, top-p, top-k and min-p
// (the settings that shape a pick) where it gives them.
func ShapeOver(s sample.Params, p jobs.Params) sample.Params {
	if p.Temperature != nil {
		s.Temperature = *p.Temperature
	}
	if p.TopP != nil {
		s.TopP = *p.TopP
	}
	if p.TopK != nil {
		s.TopK = *p.TopK
	}
	if p.MinP != nil {
		s.MinP = *p.MinP
	}
	return s
}

// RenderChat renders a chat job's messages, tools and template switches
// with the model's chat template, as Run renders them. It may be called
// while a job runs.
func (x *Executor) RenderChat(job *jobs.Job, addGenerationPrompt bool) (string, error) {
	req, err := renderRequest(job, addGenerationPrompt)
	if err != nil {
		return "", err
	}
	return x.e.RenderChat(req)
}
