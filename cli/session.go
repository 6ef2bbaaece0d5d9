package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/model"
	"petal/engine/session"
	"petal/jobs"
)

type sessionOptions struct {
	Session  string
	ForkFrom string
	Dir      string
	// PrefixCacheMB bounds the states kept in memory for implicit prefix
	// reuse between the jobs of one run; 0 keeps none (a store folder
	// chosen with --sessions or PETAL_SESSIONS still keeps them on disk).
	PrefixCacheMB int
}

func sessionFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "session", Usage: "continue (or start) the named persistent session"},
		&cli.StringFlag{Name: "fork-from", Usage: "start --session from another session's saved state"},
	}, storeFlag())
}

func storeFlag() cli.Flag {
	return &cli.StringFlag{Name: "sessions", Usage: "session store folder (default: $PETAL_SESSIONS, else the petal cache folder)"}
}

func readSessionOptions(c *cli.Context) sessionOptions {
	return sessionOptions{Session: c.String("session"), ForkFrom: c.String("fork-from"), Dir: c.String("sessions")}
}

// sessionStore connects jobs to persistent sessions and to the prefix
// cache. The store folder is opened only when a job needs it.
type sessionStore struct {
	dir      string
	explicit bool // the folder was chosen (flag or environment): prefixes persist across runs
	fp       session.Fingerprint
	store    *session.Store
	prefix   *session.PrefixCache
	kv       backend.DType // the KV element type of this run's states
}

