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
	"syscall"

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
	if errors.Is(err, syscall.EPIPE) {
		return ExitBrokenPipe // the reader went away: no message, as any filter
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
		Writer:    st.Out,
		ErrWriter: st.Err,
		Reader:    st.In,
		// The library's help command cannot show a subcommand's help
		// (petal help sessions gc): petal's own helpCommand does.
		HideHelpCommand:        true,
		HideVersion:            true,
		UseShortOptionHandling: false,
		// --stop ", " is one stop string, not two empty ones.
		DisableSliceFlagSeparator: true,
		ExitErrHandler:            func(*cli.Context, error) {}, // Main reports errors
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			path := commandPath(c)
			if path == "petal" {
				return usageErr("%v (see petal --help)", err)
			}
			return usageErr("%s: %v (see %s --help)", strings.TrimPrefix(path, "petal "), err, path)
		},
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "version", Usage: "print the version, the commit it was built from, the Go version and the backends built in"},
			cli.HelpFlag, // added by hand: the library adds it only without a help command
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
			doctorCommand(st),
			helpTopicCommand(ctx, st),
		},
	}
	app.Action = func(c *cli.Context) error {
		if c.Bool("version") {
			printVersion(st.Out)
			return nil
		}
		if c.NArg() > 0 {
			return unknownCommand(app, nil, c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	var setUp func(cmds []*cli.Command)
	setUp = func(cmds []*cli.Command) {
		for _, c := range cmds {
			c.OnUsageError = app.OnUsageError
			c.HideHelpCommand = true
			if len(c.Subcommands) > 0 && c.Action == nil {
				parent := c
				c.Action = func(cc *cli.Context) error {
					if cc.NArg() > 0 {
						return unknownCommand(app, parent, cc.Args().First())
					}
					return cli.ShowSubcommandHelp(cc)
				}
			}
			setUp(c.Subcommands)
		}
	}
	setUp(app.Commands)
	return app
}

// commandPath is the full name of the command being run: "petal",
// "petal run", "petal sessions gc".
func commandPath(c *cli.Context) string {
	if c.Command == nil || c.Command.HelpName == "" {
		return "petal"
	}
	return c.Command.HelpName
}

// helpTopicCommand prints the help of any command path: petal help sessions gc
// is petal sessions gc --help.
func helpTopicCommand(ctx context.Context, st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the help of a command (petal help COMMAND [SUBCOMMAND] is petal COMMAND [SUBCOMMAND] --help)",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Action: func(c *cli.Context) error {
			topic := c.Args().Slice()
			app := newApp(ctx, st)
			cmds := app.Commands
			var parent *cli.Command
			for i, name := range topic {
				if parent != nil && len(parent.Subcommands) == 0 {
					path := "petal " + strings.Join(topic[:i], " ")
					return usageErr("%s has no subcommands (got %q; see %s --help)", path, name, path)
				}
				var found *cli.Command
				for _, cmd := range cmds {
					if cmd.HasName(name) {
						found = cmd
					}
				}
				if found == nil {
					if parent == nil {
						return unknownCommand(app, nil, name)
					}
					parent.HelpName = "petal " + strings.Join(topic[:i], " ")
					return unknownCommand(app, parent, name)
				}
				parent, cmds = found, found.Subcommands
			}
			return app.RunContext(ctx, append(append([]string{"petal"}, topic...), "--help"))
		},
	}
}
