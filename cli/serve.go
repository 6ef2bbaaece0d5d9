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
// served, 409 for a session another process held too long, 500 for a
// failure of petal itself.
type jobError struct {
	Status int
	Param  string
	Code   string // one of jobs.Code*; "" takes the status's (see apiError)
	Err    error
}

func (e *jobError) Error() string { return e.Err.Error() }

func badRequest(param, format string, args ...any) *jobError {
	return refuse(param, jobs.CodeInvalidValue, format, args...)
}

// refuse is a 400 with its code.
func refuse(param, code, format string, args ...any) *jobError {
	return &jobError{Status: 400, Param: param, Code: code, Err: fmt.Errorf(format, args...)}
}

// apiError is the error object of the job's result line. Every one has a
// code: the error's own, else the one its status implies.
func (e *jobError) apiError() jobs.APIError {
	typ, code := jobs.InvalidRequest, e.Code
	switch {
	case e.Status >= 500:
		typ = jobs.ServerError
		if code == "" {
			code = jobs.CodeInternal
		}
	case code == "" && e.Status == 409:
		code = jobs.CodeSessionBusy
	case code == "":
		code = jobs.CodeInvalidValue
	}
	return jobs.APIError{Message: e.Err.Error(), Type: typ, Param: e.Param, Code: code}
}

// outcome is a finished job.
type outcome struct {
	Body     any // *jobs.ChatCompletion or *jobs.TextCompletion
	Warnings []string
	Result   *engine.Result // a list of prompts: every prompt's tokens, the last finish reason (cancelled if any was)
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
	if job.Kind == jobs.Completion {
		return s.serveCompletion(ctx, job, onText, start)
	}

	messages, err := t.messages(job)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	promptText, err := s.renderChat(job, messages, true)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	if jerr := s.checkFits("messages", promptText); jerr != nil {
		return nil, jerr
	}
	prompt := s.e.Encode(promptText)
	boundary := 0 // prompt tokens that end the conversation's messages
	// the boundary is only kept for a session or the prefix cache
	if t != nil || s.store.prefix != nil {
		if head, err := s.renderChat(job, messages, false); err == nil && strings.HasPrefix(promptText, head) {
			boundary = commonPrefix(prompt, s.e.Encode(head))
		}
	}
	if s.onPrompt != nil {
		s.onPrompt(promptText)
	}
	if len(prompt) == 0 {
		return nil, badRequest("messages", "the chat template rendered an empty prompt")
	}
	if jerr := s.checkLength("messages", len(prompt)); jerr != nil {
		return nil, jerr
	}

	req := s.request(job, prompt, onText)
	warnings := jobWarnings(job)
	st, from, jerr := s.stateFor(job, t, prompt)
	if jerr != nil {
		return nil, jerr
	}
	warnings = append(warnings, from.warnings...)
	defer st.Free(s.e.Model.Backend())

	kept, boundaryPrefill, err := s.keepBoundaries(job, t, st, messages, prompt, boundary)
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}
	genStart := time.Now()
	res, err := s.e.Generate(ctx, st, req)
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}
	if res.FinishReason == jobs.FinishCancelled {
		kept = anonymousOnly(kept) // a cancelled turn leaves nothing in its session
	}
	saveTime, err := s.saveBoundaries(t, kept, &warnings)
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}

	cc := s.chatCompletion(job, promptText, res, time.Now().Unix())
	save, err := s.endTurn(job, t, st, prompt, res, cc.Choices[0].Message, &warnings)
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}
	saveTime += save

	// Prefilled here: the boundary part and what Generate ran; restored: the rest.
	tm := jobs.Timings{
		PromptN: len(prompt) - from.tokens, PromptMS: ms(boundaryPrefill + res.PromptTime),
		PredictedN: len(res.Tokens), PredictedMS: ms(res.DecodeTime),
		CacheN: from.tokens, LoadMS: s.loadMS, RestoreMS: ms(from.duration), SaveMS: ms(saveTime),
		TTFTMS: ms(genStart.Sub(start) + res.FirstToken),
	}
	s.loadMS = 0
	tm.TotalMS = ms(time.Since(start))
	tm.Finish()
	cc.Usage = jobs.NewUsage(len(prompt), len(res.Tokens), from.tokens, s.reasoningTokens(res.Tokens, chat.PromptOpensThink(promptText)))
	cc.Timings = tm
	return &outcome{Body: cc, Warnings: warnings, Result: res, Timings: tm}, nil
}

