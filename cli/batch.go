package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"petal/jobs"
)

type batchOptions struct {
	modelOptions
	sessionOptions
	Input  string // "-" for standard input
	Output string // "" for standard output
	Resume bool
	Shard  string
	Quiet  bool
	Sync   bool
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
Request fields: max_tokens, temperature, top_p, top_k, min_p, seed, stop, logprobs, top_logprobs,
echo, presence_penalty, frequency_penalty, repetition_penalty, chat_template_kwargs, and petal's
session and fork_from. Every result carries usage and timings, plus "line" (the input line).

A bad line gets an error result (status 400, with a message naming the field) and the batch goes
on. Results are written whole and flushed one by one; Ctrl-C finishes the current line
(finish_reason "cancelled" if cut short) and exits with 130. --resume skips jobs that already have
a result in -o OUT. Exit codes: 0 all jobs succeeded, 1 some failed, 2 usage error, 130 interrupted.

--shard I/N runs the lines whose index modulo N is I (I may be "auto", read from
JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID); join the shard outputs with petal merge.`,
		Flags: append(append(modelFlags(), storeFlag()),
			&cli.IntFlag{Name: "prefix-cache", Value: 1024, Usage: "MB of model states kept in memory so that a job resending an earlier job's conversation continues from it (0: none)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "result file (default: standard output)"},
			&cli.BoolFlag{Name: "resume", Usage: "skip jobs that already have a result in --output; append the rest"},
			&cli.StringFlag{Name: "shard", Usage: "run only shard I of N (\"I/N\", or \"auto/N\" from JOB_COMPLETION_INDEX / SLURM_ARRAY_TASK_ID)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bar or summary on stderr"},
			&cli.BoolFlag{Name: "sync", Value: true, Usage: "fsync the output file after each result line"},
		),
		Action: func(c *cli.Context) error {
			o := batchOptions{
				modelOptions: readModelOptions(c), sessionOptions: sessionOptions{Dir: c.String("sessions"), PrefixCacheMB: c.Int("prefix-cache")},
				Output: c.String("output"), Resume: c.Bool("resume"), Shard: c.String("shard"),
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
	if o.Resume && o.Output == "" {
		return usageErr("--resume needs --output: the results to resume are read from that file")
	}
	in := st.In
	total := -1
	if o.Input != "-" {
		f, err := os.Open(o.Input)
		if err != nil {
			return usageErr("%v", err)
		}
		defer f.Close()
		in = f
		if n, err := countJobLines(o.Input, shard); err == nil {
			total = n
		}
	}

	done := jobs.Done{}
	out := st.Out
	if o.Output != "" {
		flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if o.Resume {
			var err error
			if done, err = jobs.ReadDone(o.Output); err != nil {
				return err
			}
			if done.Partial > 0 {
				if err := jobs.TruncatePartial(o.Output); err != nil {
					return err
				}
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

	e, name, err := openEngine(st, o.modelOptions)
	if err != nil {
		return err
	}
	defer e.Close()
	srv := &server{e: e, modelName: name, loadMS: ms(e.LoadTime)}
	if srv.store, err = openSessions(st, o.sessionOptions, e); err != nil {
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
			return err
		}
		if lerr != nil {
			if o.Resume && done.HasLine(lerr.Line) {
				stats.skipped++
				continue
			}
			if err := w.Write(lerr.Output()); err != nil {
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
		res, jerr := srv.serve(c.Context, job, nil)
		var line jobs.Output
		if jerr != nil {
			line = jobs.Failure(job.Origin(), jerr.apiError())
			line.StatusCode = jerr.Status
			stats.failed++
		} else {
			line = jobs.Success(job.Origin(), res.Body, res.Warnings)
			stats.ok++
			stats.generated += len(res.Result.Tokens)
			interrupted = res.Result.FinishReason == jobs.FinishCancelled
		}
		if err := w.Write(line); err != nil {
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
