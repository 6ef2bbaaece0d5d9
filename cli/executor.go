package cli

import (
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/executor"
)

// The options of the job executor that run, batch and serve share: the
// session flags, the store folder and the prefix cache.

// sessionOptions are the session and store flags of a command that runs jobs.
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

// newExecutor builds the executor of a command's jobs: the session store
// is --sessions, else $PETAL_SESSIONS (either keeps the prefix cache's
// states on disk too, across runs), else sessions/ in the petal cache
// folder; loadTime is reported in the first job's timings.
func newExecutor(st *Streams, o sessionOptions, e *engine.Engine, name string, loadTime time.Duration) (*executor.Executor, error) {
	xo := executor.Options{ModelName: name, LoadTime: loadTime, SessionDir: o.Dir, PrefixCacheBytes: int64(o.PrefixCacheMB) << 20}
	// the shards' digests are cached next to the unpacked models; without a
	// cache folder they are computed afresh
	if cache, err := petalCacheDir(st.Getenv); err == nil {
		xo.DigestDir = filepath.Join(cache, "digests")
	}
	if xo.SessionDir == "" {
		xo.SessionDir = st.Getenv("PETAL_SESSIONS")
	}
	xo.PersistPrefixes = xo.SessionDir != ""
	if xo.SessionDir == "" {
		cache, err := petalCacheDir(st.Getenv)
		if err != nil {
			return nil, err
		}
		xo.SessionDir = filepath.Join(cache, "sessions")
	}
	return executor.New(e, xo)
}
