package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"petal/jobs"
)

// events writes server-sent events: "data: JSON" blocks, then
// "data: [DONE]". The headers go out with the first event, so that a
// request failing before any output gets its status and error object as
// an unstreamed one does.
type events struct {
	w       *recorder
	rc      *http.ResponseController
	started bool
	err     error // the first write error: the client went away
}

func newEvents(w *recorder) *events {
	return &events{w: w, rc: http.NewResponseController(w)}
}

func (e *events) start() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not hold the stream back
	e.w.WriteHeader(http.StatusOK)
}

func (e *events) send(v any) {
	b, err := marshal(v)
	if err != nil {
		b, _ = marshal(map[string]any{"error": jobs.APIError{Message: "encoding a chunk: " + err.Error(), Type: jobs.ServerError}})
	}
	e.write("data: " + string(b) + "\n\n")
}

func (e *events) done() { e.write("data: [DONE]\n\n") }

func (e *events) write(s string) {
	e.start()
	if e.err != nil {
		return
	}
	if _, err := e.w.Write([]byte(s)); err != nil {
		e.err = err
		return
	}
	e.err = e.rc.Flush()
}

// chunkHead is the part every chunk of one answer shares.
type chunkHead struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
}

type chatChunk struct {
	chunkHead
	Choices []chatChunkChoice `json:"choices"`
	// Usage is null on every chunk but the last with
	// stream_options.include_usage, and absent without it, as OpenAI sends it.
	Usage    any           `json:"usage,omitempty"`
	Timings  *jobs.Timings `json:"timings,omitempty"` // on the chunk that finishes, as llama-server sends them
	Warnings []string      `json:"warnings,omitempty"`
}

type chatChunkChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
}

type toolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id"`
	Type     string            `json:"type"`
	Function jobs.FunctionCall `json:"function"`
}

type textChunk struct {
	chunkHead
	Choices  []textChunkChoice `json:"choices"`
	Usage    any               `json:"usage,omitempty"`
	Timings  *jobs.Timings     `json:"timings,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
}

type textChunkChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

var jsonNull = json.RawMessage("null")

// stream answers a request with "stream": true.
func (s *Server) stream(ctx context.Context, rec *recorder, c *call) {
	ev := newEvents(rec)
	var pendingUsage any // null on each chunk with include_usage
	if c.opts.includeUsage {
		pendingUsage = jsonNull
	}
	var out Stream
	var finish func(o *Outcome)
	if c.kind == jobs.Chat {
		head := chunkHead{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model}
		sendDelta := func(d chatDelta) {
			if !ev.started {
				role := ""
				ev.send(chatChunk{chunkHead: head, Usage: pendingUsage, Choices: []chatChunkChoice{{Delta: chatDelta{Role: "assistant", Content: &role}}}})
			}
			ev.send(chatChunk{chunkHead: head, Usage: pendingUsage, Choices: []chatChunkChoice{{Delta: d}}})
		}
		var deltas *chatDeltas
		newDeltas := func(inThinking bool) *chatDeltas {
			return newChatDeltas(inThinking,
				func(r string) { sendDelta(chatDelta{ReasoningContent: r}) },
				func(t string) { sendDelta(chatDelta{Content: &t}) })
		}
		out.Prompt = func(p string) { deltas = newDeltas(promptOpensThink(p)) }
		out.Text = func(t string) {
			if deltas == nil {
				deltas = newDeltas(false)
			}
			deltas.write(t)
		}
		finish = func(o *Outcome) {
			cc := o.Body.(*jobs.ChatCompletion)
			if deltas == nil {
				deltas = newDeltas(false)
			}
			msg := cc.Choices[0].Message
			content := ""
			if msg.Content != nil {
				content = *msg.Content
			}
			deltas.finish(msg.ReasoningContent, content)
			for i, tc := range msg.ToolCalls {
				sendDelta(chatDelta{ToolCalls: []toolCallDelta{{Index: i, ID: tc.ID, Type: "function", Function: tc.Function}}})
			}
			if !ev.started {
				sendDelta(chatDelta{})
			}
			reason := cc.Choices[0].FinishReason
			last := chatChunk{chunkHead: head, Usage: pendingUsage, Timings: &cc.Timings, Warnings: o.Warnings,
				Choices: []chatChunkChoice{{Logprobs: logprobsOrNull(cc.Choices[0].Logprobs), FinishReason: &reason}}}
			ev.send(last)
			if c.opts.includeUsage {
				ev.send(chatChunk{chunkHead: head, Choices: []chatChunkChoice{}, Usage: cc.Usage})
			}
		}
	} else {
		head := chunkHead{ID: c.id, Object: "text_completion", Created: c.created, Model: c.model}
		var sent strings.Builder
		sendText := func(t string) {
			if t == "" && ev.started {
				return
			}
			sent.WriteString(t)
			ev.send(textChunk{chunkHead: head, Usage: pendingUsage, Choices: []textChunkChoice{{Text: t}}})
		}
		echoed := !c.job.Params.Echo
		echo := func() {
			if echoed {
				return
			}
			echoed = true
			if c.job.PromptIDs != nil {
				sendText(s.cfg.Model.Decode(c.job.PromptIDs))
			} else {
				sendText(c.job.Prompt)
			}
		}
		out.Text = func(t string) {
			echo()
			sendText(t)
		}
		finish = func(o *Outcome) {
			tc := o.Body.(*jobs.TextCompletion)
			echo()
			if rest, ok := strings.CutPrefix(tc.Choices[0].Text, sent.String()); ok && rest != "" {
				sendText(rest)
			}
			reason := tc.Choices[0].FinishReason
			ev.send(textChunk{chunkHead: head, Usage: pendingUsage, Timings: &tc.Timings, Warnings: o.Warnings,
				Choices: []textChunkChoice{{Logprobs: textLogprobsOrNull(tc.Choices[0].Logprobs), FinishReason: &reason}}})
			if c.opts.includeUsage {
				ev.send(textChunk{chunkHead: head, Choices: []textChunkChoice{}, Usage: tc.Usage})
			}
		}
	}

	o, f := s.execute(ctx, c.job, out)
	if f != nil {
		if !ev.started {
			writeError(rec, f.Status, failureError(f))
			return
		}
		// the stream has begun with status 200: the error is its last event
		ev.send(map[string]any{"error": failureError(f)})
		ev.done()
		return
	}
	sum, err := s.finish(c, o)
	if err != nil {
		ev.send(map[string]any{"error": jobs.APIError{Message: err.Error(), Type: jobs.ServerError}})
		ev.done()
		return
	}
	rec.sum = &sum
	if sum.finishReason == jobs.FinishCancelled && ctx.Err() != nil {
		rec.cancelled = true
		return
	}
	finish(o)
	ev.done()
}

func logprobsOrNull(l *jobs.ChatLogprobs) any {
	if l == nil {
		return nil
	}
	return l
}

func textLogprobsOrNull(l *jobs.TextLogprobs) any {
	if l == nil {
		return nil
	}
	return l
}
