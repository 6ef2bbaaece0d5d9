package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"petal/engine"
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
}

func openSessions(st *Streams, o sessionOptions, e *engine.Engine) (*sessionStore, error) {
	// the shards' digests are cached next to the unpacked models; without a
	// cache folder they are computed afresh
	digests := ""
	if cache, err := petalCacheDir(st.Getenv); err == nil {
		digests = filepath.Join(cache, "digests")
	}
	ss := &sessionStore{dir: o.Dir, fp: session.ModelFingerprintCached(e.Checkpoint, digests)}
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
		st, err := session.OpenStore(ss.dir, ss.fp, session.StoreOptions{})
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
	history []json.RawMessage // the saved conversation, before this job's messages
	isNew   bool
}

// beginTurn locks the job's session (forking it first when asked) and
// reads its history; nil when the job names no session.
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
	t := &turn{held: held}
	fail := func(param string, err error) (*turn, *jobError) {
		held.Unlock()
		return nil, sessionError(param, err)
	}
	if job.ForkFrom != "" {
		if _, err := held.ForkFrom(job.ForkFrom); err != nil {
			return fail("fork_from", err)
		}
	}
	conv, err := store.Conversation(job.Session)
	if err != nil {
		return fail("session", err)
	}
	if conv == nil {
		t.isNew = true
		return t, nil
	}
	if err := json.Unmarshal(conv, &t.history); err != nil {
		return fail("session", fmt.Errorf("session %q: its conversation is damaged: %v", job.Session, err))
	}
	return t, nil
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

func sessionError(param string, err error) *jobError {
	status := 400
	var lockErr *session.LockError
	if errors.As(err, &lockErr) {
		status = 409
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
			// a new session: its first turn starts empty
		case err != nil:
			return nil, info, sessionError("session", err)
		case !ok && len(r.Skipped) > 0:
			return nil, info, sessionError("session", r.Skipped[0])
		case !ok:
			info.warnings = append(info.warnings, fmt.Sprintf("session %q: no saved turn is a prefix of the conversation; it was prefilled from the start", job.Session))
		}
	} else if job.Kind == jobs.Chat && s.store.prefix != nil {
		var err error
		r, ok, err = s.store.prefix.LongestPrefix(prompt)
		if err != nil {
			info.warnings = append(info.warnings, err.Error())
		}
		for _, skipped := range r.Skipped {
			info.warnings = append(info.warnings, skipped.Error()+"; prefilled instead")
		}
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

// keepBoundary runs the prompt up to the end of the conversation's messages
// (before the generation prompt) and copies that state out: the next
// turn's rendering always starts with it, whatever the template does with
// the answer. It is stored after generation (saveBoundary), so writing it
// does not delay the first token.
func (s *server) keepBoundary(t *turn, st *model.State, prompt []int32, boundary int) (*model.StateData, time.Duration, error) {
	if boundary <= st.Pos() || boundary >= len(prompt) || t == nil && s.store.prefix == nil {
		return nil, 0, nil
	}
	start := time.Now()
	if err := s.e.Model.Forward(st, prompt[st.Pos():boundary], model.NoLogits, nil); err != nil {
		return nil, 0, err
	}
	data := s.e.Model.Export(st)
	return &data, time.Since(start), nil
}

// saveBoundary stores a state kept by keepBoundary: as the session's next
// turn, or in the prefix cache.
func (s *server) saveBoundary(t *turn, data *model.StateData) (time.Duration, error) {
	if data == nil {
		return 0, nil
	}
	start := time.Now()
	var err error
	if t != nil {
		_, err = t.held.SaveTurn(*data)
	} else {
		err = s.store.prefix.Add(*data)
	}
	return time.Since(start), err
}

// endTurn runs the end-of-turn token through the model (so the state holds
// the whole turn), saves the state and, for a session, the conversation
// with the answer appended.
func (s *server) endTurn(job *jobs.Job, t *turn, st *model.State, prompt []int32, res *engine.Result, messages json.RawMessage, answer any) (time.Duration, error) {
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
	data := s.e.Model.Export(st)
	if t == nil {
		return time.Since(start), s.store.prefix.Add(data)
	}
	if _, err := t.held.SaveTurn(data); err != nil {
		return 0, err
	}
	var all []json.RawMessage
	if err := json.Unmarshal(messages, &all); err != nil {
		return 0, err
	}
	reply, err := json.Marshal(answer)
	if err != nil {
		return 0, err
	}
	conv, err := json.Marshal(append(all, reply))
	if err != nil {
		return 0, err
	}
	return time.Since(start), t.held.SaveConversation(conv)
}
