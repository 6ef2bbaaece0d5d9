package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"petal/engine/chat"
	"petal/jobs"
)

// streamFields are the request members the HTTP layer reads itself; a
// batch job line refuses them.
var streamFields = []string{"stream", "stream_options"}

type streamOptions struct {
	stream       bool
	includeUsage bool
}

// readStreamOptions reads "stream" and "stream_options" as OpenAI defines
// them; null is unset.
func readStreamOptions(own map[string]json.RawMessage) (streamOptions, *jobs.APIError) {
	var o streamOptions
	bad := func(param, msg string) (streamOptions, *jobs.APIError) {
		return o, &jobs.APIError{Message: msg, Type: jobs.InvalidRequest, Param: param, Code: "invalid_type"}
	}
	if raw, ok := own["stream"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &o.stream) != nil {
			return bad("stream", fmt.Sprintf("field \"stream\" must be a boolean, got %s", raw))
		}
	}
	raw, ok := own["stream_options"]
	if !ok || string(raw) == "null" {
		return o, nil
	}
	var so map[string]json.RawMessage
	if json.Unmarshal(raw, &so) != nil {
		return bad("stream_options", fmt.Sprintf("field \"stream_options\" must be an object, got %s", raw))
	}
	if !o.stream {
		return o, &jobs.APIError{Message: "field \"stream_options\" is only allowed with \"stream\": true", Type: jobs.InvalidRequest, Param: "stream_options", Code: "invalid_value"}
	}
	if iu, ok := so["include_usage"]; ok && string(iu) != "null" {
		if json.Unmarshal(iu, &o.includeUsage) != nil {
			return bad("stream_options.include_usage", fmt.Sprintf("field \"stream_options.include_usage\" must be a boolean, got %s", iu))
		}
	}
	return o, nil
}

// call is one completion request on its way through the server.
type call struct {
	kind    jobs.Kind
	job     *jobs.Job
	opts    streamOptions
	id      string
	created int64
	model   string // the model name the answer carries
}

func (s *Server) completion(kind jobs.Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := w.(*recorder)
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		job, own, lerr := jobs.ParseRequest(body, kind, streamFields...)
		if lerr != nil {
			writeError(w, http.StatusBadRequest, jobs.APIError{Message: lerr.Message, Type: jobs.InvalidRequest, Param: lerr.Param, Code: lerr.Code})
			return
		}
		opts, aerr := readStreamOptions(own)
		if aerr != nil {
			writeError(w, http.StatusBadRequest, *aerr)
			return
		}
		c := &call{kind: kind, job: job, opts: opts, id: newID(kind), created: time.Now().Unix(), model: job.Model}
		if c.model == "" {
			c.model = s.cfg.Model.Name()
		}

		ctx := r.Context()
		done, err := s.queue.enter(ctx)
		switch {
		case errors.Is(err, errQueueFull):
			wait := s.queue.retryAfter()
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			writeError(w, http.StatusTooManyRequests, jobs.APIError{
				Message: fmt.Sprintf("petal is busy: one request runs and %d wait, the most the queue holds (--queue); retry after %d s", s.cfg.Queue, wait),
				Type:    "rate_limit_error", Code: "queue_full"})
			return
		case errors.Is(err, errDraining):
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, jobs.APIError{Message: "petal is shutting down: the request was not run", Type: jobs.ServerError, Code: "shutting_down"})
			return
		case err != nil:
			rec.cancelled = true // the client went away while waiting
			return
		}
		defer done()
		if ctx.Err() != nil {
			rec.cancelled = true
			return
		}
		s.metrics.running.Set(1)
		defer s.metrics.running.Set(0)
		start := time.Now()
		if opts.stream {
			s.stream(ctx, rec, c)
		} else {
			s.whole(ctx, rec, c)
		}
		s.logf("%s %s %s %s", r.Method, r.URL.Path, rec.outcome(), time.Since(start).Round(time.Millisecond))
	}
}

// execute runs a job, turning a panic into its failure (500, "internal
// error"), with the stack in the log for a bug report.
func (s *Server) execute(ctx context.Context, job *jobs.Job, out Stream) (o *Outcome, f *Failure) {
	defer func() {
		if v := recover(); v != nil {
			s.logf("internal error (a panic; the server goes on): %v\n%s", v, debug.Stack())
			o, f = nil, &Failure{Status: http.StatusInternalServerError, Code: jobs.CodeInternal, Err: fmt.Errorf("internal error: %v", v)}
		}
	}()
	return s.cfg.Executor.Execute(ctx, job, out)
}

// whole answers a request that does not stream.
func (s *Server) whole(ctx context.Context, rec *recorder, c *call) {
	o, f := s.execute(ctx, c.job, Stream{})
	if f != nil {
		writeError(rec, f.Status, failureError(f))
		return
	}
	sum, err := s.finish(c, o)
	if err != nil {
		writeError(rec, http.StatusInternalServerError, jobs.APIError{Message: err.Error(), Type: jobs.ServerError})
		return
	}
	rec.sum = &sum
	if sum.finishReason == jobs.FinishCancelled && ctx.Err() != nil {
		rec.cancelled = true // nobody to answer
		return
	}
	b, err := withWarnings(o.Body, o.Warnings)
	if err != nil {
		writeError(rec, http.StatusInternalServerError, jobs.APIError{Message: "encoding the response: " + err.Error(), Type: jobs.ServerError})
		return
	}
	rec.Header().Set("Content-Type", "application/json")
	rec.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	rec.WriteHeader(http.StatusOK)
	rec.Write(append(b, '\n'))
}

// summary is what the server reads of a finished job's body.
type summary struct {
	usage        jobs.Usage
	timings      jobs.Timings
	finishReason string
}

// finish gives the body its id and records its metrics.
func (s *Server) finish(c *call, o *Outcome) (summary, error) {
	var sum summary
	switch b := o.Body.(type) {
	case *jobs.ChatCompletion:
		b.ID = c.id
		sum.usage, sum.timings = b.Usage, b.Timings
		if len(b.Choices) > 0 {
			sum.finishReason = b.Choices[0].FinishReason
		}
	case *jobs.TextCompletion:
		b.ID = c.id
		sum.usage, sum.timings = b.Usage, b.Timings
		if len(b.Choices) > 0 {
			sum.finishReason = b.Choices[0].FinishReason
		}
	default:
		return sum, fmt.Errorf("internal error: the executor answered a %T, not a completion", o.Body)
	}
	s.metrics.finished(sum.usage, sum.timings)
	return sum, nil
}

// withWarnings encodes a body with petal's "warnings" member when there
// are any, as batch writes them on bare result lines.
func withWarnings(body any, warnings []string) ([]byte, error) {
	b, err := marshal(body)
	if err != nil || len(warnings) == 0 {
		return b, err
	}
	w, err := marshal(warnings)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("the response body is not a JSON object")
	}
	out := append(b[:len(b)-1:len(b)-1], `,"warnings":`...)
	return append(append(out, w...), '}'), nil
}

func newID(kind jobs.Kind) string {
	var b [12]byte
	rand.Read(b[:])
	if kind == jobs.Completion {
		return "cmpl-" + hex.EncodeToString(b[:])
	}
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

// promptOpensThink says whether the rendered chat prompt leaves a <think>
// block open.
func promptOpensThink(prompt string) bool { return chat.PromptOpensThink(prompt) }