// serveCompletion runs a completions job: each of its prompts (one, or a
// list) from an empty state, one choice each; usage and timings are the
// sums over the prompts (ttft_ms is the first prompt's).
func (s *server) serveCompletion(ctx context.Context, job *jobs.Job, onText func(string), start time.Time) (*outcome, *jobError) {
	inputs := job.CompletionPrompts()
	texts := make([]string, len(inputs))
	prompts := make([][]int32, len(inputs))
	for i, in := range inputs {
		param := "prompt"
		if len(inputs) > 1 {
			param = fmt.Sprintf("prompt[%d]", i)
		}
		var jerr *jobError
		if texts[i], prompts[i], jerr = s.completionPrompt(param, in); jerr != nil {
			return nil, jerr
		}
	}

	warnings := jobWarnings(job)
	body := &jobs.TextCompletion{Created: time.Now().Unix(), Model: s.responseModel(job)}
	all := &engine.Result{StopToken: -1}
	var tm jobs.Timings
	var usage jobs.Usage
	runs := 0 // generations that produced a token
	for i, prompt := range prompts {
		if i > 0 && ctx.Err() != nil {
			// interrupted between prompts: the rest are answered as cancelled
			body.Choices = append(body.Choices, jobs.TextChoice{Index: i, FinishReason: jobs.FinishCancelled})
			all.FinishReason = jobs.FinishCancelled
			continue
		}
		st, from, jerr := s.stateFor(job, nil, prompt)
		if jerr != nil {
			return nil, jerr
		}
		warnings = append(warnings, from.warnings...)
		genStart := time.Now()
		res, err := s.e.Generate(ctx, st, s.request(job, prompt, onText))
		st.Free(s.e.Model.Backend())
		if err != nil {
			return nil, &jobError{Status: 500, Err: err}
		}
		choice := s.textChoice(job, texts[i], prompt, res)
		choice.Index = i
		body.Choices = append(body.Choices, choice)

		if i == 0 {
			tm.TTFTMS = ms(genStart.Sub(start) + res.FirstToken)
		}
		tm.PromptN += len(prompt) - from.tokens
		tm.PromptMS += ms(res.PromptTime)
		tm.PredictedN += len(res.Tokens)
		tm.PredictedMS += ms(res.DecodeTime)
		tm.CacheN += from.tokens
		tm.RestoreMS += ms(from.duration)
		if len(res.Tokens) > 0 {
			runs++
		}
		u := jobs.NewUsage(len(prompt), len(res.Tokens), from.tokens, 0)
		usage = jobs.NewUsage(usage.PromptTokens+u.PromptTokens, usage.CompletionTokens+u.CompletionTokens,
			usage.PromptTokensDetails.CachedTokens+u.PromptTokensDetails.CachedTokens, 0)

		all.Tokens = append(all.Tokens, res.Tokens...)
		all.Text, all.StopToken = res.Text, res.StopToken
		if all.FinishReason != jobs.FinishCancelled {
			all.FinishReason = res.FinishReason
		}
	}
	tm.LoadMS = s.loadMS
	s.loadMS = 0
	tm.TotalMS = ms(time.Since(start))
	tm.FinishRuns(max(runs, 1))
	body.Usage, body.Timings = usage, tm
	return &outcome{Body: body, Warnings: warnings, Result: all, Timings: tm}, nil
}

