// Package httpapi serves petal over an OpenAI-compatible HTTP API:
// /v1/chat/completions and /v1/completions (whole or streamed as
// server-sent events), /v1/models, /health, vLLM's /tokenize and
// /detokenize, and Prometheus /metrics. Requests are decoded and validated
// as batch job lines are (jobs.ParseRequest), run one at a time by an
// Executor behind a bounded queue, and answered with the same completion
// and error objects as batch results.
//
// The package knows nothing of how a job runs: it depends on the two small
// interfaces below, which the serve command implements over the job
// executor (petal/engine/executor); its tests use a scripted one.
package httpapi

import (
	"context"

	"petal/jobs"
)

// Executor runs one job at a time: the server never calls Execute while
// another call is running, so an executor may keep state (a prefix cache)
// from one request to the next.
type Executor interface {
	// Execute runs job. When ctx ends (the client went away) generation
	// stops at its next token and the outcome's finish_reason is
	// "cancelled"; a cancelled turn is not recorded in its session.
	Execute(ctx context.Context, job *jobs.Job, out Stream) (*Outcome, *Failure)
}

// Stream receives what a running job produces, as it is produced; a nil
// function ignores it.
type Stream struct {
	// Prompt is the rendered chat prompt, before generation starts (chat
	// jobs only): it says whether the model starts inside a <think> block.
	Prompt func(rendered string)
	// Text is the generated text as it becomes final (stop strings are
	// held back until they can no longer match).
	Text func(text string)
}

// Outcome is a finished job.
type Outcome struct {
	Body     any // *jobs.ChatCompletion or *jobs.TextCompletion, usage and timings filled
	Warnings []string
}

// Failure is a job that could not be served: Status 400 for a request that
// cannot be served as given, 409 for a session held by another writer too
// long, 500 for a failure of petal itself. Its error object is batch's:
// Param and Code as the executor gives them.
type Failure struct {
	Status int
	Param  string // the request field at fault, if any
	Code   string // the error object's code (jobs.Code*)
	Err    error
}

// Model is what the server says about its model without running it. Its
// methods may be called while a job runs.
type Model interface {
	Name() string
	MaxContext() int
	VocabSize() int
	Encode(text string) []int32
	// Decode is the text of token ids, special tokens included; the ids are
	// below VocabSize.
	Decode(ids []int32) string
	// Token is the vocabulary string of one id (byte-level: "Ġ" is a space).
	Token(id int32) string
	// RenderChat renders a chat job's messages, tools and template
	// switches with the model's chat template.
	RenderChat(job *jobs.Job, addGenerationPrompt bool) (string, error)
}
