package executor

import (
	"context"
	"fmt"
	"time"

	"petal/engine"
	"petal/jobs"
)

// runCompletion runs a completions job: each of its prompts (one, or a
// list) from an empty state, one choice each; usage and timings are the
// sums over the prompts (ttft_ms is the first prompt's).
func (x *Executor) runCompletion(ctx context.Context, job *jobs.Job, onText func(string), start time.Time) (*Outcome, *JobError) {
	inputs := job.CompletionPrompts()
	texts := make([]string, len(inputs))
	prompts := make([][]int32, len(inputs))
	for i, in := range inputs {
		param := "prompt"
		if len(inputs) > 1 {
			param = fmt.Sprintf("prompt[%d]", i)
		}
		var jerr *JobError
		if texts[i], prompts[i], jerr = x.completionPrompt(param, in); jerr != nil {
			return nil, jerr
		}
	}

	warnings := jobWarnings(job)
	body := &jobs.TextCompletion{Created: time.Now().Unix(), Model: x.responseModel(job)}
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
		st, from, jerr := x.stateFor(job, nil, prompt)
		if jerr != nil {
			return nil, jerr
		}
		warnings = append(warnings, from.warnings...)
		genStart := time.Now()
		res, err := x.e.Generate(ctx, st, x.request(job, prompt, onText))
		st.Free(x.e.Model.Backend())
		if err != nil {
			return nil, &JobError{Status: 500, Err: err}
		}
		choice := x.textChoice(job, texts[i], prompt, res)
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
	tm.LoadMS = x.loadMS
	x.loadMS = 0
	tm.TotalMS = ms(time.Since(start))
	tm.FinishRuns(max(runs, 1))
	body.Usage, body.Timings = usage, tm
	return &Outcome{Body: body, Warnings: warnings, Result: all, Timings: tm}, nil
}

// completionPrompt tokenises one completions prompt (or checks its token
// ids) and refuses one that does not fit in the context.
func (x *Executor) completionPrompt(param string, in jobs.Prompt) (string, []int32, *JobError) {
	var prompt []int32
	if in.IDs != nil {
		prompt = in.IDs
		for i, id := range prompt {
			if id < 0 || int(id) >= x.e.Model.Dims.Vocab {
				return "", nil, badRequest(param, "%s[%d] = %d is not a token id below %d", param, i, id, x.e.Model.Dims.Vocab)
			}
		}
	} else {
		if jerr := x.checkFits(param, in.Text); jerr != nil {
			return "", nil, jerr
		}
		prompt = x.e.Encode(in.Text)
	}
	if len(prompt) == 0 {
		return "", nil, badRequest(param, "the prompt is empty")
	}
	if jerr := x.checkLength(param, len(prompt)); jerr != nil {
		return "", nil, jerr
	}
	return in.Text, prompt, nil
}

// textChoice is the completions choice for one prompt: with echo the prompt
// comes first, in the text and in the log-probabilities (its first token,
// having no context, has none).
func (x *Executor) textChoice(job *jobs.Job, promptText string, prompt []int32, res *engine.Result) jobs.TextChoice {
	text := res.Text
	if job.Params.Echo {
		if promptText == "" {
			promptText = x.e.Tokenizer.Decode(toInts(prompt), false)
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
		tok := x.tokenText(id)
		lp.Tokens = append(lp.Tokens, tok)
		lp.TokenLogprobs = append(lp.TokenLogprobs, logprob)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(tok)
		var alternatives jobs.TopTokens // most likely first, as the engine gives them
		if logprob != nil && job.Params.TopLogprobs > 0 {
			alternatives = jobs.TopTokens{}
			for _, a := range top {
				alternatives = append(alternatives, jobs.TopToken{Token: x.tokenText(a.ID), Logprob: jobs.Logprob(a.Logprob)})
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

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
