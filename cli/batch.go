package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"petal/engine/executor"
	"petal/jobs"
)

type batchOptions struct {
	modelOptions
	sessionOptions
	Input  string // "-" for standard input
	Output string // "" for standard output
	Resume bool
	// RerunChanged runs again the lines whose results answer another
	// version of the line, where resume would refuse.
	RerunChanged bool
	Shard        string
	Quiet        bool
	Sync         bool
}

func batchCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "batch",
		Usage:     "run a JSONL file of jobs, one result line per job, in input order",
		ArgsUsage: "[FILE|-]",
		Description: `Each line is an OpenAI Batch request
  {"custom_id": "a1", "method": "POST", "url": "/v1/chat/completions", "body": {...}}
(the result is a Batch output line) or a bare request body with "messages" (chat) or "prompt"
(completion), optionally with "custom_id" (the result is the bare completion object).
Request fields: max_tokens (or max_completion_tokens), temperature, top_p, top_k, min_p, seed,
stop, logprobs, top_logprobs, echo, presence_penalty, frequency_penalty, repetition_penalty,
chat_template_kwargs, tools, and petal's session and fork_from. Every result carries usage and timings, plus "line" (the input line).

A bad line gets an error result (status 400, with a message naming the field) and the batch goes
on; so does a job that fails inside petal (status 500). Results are written whole and flushed one
by one; a write that fails (a full disk) leaves the file ending at its last whole result. Ctrl-C
or SIGTERM finishes the current line (finish_reason "cancelled" if cut short) and exits with 130
(SIGINT) or 143 (SIGTERM); a second signal ends petal at once.

--resume continues a run from the results in -o OUT. Each result carries "line_hash", a hash of
the input line it answers: a result whose line has changed since (edited, moved by an inserted
line, or from another input) stops the resume with exit 2 naming it, unless --rerun-changed runs
those lines again. Jobs cut short, and failures that were not the job's fault (status 5xx, 408,
409 lock timeout, 429), run again; their old lines are removed first, so every job has one result
(reruns are appended: petal merge OUT -o OUT puts the file back in input order). Other failures
(status 400) are kept: they would fail the same way again.

-o - (or no -o) writes to standard output; -o naming the input file (or a link to it) is refused.
Exit codes: 0 all jobs succeeded, 1 some failed (or results could not be written), 2 usage error
(bad flags, unreadable input, results that do not answer the input), 130 / 143 interrupted,
141 the reader of standard output went away.

--shard I/N runs the lines whose index modulo N is I (I may be "auto", read from
JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID); join the shard outputs with petal merge.`,
		Flags: append(append(modelFlags(), storeFlag()),
			&cli.IntFlag{Name: "prefix-cache", Value: 1024, Usage: "MB of model states kept in memory so that a job resending an earlier job's conversation continues from it (0: none)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "result file; - or none: standard output. Never the input file"},
			&cli.BoolFlag{Name: "resume", Usage: "continue a run: keep the results in --output that answer the input's lines, run the rest and append them"},
			&cli.BoolFlag{Name: "rerun-changed", Usage: "with --resume: run again the lines that changed since their result was written, instead of refusing"},
			&cli.StringFlag{Name: "shard", Usage: "run only shard I of N (\"I/N\", or \"auto/N\" from JOB_COMPLETION_INDEX / SLURM_ARRAY_TASK_ID)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bar or summary on stderr"},
			&cli.BoolFlag{Name: "sync", Value: true, Usage: "fsync the output file after each result line"},
		),
		Action: func(c *cli.Context) error {
			o := batchOptions{
				modelOptions: readModelOptions(c), sessionOptions: sessionOptions{Dir: c.String("sessions"), PrefixCacheMB: c.Int("prefix-cache")},
				Output: c.String("output"), Resume: c.Bool("resume"), RerunChanged: c.Bool("rerun-changed"), Shard: c.String("shard"),
				Quiet: c.Bool("quiet"), Sync: c.Bool("sync"), Input: "-",
			}
			switch c.NArg() {
			case 0:
				if st.InIsTerminal {
					return usageErr("batch needs a FILE of job lines, or - with the jobs on standard input")
				}
			case 1:
				o.Input = c.Args().First()
			default:
				return usageErr("batch takes one FILE (got %d arguments)", c.NArg())
			}
			return runBatch(c, st, o)
		},
	}
}