func openSessions(st *Streams, o sessionOptions, e *engine.Engine) (*sessionStore, error) {
	// the shards' digests are cached next to the unpacked models; without a
	// cache folder they are computed afresh
	digests := ""
	if cache, err := petalCacheDir(st.Getenv); err == nil {
		digests = filepath.Join(cache, "digests")
	}
	ss := &sessionStore{dir: o.Dir, fp: session.ModelFingerprintCached(e.Checkpoint, digests), kv: e.Model.KV}
	if ss.dir == "" {
		ss.dir = st.Getenv("PETAL_SESSIONS")
	}
	ss.explicit = ss.dir != ""
	if ss.dir == "" {
		cache, err := petalCacheDir(st.Getenv)
		if err != nil {
			return nil, err
		}
		ss.dir = filepath.Join(cache, "sessions")
	}
	memory := int64(o.PrefixCacheMB) << 20
	switch {
	case ss.explicit:
		if _, err := ss.open(); err != nil {
			return nil, err
		}
		ss.prefix = session.NewPrefixCache(ss.store, memory)
	case memory > 0:
		ss.prefix = session.NewPrefixCache(nil, memory)
	}
	return ss, nil
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
func (s *server) beginTurn(job *jobs.Job) (*turn, *jobError) {
	if job.Session == "" {
		if job.ForkFrom != "" {
			return nil, badRequest("fork_from", "fork_from needs session: the name of the new session")
		}
		return nil, nil
	}
	if job.Kind != jobs.Chat {
		return nil, badRequest("session", "sessions continue chat conversations: use messages, not prompt")
	}
	store, err := s.store.open()
	if err != nil {
		return nil, &jobError{Status: 500, Err: err}
	}
	held, err := store.Lock(job.Session)
	if err != nil {
		return nil, sessionError("session", err)
	}
	t := &turn{held: held, request: turnRequestID(job)}
	fail := func(param string, err error) (*turn, *jobError) {
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
// has no turn of its own since, or only this request's.
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

func sessionError(param string, err error) *jobError {
	status := 400
	var lockErr *session.LockError
	var snapErr *session.SnapshotError
	switch {
	case errors.As(err, &lockErr):
		status = 409
	case errors.As(err, &snapErr) && strings.HasSuffix(snapErr.File, ".snap") && !errors.Is(err, session.ErrOtherModel):
		err = fmt.Errorf("%w; the session's conversation is kept: remove that file to continue from an earlier snapshot (`petal sessions verify` lists every damaged file)", err)
	}
	return &jobError{Status: status, Param: param, Err: err}
}

// restored is where a job's state came from.
type restored struct {
	tokens   int
	duration time.Duration
	warnings []string
}

// stateFor returns the state a job starts from: the longest saved turn of
// its session that is a prefix of the prompt, else the longest cached
// prefix of an earlier job, else an empty state.
func (s *server) stateFor(job *jobs.Job, t *turn, prompt []int32) (*model.State, restored, *jobError) {
	start := time.Now()
	var info restored
	var r session.Restored
	var ok bool
	if t != nil {
		var err error
		r, ok, err = s.store.store.LongestPrefixOf(job.Session, prompt)
		switch {
		case errors.Is(err, session.ErrNoSession) && (t.isNew || len(t.history) == 0):
			// a new session: its first turn starts from a prefix an earlier
			// job left (a shared system prompt), else empty
			r, ok = s.prefixState(prompt, &info)
		case err != nil:
			return nil, info, sessionError("session", err)
		case !ok:
			info.warnings = append(info.warnings, fmt.Sprintf("session %q: no saved turn is a prefix of the conversation; it was prefilled from the start", job.Session))
		}
		for _, skipped := range r.Skipped {
			info.warnings = append(info.warnings, skipped.Error()+"; this turn does not need it")
		}
	} else if job.Kind == jobs.Chat {
		r, ok = s.prefixState(prompt, &info)
	}
	if !ok {
		return s.e.NewState(), info, nil
	}
	st, err := s.e.Model.Import(r.Data, s.e.MaxContext)
	if err != nil {
		return nil, info, &jobError{Status: 500, Err: err}
	}
	info.tokens = len(r.Data.Tokens)
	info.duration = time.Since(start)
	return st, info, nil
}

// prefixState looks the prompt up in the prefix cache, if there is one;
// what goes wrong there is a warning: the job prefills instead.
func (s *server) prefixState(prompt []int32, info *restored) (session.Restored, bool) {
	if s.store.prefix == nil {
		return session.Restored{}, false
	}
	r, ok, err := s.store.prefix.LongestPrefix(prompt)
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
func (s *server) keepBoundaries(job *jobs.Job, t *turn, st *model.State, messages json.RawMessage, prompt []int32, boundary int) ([]keptState, time.Duration, error) {
	if t == nil && s.store.prefix == nil {
		return nil, 0, nil
	}
	var ends []keptState // where to stop, ascending; data filled in below
	var at []int
	if s.store.prefix != nil && (t == nil || t.keeps()) {
		for _, b := range s.leadingBoundaries(job, messages, prompt) {
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
		if err := s.e.Model.Forward(st, prompt[st.Pos():b], model.NoLogits, nil); err != nil {
			return nil, 0, err
		}
		data, err := s.e.Model.Snapshot(st)
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
func (s *server) leadingBoundaries(job *jobs.Job, messages json.RawMessage, prompt []int32) []int {
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
		text, err := s.e.RenderChat(req)
		if err != nil {
			continue
		}
		n := commonPrefix(prompt, s.e.Encode(text))
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
func (s *server) saveBoundaries(t *turn, kept []keptState, warnings *[]string) (time.Duration, error) {
	start := time.Now()
	for _, k := range kept {
		switch {
		case t != nil && k.turn:
			if t.keeps() {
				if _, err := t.held.SaveTurn(k.data); err != nil {
					return 0, err
				}
			}
		case s.store.prefix != nil:
			prefixAdd(s.store.prefix, k.data, warnings)
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

// endTurn runs the end-of-turn token through the model (so the state holds
// the whole turn), saves the state and, for a session, the conversation
// with the answer appended.
func (s *server) endTurn(job *jobs.Job, t *turn, st *model.State, prompt []int32, res *engine.Result, answer any, warnings *[]string) (time.Duration, error) {
	if job.Kind != jobs.Chat || res.FinishReason == jobs.FinishCancelled || t == nil && s.store.prefix == nil {
		return 0, nil // an interrupted turn is not kept
	}
	start := time.Now()
	turnTokens := append([]int32{}, res.Tokens...)
	if res.StopToken >= 0 {
		turnTokens = append(turnTokens, res.StopToken)
	}
	// run what was sampled but not yet run (at least the end-of-turn id)
	if fed := len(st.Tokens) - len(prompt); fed < len(turnTokens) {
		if st.Pos()+len(turnTokens)-fed > s.e.MaxContext {
			return 0, nil // no room to keep this turn
		}
		if err := s.e.Model.Forward(st, turnTokens[fed:], model.NoLogits, nil); err != nil {
			return 0, err
		}
	}
	data, err := s.e.Model.Snapshot(st)
	if err != nil {
		return 0, err
	}
	if t == nil {
		prefixAdd(s.store.prefix, data, warnings)
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
