package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"petal/engine"
	"petal/engine/chat"
	"petal/engine/sample"
	"petal/jobs"
)

// server runs jobs on one opened model, one at a time.
type server struct {
	e         *engine.Engine
	modelName string
	loadMS    float64 // reported on the first job only
	store     *sessionStore
	onPrompt  func(prompt string) // sees each rendered chat prompt before generation
}

// jobError is a failed job: Status 400 for a request that cannot be
// served, 500 for a failure of petal itself.
type jobError struct {
	Status int
	Param  string
	Err    error
}

func (e *jobError) Error() string { return e.Err.Error() }

func badRequest(param, format string, args ...any) *jobError {
	return &jobError{Status: 400, Param: param, Err: fmt.Errorf(format, args...)}
}

// outcome is a finished job.
type outcome struct {
	Body     any // *jobs.ChatCompletion or *jobs.TextCompletion
	Warnings []string
	Result   *engine.Result
	Timings  jobs.Timings
}

// serve runs one job; onText, when set, receives the generated text as it
// is produced.
func (s *server) serve(ctx context.Context, job *jobs.Job, onText func(string)) (*outcome, *jobError) {
	start := time.Now()
	t, jerr := s.beginTurn(job)
	if jerr != nil {
		return nil, jerr
	}
	defer t.end()

	var prompt []int32
	var promptText string
	var messages json.RawMessage
	boundary := 0 // prompt tokens that end the conversation's messages (chat)
	if job.Kind == jobs.Chat {
		var err error
		if messages, err = t.messages(job); err != nil {
			return nil, badRequest("messages", "%v", err)
		}
		// the boundary is only kept for a session or the prefix cache
		keep := t != nil || s.store.prefix != nil
		if promptText, boundary, err = s.renderChat(job, messages, keep); err != nil {
			return nil, badRequest("messages", "%v", err)
		}
		prompt = s.e.Encode(promptText)
		if boundary > 0 {
			boundary = commonPrefix(prompt, s.e.Encode(promptText[:boundary]))
		}
		if s.onPrompt != nil {
			s.onPrompt(promptText)
		}
	} else if job.PromptIDs != nil {
		prompt = job.PromptIDs
		for i, id := range prompt {
			if id < 0 || int(id) >= s.e.Model.Dims.Vocab {
				return nil, badRequest("prompt", "prompt[%d] = %d is not a token id below %d", i, id, s.e.Model.Dims.Vocab)
			}
		}
	} else {
		promptText = job.Prompt
		prompt = s.e.Encode(promptText)
	}
	if len(prompt) == 0 {
		return nil, badRequest("prompt", "the prompt is empty")
	}
	if len(prompt) >= s.e.MaxContext {
		return nil, badRequest("messages", "the prompt has %d tokens; the context holds %d (see --max-context)", len(prompt), s.e.MaxContext)
	}

	p := job.Params
	req := engine.Request{
		Prompt: prompt, Sampling: samplingParams(s.e, p), Stop: p.Stop, OnText: onText,
		Logprobs: p.Logprobs, TopLogprobs: p.TopLogprobs,
		PromptLogprobs: job.Kind == jobs.Completion && p.Echo && p.Logprobs,
	}
	switch {
	case p.MaxTokens != nil:
		req.MaxTokens = *p.MaxTokens
	case job.Kind == jobs.Completion:
		req.MaxTokens = 16 // the completions API default
	}

	var warnings []string
	if len(job.Ignored) > 0 {
		warnings = append(warnings, fmt.Sprintf("ignored fields: %s", strings.Join(job.Ignored, ", ")))
	}
	st, from, jerr := s.stateFor(job, t, prompt)
	if jerr != nil {
		return nil, jerr
	}
	warnings = append(warnings, from.warnings...)
	defer st.Free(s.e.Model.Backend())

	var boundaryPrefill time.Duration
	var kept []keptState
	if job.Kind == jobs.Chat {
		var err error
		if kept, boundaryPrefill, err = s.keepBoundaries(job, t, st, messages, prompt, boundary); err != nil {
			return nil, &jobError{Status: 500, Err: err}
		}
	}
	genStart := time.Now()
	res, err := s.e.Generate(ctx, st, req)
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}
	saveTime, err := s.saveBoundaries(t, kept, &warnings)
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}

	created := time.Now().Unix()
	var body any
	if job.Kind == jobs.Chat {
		cc := s.chatCompletion(job, promptText, res, created)
		save, err := s.endTurn(job, t, st, prompt, res, cc.Choices[0].Message, &warnings)
		if err != nil {
			return nil, &jobError{Status: 500, Err: err}
		}
		saveTime += save
		body = cc
	} else {
		body = s.textCompletion(job, promptText, prompt, res, created)
	}

	// Prefilled here: the boundary part and what Generate ran; restored: the rest.
	prefilled := len(prompt) - from.tokens
	tm := jobs.Timings{
		PromptN: prefilled, PromptMS: ms(boundaryPrefill + res.PromptTime),
		PredictedN: len(res.Tokens), PredictedMS: ms(res.DecodeTime),
		CacheN: from.tokens, LoadMS: s.loadMS, RestoreMS: ms(from.duration), SaveMS: ms(saveTime),
		TTFTMS: ms(genStart.Sub(start) + res.FirstToken),
	}
	s.loadMS = 0
	tm.TotalMS = ms(time.Since(start))
	tm.Finish()
	usage := jobs.NewUsage(len(prompt), len(res.Tokens), from.tokens, 0)
	switch b := body.(type) {
	case *jobs.ChatCompletion:
		usage.CompletionTokensDetails.ReasoningTokens = s.reasoningTokens(res.Tokens, chat.PromptOpensThink(promptText))
		b.Usage, b.Timings = usage, tm
	case *jobs.TextCompletion:
		b.Usage, b.Timings = usage, tm
	}
	return &outcome{Body: body, Warnings: warnings, Result: res, Timings: tm}, nil
}

