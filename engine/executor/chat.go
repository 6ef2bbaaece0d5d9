package executor

import (
	"petal/engine"
	"petal/engine/chat"
	"petal/jobs"
)

func (x *Executor) chatCompletion(job *jobs.Job, prompt string, res *engine.Result, created int64) *jobs.ChatCompletion {
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
			lp.Content = append(lp.Content, x.chatTokenLogprob(tl))
		}
		choice.Logprobs = lp
	}
	return &jobs.ChatCompletion{Created: created, Model: x.responseModel(job), Choices: []jobs.ChatChoice{choice}}
}

func (x *Executor) chatTokenLogprob(tl engine.TokenLogprob) jobs.TokenLogprob {
	out := jobs.TokenLogprob{Token: x.tokenText(tl.ID), Logprob: jobs.Logprob(tl.Logprob), Bytes: x.tokenBytes(tl.ID)}
	for _, a := range tl.Top {
		out.TopLogprobs = append(out.TopLogprobs, jobs.TopLogprob{Token: x.tokenText(a.ID), Logprob: jobs.Logprob(a.Logprob), Bytes: x.tokenBytes(a.ID)})
	}
	return out
}

func (x *Executor) tokenText(id int32) string { return x.e.Tokenizer.Decode([]int{int(id)}, false) }

func (x *Executor) tokenBytes(id int32) jobs.TokenBytes {
	return jobs.TokenBytes(x.e.Tokenizer.TokenBytes(int(id)))
}

// reasoningTokens counts the generated tokens inside the thinking block.
func (x *Executor) reasoningTokens(tokens []int32, inThinking bool) int {
	open, okOpen := x.e.Tokenizer.ID("<think>")
	closeID, okClose := x.e.Tokenizer.ID("</think>")
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