// completionPrompt tokenises one completions prompt (or checks its token
// ids) and refuses one that does not fit in the context.
func (s *server) completionPrompt(param string, in jobs.Prompt) (string, []int32, *jobError) {
	var prompt []int32
	if in.IDs != nil {
		prompt = in.IDs
		for i, id := range prompt {
			if id < 0 || int(id) >= s.e.Model.Dims.Vocab {
				return "", nil, badRequest(param, "%s[%d] = %d is not a token id below %d", param, i, id, s.e.Model.Dims.Vocab)
			}
		}
	} else {
		if jerr := s.checkFits(param, in.Text); jerr != nil {
			return "", nil, jerr
		}
		prompt = s.e.Encode(in.Text)
	}
	if len(prompt) == 0 {
		return "", nil, badRequest(param, "the prompt is empty")
	}
	if jerr := s.checkLength(param, len(prompt)); jerr != nil {
		return "", nil, jerr
	}
	return in.Text, prompt, nil
}

// checkFits refuses, before it is tokenised, a text that cannot fit in the
// context. MinTokens is a lower bound on its token count found in one cheap
// pass (every token covers at most the vocabulary's longest token's bytes),
// so what it refuses tokenising would refuse too, at far more cost.
func (s *server) checkFits(param, text string) *jobError {
	if n := s.e.Tokenizer.MinTokens(text); n >= s.e.MaxContext {
		return refuse(param, jobs.CodeContextLength,
			"the prompt has at least %d tokens (%d bytes); the context holds %d, one of them for the answer (see --max-context)",
			n, len(text), s.e.MaxContext)
	}
	return nil
}

// checkLength refuses a prompt that leaves no room in the context.
func (s *server) checkLength(param string, n int) *jobError {
	if n >= s.e.MaxContext {
		return refuse(param, jobs.CodeContextLength,
			"the prompt has %d tokens; the context holds %d, one of them for the answer (see --max-context)", n, s.e.MaxContext)
	}
	return nil
}

// request is the engine's request for a prompt of the job.
func (s *server) request(job *jobs.Job, prompt []int32, onText func(string)) engine.Request {
	p := job.Params
	req := engine.Request{
		Prompt: prompt, Sampling: samplingParams(s.e, p), Stop: p.Stop, OnText: onText,
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
func (s *server) renderChat(job *jobs.Job, messages json.RawMessage, generationPrompt bool) (string, error) {
	withMessages := *job
	withMessages.Messages = messages
	req, err := renderRequest(&withMessages, generationPrompt)
	if err != nil {
		return "", err
	}
	text, err := s.e.RenderChat(req)
	if err != nil {
		return "", fmt.Errorf("chat template: %v", err)
	}
	return text, nil
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

// textChoice is the completions choice for one prompt: with echo the prompt
// comes first, in the text and in the log-probabilities (its first token,
// having no context, has none).
func (s *server) textChoice(job *jobs.Job, promptText string, prompt []int32, res *engine.Result) jobs.TextChoice {
	text := res.Text
	if job.Params.Echo {
		if promptText == "" {
			promptText = s.e.Tokenizer.Decode(toInts(prompt), false)
		}
		text = promptText + text
	}
	choice := jobs.TextChoice{Text: text, FinishReason: res.FinishReason}
	if !job.Params.Logprobs {
		return choice
	}
	lp := &jobs.TextLogprobs{}
	offset := 0
	add := func(id int32, logprob *jobs.Logprob, top []engine.Alternative) {
		tok := s.tokenText(id)
		lp.Tokens = append(lp.Tokens, tok)
		lp.TokenLogprobs = append(lp.TokenLogprobs, logprob)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(tok)
		var alternatives jobs.TopTokens // most likely first, as the engine gives them
		if logprob != nil && job.Params.TopLogprobs > 0 {
			alternatives = jobs.TopTokens{}
			for _, a := range top {
				alternatives = append(alternatives, jobs.TopToken{Token: s.tokenText(a.ID), Logprob: jobs.Logprob(a.Logprob)})
			}
		}
		lp.TopLogprobs = append(lp.TopLogprobs, alternatives)
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
	return choice
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