// renderChat renders the conversation with the generation prompt and, when
// asked, says where its messages end (the rendering without the generation
// prompt), when that is a prefix of it.
func (s *server) renderChat(job *jobs.Job, messages json.RawMessage, withBoundary bool) (string, int, error) {
	withPrompt := *job
	withPrompt.Messages = messages
	req, err := renderRequest(&withPrompt, true)
	if err != nil {
		return "", 0, err
	}
	text, err := s.e.RenderChat(req)
	if err != nil {
		return "", 0, fmt.Errorf("chat template: %v", err)
	}
	boundary := 0
	if !withBoundary {
		return text, 0, nil
	}
	if req, err = renderRequest(&withPrompt, false); err == nil {
		if head, err := s.e.RenderChat(req); err == nil && strings.HasPrefix(text, head) {
			boundary = len(head)
		}
	}
	return text, boundary, nil
}

// commonPrefix is the number of leading tokens a and b share.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
		inner := bytes.TrimSpace(kw[1 : len(kw)-1])
		if len(inner) > 0 {
			b.WriteByte(',')
			b.Write(inner) // later keys win, so a kwarg may override add_generation_prompt
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

func (s *server) chatCompletion(job *jobs.Job, prompt string, res *engine.Result, created int64) *jobs.ChatCompletion {
	inThinking := chat.PromptOpensThink(prompt)
	parsed := chat.ParseOutput(res.Text, chat.ParseOptions{InThinking: inThinking, Tools: job.Tools})
	msg := jobs.ChatMessage{ReasoningContent: parsed.Reasoning}
	if parsed.Content != "" || len(parsed.ToolCalls) == 0 {
		content := parsed.Content
		msg.Content = &content
	}
	for _, tc := range parsed.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, jobs.ToolCall{ID: tc.ID, Function: jobs.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	finish := res.FinishReason
	if finish == "stop" && len(msg.ToolCalls) > 0 {
		finish = jobs.FinishToolCalls
	}
	choice := jobs.ChatChoice{Message: msg, FinishReason: finish}
	if job.Params.Logprobs {
		lp := &jobs.ChatLogprobs{}
		for _, tl := range res.Logprobs {
			lp.Content = append(lp.Content, s.chatTokenLogprob(tl))
		}
		choice.Logprobs = lp
	}
	return &jobs.ChatCompletion{Created: created, Model: s.responseModel(job), Choices: []jobs.ChatChoice{choice}}
}

func (s *server) chatTokenLogprob(tl engine.TokenLogprob) jobs.TokenLogprob {
	out := jobs.TokenLogprob{Token: s.tokenText(tl.ID), Logprob: jobs.Logprob(tl.Logprob), Bytes: s.tokenBytes(tl.ID)}
	for _, a := range tl.Top {
		out.TopLogprobs = append(out.TopLogprobs, jobs.TopLogprob{Token: s.tokenText(a.ID), Logprob: jobs.Logprob(a.Logprob), Bytes: s.tokenBytes(a.ID)})
	}
	return out
}

func (s *server) tokenText(id int32) string { return s.e.Tokenizer.Decode([]int{int(id)}, false) }

func (s *server) tokenBytes(id int32) jobs.TokenBytes {
	return jobs.TokenBytes(s.e.Tokenizer.TokenBytes(int(id)))
}

// reasoningTokens counts the generated tokens inside the thinking block.
func (s *server) reasoningTokens(tokens []int32, inThinking bool) int {
	open, okOpen := s.e.Tokenizer.ID("<think>")
	closeID, okClose := s.e.Tokenizer.ID("</think>")
	if !okOpen || !okClose {
		return 0
	}
	n, thinking := 0, inThinking
	for _, t := range tokens {
		switch {
		case int(t) == open && !thinking:
			thinking = true
		case int(t) == closeID && thinking:
			return n
		case thinking:
			n++
		}
	}
	return n
}

func (s *server) textCompletion(job *jobs.Job, promptText string, prompt []int32, res *engine.Result, created int64) *jobs.TextCompletion {
	text := res.Text
	if job.Params.Echo {
		if promptText == "" {
			promptText = s.e.Tokenizer.Decode(toInts(prompt), false)
		}
		text = promptText + text
	}
	choice := jobs.TextChoice{Text: text, FinishReason: res.FinishReason}
	if job.Params.Logprobs {
		lp := &jobs.TextLogprobs{}
		offset := 0
		add := func(id int32, logprob *jobs.Logprob, top []engine.Alternative) {
			tok := s.tokenText(id)
			lp.Tokens = append(lp.Tokens, tok)
			lp.TokenLogprobs = append(lp.TokenLogprobs, logprob)
			lp.TextOffset = append(lp.TextOffset, offset)
			offset += len(tok)
			var m map[string]jobs.Logprob
			if logprob != nil && job.Params.TopLogprobs > 0 {
				m = map[string]jobs.Logprob{}
				for _, a := range top {
					m[s.tokenText(a.ID)] = jobs.Logprob(a.Logprob)
				}
			}
			lp.TopLogprobs = append(lp.TopLogprobs, m)
		}
		if job.Params.Echo {
			add(prompt[0], nil, nil)
			for _, pl := range res.PromptLogprobs {
				v := jobs.Logprob(pl.Logprob)
				add(pl.ID, &v, pl.Top)
			}
		}
		for _, tl := range res.Logprobs {
			v := jobs.Logprob(tl.Logprob)
			add(tl.ID, &v, tl.Top)
		}
		choice.Logprobs = lp
	}
	return &jobs.TextCompletion{Created: created, Model: s.responseModel(job), Choices: []jobs.TextChoice{choice}}
}

func (s *server) responseModel(job *jobs.Job) string {
	if job.Model != "" {
		return job.Model
	}
	return s.modelName
}

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
