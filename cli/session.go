package cli

import (
	"time"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/model"
	"petal/jobs"
)

// sessionStore connects jobs to persistent session snapshots.
type sessionStore struct{}

// stateFor returns the state a job starts from: a restored session, a
// stored prefix, or an empty state.
func (s *server) stateFor(job *jobs.Job, prompt []int32) (*model.State, time.Duration, []string, *jobError) {
	if job.Session != "" || job.ForkFrom != "" {
		return nil, 0, nil, badRequest("session", "sessions are not available in this build")
	}
	return s.e.NewState(), 0, nil, nil
}

// saveSession stores the state at the end of a session's turn.
func (s *server) saveSession(job *jobs.Job, st *model.State, res *engine.Result) (time.Duration, error) {
	return 0, nil
}

type sessionOptions struct {
	Session  string
	ForkFrom string
	Dir      string
}

func sessionFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "session", Usage: "continue (or start) the named persistent session"},
		&cli.StringFlag{Name: "fork-from", Usage: "start --session from another session's saved state"},
	}, storeFlag())
}

func storeFlag() cli.Flag {
	return &cli.StringFlag{Name: "sessions", Usage: "session store folder (default: $PETAL_SESSIONS, else the user cache dir)"}
}

func readSessionOptions(c *cli.Context) sessionOptions {
	return sessionOptions{Session: c.String("session"), ForkFrom: c.String("fork-from"), Dir: c.String("sessions")}
}

func openSessions(st *Streams, o sessionOptions, e *engine.Engine) (*sessionStore, error) {
	return nil, nil
}