// batchStats count what a batch did.
type batchStats struct {
	ok, failed, skipped int
	generated           int
	start               time.Time
}

func runBatch(c *cli.Context, st *Streams, o batchOptions) error {
	var shard jobs.ShardSpec
	if o.Shard != "" {
		var err error
		if shard, err = jobs.ParseShard(o.Shard, st.Getenv); err != nil {
			return usageErr("--shard: %v", err)
		}
	}
	if o.Output == "-" {
		o.Output = "" // standard output, as for the input
	}
	if o.Resume && o.Output == "" {
		return usageErr("--resume needs --output FILE: the results to resume are read from that file")
	}
	if o.RerunChanged && !o.Resume {
		return usageErr("--rerun-changed goes with --resume: it says what to do with results of lines that changed")
	}
	in := st.In
	inName := "standard input"
	total := -1
	if o.Input != "-" {
		f, err := openInput(o.Input)
		if err != nil {
			return err
		}
		defer f.Close()
		in, inName = f, o.Input
		if n, err := countJobLines(o.Input, shard); err == nil {
			total = n
		}
	}
	// Nothing is opened for writing before this check: -o naming the input
	// (or a link to it) would truncate the jobs.
	if o.Output != "" {
		if err := refuseSameFile(in, inName, o.Output); err != nil {
			return err
		}
	}

	done := jobs.Done{}
	out := st.Out
	if o.Output != "" {
		flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if o.Resume {
			var err error
			if in, done, err = resumeOutput(st, o, in, inName, shard); err != nil {
				return err
			}
			flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(o.Output, flags, 0o644)
		if err != nil {
			return usageErr("%v", err)
		}
		defer f.Close()
		out = f
	}
	w := jobs.NewWriter(out, jobs.WriterOptions{Sync: o.Sync})
	writeLine := func(line jobs.Output) error {
		err := w.Write(line)
		if err != nil && o.Output != "" {
			return fmt.Errorf("%w; the results already written are whole: make room and run again with --resume", err)
		}
		return err
	}

	e, name, err := openEngine(st, o.modelOptions)
	if err != nil {
		return err
	}
	defer e.Close()
	x, err := newExecutor(st, o.sessionOptions, e, name, e.LoadTime)
	if err != nil {
		return err
	}

	var bar *progressbar.ProgressBar
	if st.ErrIsTerminal && !o.Quiet {
		bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(st.Err), progressbar.OptionSetDescription("jobs"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	stats := batchStats{start: time.Now()}
	r := jobs.NewReader(in)
	if o.Shard != "" {
		r.Take = shard.Takes
	}
	interrupted := false
	for !interrupted {
		job, lerr, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &exitError{ExitUsage, fmt.Errorf("reading %s: %w", inName, err)}
		}
		if lerr != nil {
			if o.Resume && done.HasLine(lerr.Line) {
				stats.skipped++
				continue
			}
			if err := writeLine(lerr.Output()); err != nil {
				return err
			}
			stats.failed++
			progress(bar, &stats)
			continue
		}
		if o.Resume && done.Has(job) {
			stats.skipped++
			progress(bar, &stats)
			continue
		}
		res, jerr := runRecovered(st, x, c.Context, job)
		var line jobs.Output
		if jerr != nil {
			line = jobs.Failure(job.Origin(), jerr.APIError())
			line.StatusCode = jerr.Status
			stats.failed++
		} else {
			line = jobs.Success(job.Origin(), res.Body, res.Warnings)
			stats.ok++
			stats.generated += len(res.Result.Tokens)
			interrupted = res.Result.FinishReason == jobs.FinishCancelled
		}
		if err := writeLine(line); err != nil {
			return err
		}
		progress(bar, &stats)
		interrupted = interrupted || c.Context.Err() != nil
	}
	if bar != nil {
		bar.Finish()
	}
	if !o.Quiet && st.ErrIsTerminal {
		fmt.Fprintf(st.Err, "petal: %d succeeded, %d failed, %d skipped, %d tokens generated in %.1f s\n",
			stats.ok, stats.failed, stats.skipped, stats.generated, time.Since(stats.start).Seconds())
	}
	switch {
	case interrupted:
		return &exitError{ExitInterrupted, fmt.Errorf("interrupted: finished results are in the output; run again with --resume to continue")}
	case stats.failed > 0:
		return &exitError{ExitJobsFailed, fmt.Errorf("%d of %d jobs failed (see their error lines)", stats.failed, stats.ok+stats.failed)}
	}
	return nil
}

func progress(bar *progressbar.ProgressBar, s *batchStats) {
	if bar == nil {
		return
	}
	rate := float64(s.generated) / time.Since(s.start).Seconds()
	bar.Describe(fmt.Sprintf("jobs (%.1f tok/s)", rate))
	bar.Add(1)
}

// countJobLines counts the non-blank lines of a file this shard will run,
// for the progress bar.
func countJobLines(path string, shard jobs.ShardSpec) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	n, line := 0, 0
	for {
		b, err := r.ReadSlice('\n')
		if len(b) > 0 || err == nil {
			line++
			if len(bytes.TrimSpace(b)) > 0 && (shard.Count == 0 || shard.Takes(line)) {
				n++
			}
		}
		// a line longer than the buffer arrives in pieces: count it once
		for err == bufio.ErrBufferFull {
			_, err = r.ReadSlice('\n')
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// resumeOutput checks the results an earlier run left in o.Output against
// the input and cuts the file to those that stay; it returns the input to
// run (standard input is kept in a temporary file, as it is read twice)
// and the jobs that are done. Results that do not answer the input's lines
// refuse the resume (exit 2), unless --rerun-changed.
func resumeOutput(st *Streams, o batchOptions, in io.Reader, inName string, shard jobs.ShardSpec) (io.Reader, jobs.Done, error) {
	prev, err := jobs.ReadPrevious(o.Output)
	if err != nil {
		return nil, jobs.Done{}, &exitError{ExitUsage, err}
	}
	check := io.Reader(nil)
	if o.Input == "-" {
		spool, err := spoolInput(in)
		if err != nil {
			return nil, jobs.Done{}, err
		}
		in = spool
		check = io.NewSectionReader(spool, 0, 1<<62)
	} else {
		f, err := os.Open(o.Input)
		if err != nil {
			return nil, jobs.Done{}, usageErr("%v", err)
		}
		defer f.Close()
		check = f
	}
	opts := jobs.ResumeOptions{InputName: inName, RerunChanged: o.RerunChanged}
	if o.Shard != "" {
		opts.Take = shard.Takes
	}
	plan, err := prev.Plan(check, opts)
	if err != nil {
		return nil, jobs.Done{}, &exitError{ExitUsage, err}
	}
	if plan.Unverified > 0 {
		fmt.Fprintf(st.Err, "petal: warning: %d results in %s (the first on its line %d) have no line_hash (written by an older petal or another tool): they are taken to answer the lines they name, unchecked\n",
			plan.Unverified, o.Output, plan.FirstUnverified)
	}
	if !o.Quiet && st.ErrIsTerminal && (plan.Rerun > 0 || plan.Changed > 0) {
		fmt.Fprintf(st.Err, "petal: resuming: running again %d jobs that failed through no fault of their own or were cut short, and %d whose lines changed\n", plan.Rerun, plan.Changed)
	}
	if err := plan.Apply(); err != nil {
		return nil, jobs.Done{}, err
	}
	return in, plan.Done, nil
}

// spoolInput copies standard input to an unlinked temporary file, so that
// resume can check it before running it.
func spoolInput(in io.Reader) (*os.File, error) {
	f, err := os.CreateTemp("", "petal-stdin-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("keeping standard input to resume: %w", err)
	}
	os.Remove(f.Name()) // gone when closed, whatever happens
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return nil, fmt.Errorf("keeping standard input to resume: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// runJob runs one job of a batch; tests replace it to make a job panic.
var runJob = (*executor.Executor).Run

// runRecovered runs a job, turning a panic into that job's failure
// (status 500, "internal error: ..."), so that one bad job cannot end the
// batch, nor every resume of it. The stack goes to stderr for a bug report.
func runRecovered(st *Streams, x *executor.Executor, ctx context.Context, job *jobs.Job) (res *executor.Outcome, jerr *executor.JobError) {
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(st.Err, "petal: line %d: internal error (a panic; the batch goes on): %v\n%s", job.Line, v, debug.Stack())
			res, jerr = nil, &executor.JobError{Status: 500, Err: fmt.Errorf("internal error: %v", v)}
		}
	}()
	return runJob(x, ctx, job, executor.Stream{})
}
