// Package executor runs one job (a chat or completions request, as a batch
// line or an HTTP request carries it) against an opened engine and a
// session store: it renders and checks the prompt, restores the longest
// saved state the prompt continues (the job's session, else the prefix
// cache), prefills, keeps the states at message boundaries, generates,
// saves the turn, and builds the result body (chat.completion or
// text_completion, with usage and timings) or the error with its status,
// field and code.
package executor

import (
	"context"
	"strings"
	"time"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/chat"
	"petal/engine/session"
	"petal/jobs"
)

// Options say how an executor names its model and where it keeps states.
type Options struct {
	// ModelName is the model answers carry when a job names none.
	ModelName string
	// LoadTime is reported as load_ms in the first job's timings (0: none).
	LoadTime time.Duration
	// SessionDir is the session store folder; it is opened when a job
	// first needs it (a session), or at once with PersistPrefixes.
	SessionDir string
	// PersistPrefixes keeps the prefix cache's states in SessionDir too,
	// so later runs reuse them.
	PersistPrefixes bool
	// PrefixCacheBytes bounds the states kept in memory for implicit
	// prefix reuse between jobs; 0 keeps none in memory.
	PrefixCacheBytes int64
	// DigestDir caches the digests of the model's files for its
	// fingerprint; "" computes them afresh.
	DigestDir string
}

// Executor runs jobs on one opened engine, one at a time: Run must not be
// called while another call runs. It keeps the prefix cache from one job
// to the next.
type Executor struct {
	e         *engine.Engine
	modelName string
	loadMS    float64 // reported on the first job only
	store     *sessionStore
}

// New builds an executor over an opened engine, which it does not close.
func New(e *engine.Engine, o Options) (*Executor, error) {
	x := &Executor{e: e, modelName: o.ModelName, loadMS: ms(o.LoadTime)}
	ss := &sessionStore{dir: o.SessionDir, fp: session.ModelFingerprintCached(e.Checkpoint, o.DigestDir), kv: e.Model.KV}
	switch {
	case o.PersistPrefixes:
		if _, err := ss.open(); err != nil {
			return nil, err
		}
		ss.prefix = session.NewPrefixCache(ss.store, o.PrefixCacheBytes)
	case o.PrefixCacheBytes > 0:
		ss.prefix = session.NewPrefixCache(nil, o.PrefixCacheBytes)
	}
	x.store = ss
	return x, nil
}

// sessionStore connects jobs to persistent sessions and to the prefix
// cache. The store folder is opened only when a job needs it.
type sessionStore struct {
	dir    string
	fp     session.Fingerprint
	store  *session.Store
	prefix *session.PrefixCache // nil: no prefix reuse
	kv     backend.DType        // the KV element type of this run's states
}

func (ss *sessionStore) open() (*session.Store, error) {
	if ss.store == nil {
		st, err := session.OpenStore(ss.dir, ss.fp, session.StoreOptions{KV: ss.kv})
		if err != nil {
			return nil, err
		}
		ss.store = st
	}
	return ss.store, nil
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
	Body     any // *jobs.ChatCompletion or *jobs.TextCompletion
	Warnings []string
	Result   *engine.Result // a list of prompts: every prompt's tokens, the last finish reason (cancelled if any was)
	Timings  jobs.Timings
}

// Run runs one job. When ctx ends, generation stops at its next token and
// the finish reason is "cancelled"; a cancelled turn leaves nothing in its
// session.
func (x *Executor) Run(ctx context.Context, job *jobs.Job, out Stream) (*Outcome, *JobError) {
	start := time.Now()
	t, jerr := x.beginTurn(job)
	if jerr != nil {
		return nil, jerr
	}
	defer t.end()
	if job.Kind == jobs.Completion {
		return x.runCompletion(ctx, job, out.Text, start)
	}

	messages, err := t.messages(job)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	promptText, err := x.renderChat(job, messages, true)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	if jerr := x.checkFits("messages", promptText); jerr != nil {
		return nil, jerr
	}
	prompt := x.e.Encode(promptText)
	boundary := 0 // prompt tokens that end the conversation's messages
	// the boundary is only kept for a session or the prefix cache
	if t != nil || x.store.prefix != nil {
		if head, err := x.renderChat(job, messages, false); err == nil && strings.HasPrefix(promptText, head) {
			boundary = commonPrefix(prompt, x.e.Encode(head))
		}
	}
	if out.Prompt != nil {
		out.Prompt(promptText)
	}
	if len(prompt) == 0 {
		return nil, badRequest("messages", "the chat template rendered an empty prompt")
	}
	if jerr := x.checkLength("messages", len(prompt)); jerr != nil {
		return nil, jerr
	}

	req := x.request(job, prompt, out.Text)
	warnings := jobWarnings(job)
	st, from, jerr := x.stateFor(job, t, prompt)
	if jerr != nil {
		return nil, jerr
	}
	warnings = append(warnings, from.warnings...)
	defer st.Free(x.e.Model.Backend())

	kept, boundaryPrefill, err := x.keepBoundaries(job, t, st, messages, prompt, boundary)
	if err != nil {
		return nil, &JobError{Status: 500, Err: err}
	}
	genStart := time.Now()
	res, err := x.e.Generate(ctx, st, req)
	if err != nil {
		return nil, &JobError{Status: 500, Err: err}
	}
	if res.FinishReason == jobs.FinishCancelled {
		kept = anonymousOnly(kept) // a cancelled turn leaves nothing in its session
	}
	saveTime, err := x.saveBoundaries(t, kept, &warnings)
	if err != nil {
		return nil, &JobError{Status: 500, Err: err}
	}

	cc := x.chatCompletion(job, promptText, res, time.Now().Unix())
	save, err := x.endTurn(job, t, st, prompt, res, cc.Choices[0].Message, &warnings)
	if err != nil {
		return nil, &JobError{Status: 500, Err: err}
	}
	saveTime += save

	// Prefilled here: the boundary part and what Generate ran; restored: the rest.
	tm := jobs.Timings{
		PromptN: len(prompt) - from.tokens, PromptMS: ms(boundaryPrefill + res.PromptTime),
		PredictedN: len(res.Tokens), PredictedMS: ms(res.DecodeTime),
		CacheN: from.tokens, LoadMS: x.loadMS, RestoreMS: ms(from.duration), SaveMS: ms(saveTime),
		TTFTMS: ms(genStart.Sub(start) + res.FirstToken),
	}
	x.loadMS = 0
	tm.TotalMS = ms(time.Since(start))
	tm.Finish()
	cc.Usage = jobs.NewUsage(len(prompt), len(res.Tokens), from.tokens, x.reasoningTokens(res.Tokens, chat.PromptOpensThink(promptText)))
	cc.Timings = tm
	return &Outcome{Body: cc, Warnings: warnings, Result: res, Timings: tm}, nil
}

func (x *Executor) responseModel(job *jobs.Job) string {
	if job.Model != "" {
		return job.Model
	}
	return x.modelName
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
