package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"petal/engine/model"
	"petal/engine/session"
	"petal/jobs"
)

// restored is where a job's state came from.
type restored struct {
	tokens   int
	duration time.Duration
	warnings []string
}

// stateFor returns the state a job starts from: the longest saved turn of
// its session that is a prefix of the prompt, else the longest cached
// prefix of an earlier job, else an empty state.
func (x *Executor) stateFor(job *jobs.Job, t *turn, prompt []int32) (*model.State, restored, *JobError) {
	start := time.Now()
	var info restored
	var r session.Restored
	var ok bool
	if t != nil {
		var err error
		r, ok, err = x.store.store.LongestPrefixOf(job.Session, prompt)
		switch {
		case errors.Is(err, session.ErrNoSession) && (t.isNew || len(t.history) == 0):
			// a new session: its first turn starts from a prefix an earlier
			// job left (a shared system prompt), else empty
			r, ok = x.prefixState(prompt, &info)
		case err != nil:
			return nil, info, sessionError("session", err)
		case !ok:
			info.warnings = append(info.warnings, fmt.Sprintf("session %q: no saved turn is a prefix of the conversation; it was prefilled from the start", job.Session))
		}
		for _, skipped := range r.Skipped {
			info.warnings = append(info.warnings, skipped.Error()+"; this turn does not need it")
		}
	} else if job.Kind == jobs.Chat {
		r, ok = x.prefixState(prompt, &info)
	}
	if !ok {
		return x.e.NewState(), info, nil
	}
	st, err := x.e.Model.Import(r.Data, x.e.MaxContext)
	if err != nil {
		return nil, info, &JobError{Status: 500, Err: err}
	}
	info.tokens = len(r.Data.Tokens)
	info.duration = time.Since(start)
	return st, info, nil
}

// prefixState looks the prompt up in the prefix cache, if there is one;
// what goes wrong there is a warning: the job prefills instead.
func (x *Executor) prefixState(prompt []int32, info *restored) (session.Restored, bool) {
	if x.store.prefix == nil {
		return session.Restored{}, false
	}
	r, ok, err := x.store.prefix.LongestPrefix(prompt)
	if err != nil {
		info.warnings = append(info.warnings, err.Error())
	}
	for _, skipped := range r.Skipped {
		info.warnings = append(info.warnings, skipped.Error()+"; prefilled instead")
	}
	return r, ok
}

// minLeadingPrefix is the fewest tokens a leading boundary (the end of the
// system message, or of all messages but the last) must have to be kept:
// a state costs its recurrent layers' full size however short it is.
const minLeadingPrefix = 32

// keptState is a state copied out at a message boundary of the prompt.
type keptState struct {
	data model.StateData
	turn bool // the end of the conversation's messages: the session's next turn
}

// anonymousOnly drops the states meant for the session's own snapshots,
// keeping those of the prefix cache (which belong to no conversation).
func anonymousOnly(kept []keptState) []keptState {
	var out []keptState
	for _, k := range kept {
		if !k.turn {
			out = append(out, k)
		}
	}
	return out
}

// keepBoundaries runs the prompt up to its message boundaries and copies
// the states there out: the end of the conversation's messages (before the
// generation prompt; the next turn's rendering always starts with it,
// whatever the template does with the answer) and, for the prefix cache,
// the ends of the leading system messages and of all messages but the
// last, so that a later job sharing its system prompt or its leading turns
// prefills them once. They are stored after generation (saveBoundaries), so
// writing them does not delay the first token.
func (x *Executor) keepBoundaries(job *jobs.Job, t *turn, st *model.State, messages json.RawMessage, prompt []int32, boundary int) ([]keptState, time.Duration, error) {
	if t == nil && x.store.prefix == nil {
		return nil, 0, nil
	}
	var ends []keptState // where to stop, ascending; data filled in below
	var at []int
	if x.store.prefix != nil && (t == nil || t.keeps()) {
		for _, b := range x.leadingBoundaries(job, messages, prompt) {
			if b < boundary || boundary == 0 {
				at, ends = append(at, b), append(ends, keptState{})
			}
		}
	}
	if boundary > 0 {
		at, ends = append(at, boundary), append(ends, keptState{turn: true})
	}
	start := time.Now()
	var kept []keptState
	for i, b := range at {
		if b <= st.Pos() || b >= len(prompt) {
			continue
		}
		if err := x.e.Model.Forward(st, prompt[st.Pos():b], model.NoLogits, nil); err != nil {
			return nil, 0, err
		}
		data, err := x.e.Model.Snapshot(st)
		if err != nil {
			return nil, 0, err
		}
		ends[i].data = data
		kept = append(kept, ends[i])
	}
	return kept, time.Since(start), nil
}

// leadingBoundaries are the prompt tokens that end the leading system (or
// developer) messages and all messages but the last, ascending, where the
// rendering of those messages alone is a prefix of the prompt's and is at
// least minLeadingPrefix tokens long.
func (x *Executor) leadingBoundaries(job *jobs.Job, messages json.RawMessage, prompt []int32) []int {
	var msgs []struct {
		Role string `json:"role"`
	}
	if json.Unmarshal(messages, &msgs) != nil || len(msgs) < 2 {
		return nil
	}
	system := 0
	for system < len(msgs) && (msgs[system].Role == "system" || msgs[system].Role == "developer") {
		system++
	}
	var raw []json.RawMessage
	if json.Unmarshal(messages, &raw) != nil {
		return nil
	}
	ks := []int{system}
	if last := len(msgs) - 1; last != system {
		ks = append(ks, last)
	}
	var out []int
	for _, k := range ks {
		if k == 0 || k >= len(msgs) {
			continue
		}
		head := *job
		head.Messages, _ = json.Marshal(raw[:k])
		req, err := renderRequest(&head, false)
		if err != nil {
			continue
		}
		text, err := x.e.RenderChat(req)
		if err != nil {
			continue
		}
		n := commonPrefix(prompt, x.e.Encode(text))
		if n >= minLeadingPrefix && (len(out) == 0 || n > out[len(out)-1]) {
			out = append(out, n)
		}
	}
	return out
}

// saveBoundaries stores the states kept by keepBoundaries: the end of the
// messages as the session's next turn, the others (and all of them for a
// job without a session) in the prefix cache, where a failure to write to
// disk is a warning: the job does not need them.
func (x *Executor) saveBoundaries(t *turn, kept []keptState, warnings *[]string) (time.Duration, error) {
	start := time.Now()
	for _, k := range kept {
		switch {
		case t != nil && k.turn:
			if t.keeps() {
				if _, err := t.held.SaveTurn(k.data); err != nil {
					return 0, err
				}
			}
		case x.store.prefix != nil:
			prefixAdd(x.store.prefix, k.data, warnings)
		}
	}
	return time.Since(start), nil
}

// prefixAdd hands a state to the prefix cache; failing to write it to disk
// costs later jobs a prefill, not this job its answer.
func prefixAdd(c *session.PrefixCache, d model.StateData, warnings *[]string) {
	const warning = "prefix cache: a state of this job was not kept on disk: "
	if err := c.Add(d); err != nil && !slices.ContainsFunc(*warnings, func(w string) bool { return strings.HasPrefix(w, warning) }) {
		*warnings = append(*warnings, warning+err.Error()) // once per job
	}
}
