// Package cli is petal's command line: each command turns flags into an
// options struct and calls a run function with explicit streams. It is the
// only place that decides exit codes.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// Streams are the process's standard files (replaced in tests).
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
	// ErrIsTerminal says whether Err is a terminal (progress bars, colour).
	ErrIsTerminal bool
	OutIsTerminal bool
	InIsTerminal  bool
	Getenv        func(string) string
}

// Exit codes.
const (
	ExitOK          = 0
	ExitJobsFailed  = 1 // a batch ran but some jobs failed
	ExitUsage       = 2 // bad flags or arguments, unreadable input
	ExitInterrupted = 130
)

// exitError carries an exit code through urfave/cli.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{ExitUsage, fmt.Errorf(format, args...)}
}

// runApp runs petal with args and returns the exit code (see Main).
func runApp(ctx context.Context, args []string, st Streams) int {
	if st.Getenv == nil {
		st.Getenv = os.Getenv
	}
	app := newApp(ctx, &st)
	err := app.RunContext(ctx, hoistFlags(app, args))
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(st.Err, "petal:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(st.Err, "petal:", err)
	return 1
}

// flagLine drops the library's "(default: 0)" / "(default: false)" noise,
// and its default when the usage text already says what the default is.
func flagLine(f cli.Flag) string {
	line := plainFlagLine(f)
	for _, noise := range []string{" (default: 0)", " (default: false)"} {
		line = strings.Replace(line, noise, "", 1)
	}
	if i := strings.Index(line, "(default: "); i >= 0 {
		if j := strings.LastIndex(line, " (default: "); j > i {
			line = line[:j]
		}
	}
	return line
}

var plainFlagLine = cli.FlagStringer

func init() { cli.FlagStringer = flagLine }

func newApp(ctx context.Context, st *Streams) *cli.App {
	app := &cli.App{
		Name:  "petal",
		Usage: "run Qwen3.5/3.6 hybrid mixture-of-experts models locally, one request at a time, as fast as the machine allows",
		Description: `petal reads jobs as JSON lines (OpenAI Batch or bare request bodies), runs them in order
through a chunked-prefill engine, and writes one result line per job with usage and timing.
Without --model it uses a small model embedded in the binary, so every command works at once.

Examples:
  petal run "Write a haiku about autumn"
  petal run "Summarise this" < notes.txt
  petal batch jobs.jsonl -o results.jsonl
  cat jobs.jsonl | petal batch - | jq .response.body.choices[0].message.content`,
		Writer:                 st.Out,
		ErrWriter:              st.Err,
		Reader:                 st.In,
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		ExitErrHandler:         func(*cli.Context, error) {}, // Main reports errors
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageErr("%v (see petal %s --help)", err, c.Command.Name)
		},
		Commands: []*cli.Command{
			runCommand(st),
			batchCommand(st),
			serveCommand(st),
			perplexityCommand(st),
			inspectCommand(st),
			benchCommand(st),
			tokenizeCommand(st),
			detokenizeCommand(st),
			chatTemplateCommand(st),
			mergeCommand(st),
			sessionsCommand(st),
			oracleCommand(st),
		},
	}
	var setUsage func(cmds []*cli.Command)
	setUsage = func(cmds []*cli.Command) {
		for _, c := range cmds {
			c.OnUsageError = app.OnUsageError
			setUsage(c.Subcommands)
		}
	}
	setUsage(app.Commands)
	return app
}
