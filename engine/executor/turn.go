package executor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"petal/engine"
	"petal/engine/model"
	"petal/engine/session"
	"petal/jobs"
)

// turn is a job's session context: the held lock and the history the new
// messages are appended to.
type turn struct {
	held    *session.Session
	conv    *session.Conversation // the saved conversation; nil for a new session
	history []json.RawMessage     // what this job's messages are appended to
	isNew   bool
	request string // the job's identity, recorded with the turn it commits
	// replay is set when this very request already committed its turn on
	// top of history (an earlier run was stopped before writing its
	// result); replayLast says no turn came after it.
	replay     bool
	replayLast bool
}

// turnRequestID identifies a job's request for the turn record: everything
// that shapes its turn (session, messages, tools, template switches,
// sampling) and its custom_id.
func turnRequestID(job *jobs.Job) string {
	b, _ := json.Marshal(struct {
		Session, ForkFrom, CustomID string
		Messages, Tools, Kwargs     json.RawMessage
		Params                      jobs.Params
	}{job.Session, job.ForkFrom, job.CustomID, compactJSON(job.Messages), compactJSON(job.Tools), compactJSON(job.TemplateKwargs), job.Params})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// beginTurn locks the job's session (forking it first when asked) and
// reads its history; nil when the job names no session. A job whose turn
// is already recorded on top of the history before it (see
// Conversation.FindTurn) is run again on that history.
func (x *Executor) beginTurn(job *jobs.Job) (*turn, *JobError) {
	if job.Session == "" {
		if job.ForkFrom != "" {
			return nil, badRequest("fork_from", "fork_from needs session: the name of the new session")
		}
		return nil, nil
	}
	if job.Kind != jobs.Chat {
		return nil, badRequest("session", "sessions continue chat conversations: use messages, not prompt")
	}
	store, err := x.store.open()
	if err != nil {
		return nil, &JobError{Status: 500, Err: err}
	}
	held, err := store.Lock(job.Session)
	if err != nil {
		return nil, sessionError("session", err)
	}
	t := &turn{held: held, request: turnRequestID(job)}
	fail := func(param string, err error) (*turn, *JobError) {
		held.Unlock()
		return nil, sessionError(param, err)
	}
	conv, err := store.Conversation(job.Session)
	if err != nil {
		return fail("session", err)
	}
	if job.ForkFrom != "" && !alreadyForked(conv, job.ForkFrom, t.request) {
		if _, err := held.ForkFrom(job.ForkFrom); err != nil {
			return fail("fork_from", err)
		}
		if conv, err = store.Conversation(job.Session); err != nil {
			return fail("session", err)
		}
	}
	if conv == nil {
		t.isNew = true
		return t, nil
	}
	t.conv, t.history = conv, conv.Messages
	if rec, last, ok := conv.FindTurn(t.request); ok {
		t.replay, t.replayLast = true, last
		t.history = conv.Messages[:rec.Start]
	}
	return t, nil
}

// alreadyForked reports that a session was forked from from by this very
// request in an earlier run (stopped before its result was written): it
// has no turn of its own since, or only this request'x.
func alreadyForked(conv *session.Conversation, from, request string) bool {
	if conv == nil || conv.ForkedFrom != from {
		return false
	}
	own := conv.Turns[min(conv.ForkedAt, len(conv.Turns)):]
	return len(own) == 0 || len(own) == 1 && own[0].Request == request
}

func (t *turn) end() {
	if t != nil && t.held != nil {
		t.held.Unlock()
	}
}

// messages is the whole conversation this turn renders: the history, then
// the job's new messages.
func (t *turn) messages(job *jobs.Job) (json.RawMessage, error) {
	if t == nil || len(t.history) == 0 {
		return job.Messages, nil
	}
	var fresh []json.RawMessage
	if err := json.Unmarshal(job.Messages, &fresh); err != nil {
		return nil, err
	}
	return json.Marshal(append(append([]json.RawMessage{}, t.history...), fresh...))
}

// keeps reports whether this turn saves snapshots and its conversation: not
// when it replays a recorded turn that later turns follow.
func (t *turn) keeps() bool { return !t.replay || t.replayLast }

// endTurn runs the end-of-turn token through the model (so the state holds
// the whole turn), saves the state and, for a session, the conversation
// with the answer appended.
func (x *Executor) endTurn(job *jobs.Job, t *turn, st *model.State, prompt []int32, res *engine.Result, answer any, warnings *[]string) (time.Duration, error) {
	if job.Kind != jobs.Chat || res.FinishReason == jobs.FinishCancelled || t == nil && x.store.prefix == nil {
		return 0, nil // an interrupted turn is not kept
	}
	start := time.Now()
	turnTokens := append([]int32{}, res.Tokens...)
	if res.StopToken >= 0 {
		turnTokens = append(turnTokens, res.StopToken)
	}
	// run what was sampled but not yet run (at least the end-of-turn id)
	if fed := len(st.Tokens) - len(prompt); fed < len(turnTokens) {
		if st.Pos()+len(turnTokens)-fed > x.e.MaxContext {
			return 0, nil // no room to keep this turn
		}
		if err := x.e.Model.Forward(st, turnTokens[fed:], model.NoLogits, nil); err != nil {
			return 0, err
		}
	}
	data, err := x.e.Model.Snapshot(st)
	if err != nil {
		return 0, err
	}
	if t == nil {
		prefixAdd(x.store.prefix, data, warnings)
		return time.Since(start), nil
	}
	if !t.keeps() {
		*warnings = append(*warnings, fmt.Sprintf("session %q: this request's turn was already recorded by an earlier run that stopped before writing its result, and later turns follow it: it was run again on the same history and the session left as it is", job.Session))
		return time.Since(start), nil
	}
	if _, err := t.held.SaveTurn(data); err != nil {
		return 0, err
	}
	var added []json.RawMessage
	if err := json.Unmarshal(job.Messages, &added); err != nil {
		return 0, err
	}
	reply, err := json.Marshal(answer)
	if err != nil {
		return 0, err
	}
	added = append(added, reply)
	conv := t.conv
	if conv == nil {
		conv = &session.Conversation{}
	}
	if t.replay {
		// committing the same turn twice leaves it once: the recorded one is
		// replaced by this run's (the same answer at temperature 0 or with a seed)
		*warnings = append(*warnings, fmt.Sprintf("session %q: this request's turn was already recorded by an earlier run that stopped before writing its result: it was run again on the same history and replaces that turn", job.Session))
		if err := conv.ReplaceLast(t.request, added...); err != nil {
			return 0, err
		}
	} else {
		conv.Append(t.request, added...)
	}
	return time.Since(start), t.held.SaveConversation(conv)
}
