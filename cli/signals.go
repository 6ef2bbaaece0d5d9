package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
)

// ExitTerminated is the exit code after SIGTERM (128 + 15, as a shell
// reports a process the signal ended); SIGINT gives ExitInterrupted.
const ExitTerminated = 143

// ExitBrokenPipe is the exit code when the reader of standard output went
// away (128 + SIGPIPE, what a shell reports for `yes | head -1`).
const ExitBrokenPipe = 141

// Main runs petal with args and returns the exit code. Output that cannot
// reach standard output (closed, a full disk) turns a success into exit 1
// with a message: results must not vanish silently. A reader that went
// away (`petal batch jobs.jsonl | head -1`) gives exit 141 and no message,
// as any Unix filter behaves there.
func Main(ctx context.Context, args []string, st Streams) int {
	out := newCheckedOutput(st.Out)
	st.Out = out
	code := runApp(ctx, args, st)
	if out.err != nil && errors.Is(out.err, syscall.EPIPE) && code != ExitUsage {
		return ExitBrokenPipe
	}
	if code == ExitOK && out.err != nil {
		fmt.Fprintln(st.Err, "petal:", out.err)
		return ExitJobsFailed
	}
	if code == ExitInterrupted && errors.Is(context.Cause(ctx), errTerminated) {
		return ExitTerminated
	}
	return code
}

var (
	errInterrupted = errors.New("interrupted (SIGINT)")
	errTerminated  = errors.New("terminated (SIGTERM)")
)

// InterruptContext is cancelled by the first SIGINT or SIGTERM, with the
// signal as its cause: the running job stops at its next token, finishes
// its result line, and the command exits 130 (SIGINT) or 143 (SIGTERM). A
// second signal ends the process at once, as usual. A write to a closed
// pipe fails with EPIPE instead of killing the process silently, so that
// lost results are reported.
func InterruptContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs) // the default action again for a second signal
			if s == syscall.SIGTERM {
				cancel(errTerminated)
			} else {
				cancel(errInterrupted)
			}
		case <-ctx.Done():
			signal.Stop(sigs)
		}
	}()
	return ctx, func() { cancel(nil) }
}

// checkedOutput is standard output that remembers its first write error,
// and refuses writes when it was closed before the process started (the Go
// runtime puts /dev/null in its place, where everything would vanish).
// It passes a regular file's methods through, so that result lines written
// to stdout redirected to a file are still synced and never left torn.
type checkedOutput struct {
	w   io.Writer
	f   *os.File // w, when it is a file
	err error    // the first write error
}

func newCheckedOutput(w io.Writer) *checkedOutput {
	o := &checkedOutput{w: w}
	if f, ok := w.(*os.File); ok {
		o.f = f
		if descriptorReplaced(f) {
			o.err = errors.New("cannot write to standard output: it is closed (use -o FILE, or redirect it to /dev/null to discard the output)")
		}
	}
	return o
}

func (o *checkedOutput) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		o.err = fmt.Errorf("cannot write to standard output: %w", err)
		return n, o.err
	}
	return n, nil
}

var errNotFile = errors.New("standard output is not a file")

func (o *checkedOutput) Stat() (fs.FileInfo, error) {
	if o.f == nil {
		return nil, errNotFile
	}
	return o.f.Stat()
}

func (o *checkedOutput) Truncate(size int64) error {
	if o.f == nil {
		return errNotFile
	}
	return o.f.Truncate(size)
}

func (o *checkedOutput) Sync() error {
	if o.f == nil {
		return errNotFile
	}
	return o.f.Sync()
}

func (o *checkedOutput) Name() string { return "standard output" }
