package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"petal/engine/chat"
	"petal/engine/executor"
	"petal/jobs"
)

type runOptions struct {
	modelOptions
	sessionOptions
	Prompt        string
	Stdin         string
	Raw           bool
	System        string
	JSON          bool
	Quiet         bool
	ShowReasoning *bool // nil: shown dimmed on a terminal, dropped otherwise
	NoThink       bool
	Params        jobs.Params
}

// rawDefaultMaxTokens bounds a plain completion (run --raw) that gives no
// --max-tokens: a completion has no end of turn, and running to the end of
// the context would take minutes even on the embedded model.
const rawDefaultMaxTokens = 256

func samplingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "max-tokens", Usage: fmt.Sprintf("most tokens to generate, at least 1 (default: chat: until the model ends its turn or the context is full; --raw: %d)", rawDefaultMaxTokens)},
		&cli.Float64Flag{Name: "temperature", Usage: "sampling temperature, 0 (greedy) to 2 (default: the model's generation_config.json)"},
		&cli.Float64Flag{Name: "top-p", Usage: "nucleus sampling: keep the most likely tokens up to this total probability, above 0 and at most 1"},
		&cli.IntFlag{Name: "top-k", Usage: "keep the k most likely tokens (0 or -1: off)"},
		&cli.Float64Flag{Name: "min-p", Usage: "drop tokens less likely than this fraction of the most likely one, 0 to 1"},
		&cli.Int64Flag{Name: "seed", Usage: "random seed, for reproducible sampling"},
		&cli.StringSliceFlag{Name: "stop", Usage: "stop when this text is generated; not empty (repeatable)"},
		&cli.Float64Flag{Name: "presence-penalty", Usage: "OpenAI presence penalty (-2..2)"},
		&cli.Float64Flag{Name: "frequency-penalty", Usage: "OpenAI frequency penalty (-2..2)"},
		&cli.Float64Flag{Name: "repetition-penalty", Usage: "repetition penalty, above 0 (1: off)"},
	}
}

// readSampling turns the sampling flags into the request fields of the same
// name and validates them as a batch line's are: one set of limits for both.
func readSampling(c *cli.Context, kind jobs.Kind) (jobs.Params, error) {
	options := map[string]any{}
	for _, f := range samplingFlags() {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		field := strings.ReplaceAll(name, "-", "_")
		switch f.(type) {
		case *cli.Float64Flag:
			x := c.Float64(name)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return jobs.Params{}, usageErr("--%s %v: want a finite number", name, x)
			}
			options[field] = x
		case *cli.IntFlag:
			options[field] = c.Int(name)
		case *cli.Int64Flag:
			options[field] = c.Int64(name)
		case *cli.StringSliceFlag:
			options[field] = c.StringSlice(name)
		}
	}
	p, err := jobs.CheckParams(kind, options)
	if err != nil {
		return p, usageErr("%s", flagMessage(err))
	}
	return p, nil
}

var fieldName = regexp.MustCompile(`fields? "([a-z_]+)"`)

// flagMessage says a request-field error in terms of the flags: field
// "top_p" must be ... becomes --top-p must be ...
func flagMessage(err *jobs.ParamError) string {
	msg := fieldName.ReplaceAllStringFunc(err.Message, func(m string) string {
		return "--" + strings.ReplaceAll(fieldName.FindStringSubmatch(m)[1], "_", "-")
	})
	if !strings.Contains(msg, "--") && err.Param != "" {
		msg = "--" + strings.ReplaceAll(err.Param, "_", "-") + ": " + msg
	}
	return msg
}

func runCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "answer one prompt, streaming the answer to stdout",
		ArgsUsage: "[PROMPT]",
		Description: fmt.Sprintf(`The prompt comes from the argument or from standard input. With both, standard input is the
context and the argument the instruction, sent together as one user message:
  petal run "Summarise this" < notes.txt
The model's chat template is applied and the answer runs until the model ends its turn. --raw
sends the text as a plain completion instead, %d tokens long unless --max-tokens says otherwise.
The answer streams to stdout; the model's reasoning (its <think> block) is shown dimmed when
stdout is a terminal and left out otherwise (--show-reasoning=true|false decides). Timing goes
to stderr. --json prints one chat.completion (or text_completion) object instead, with usage
and timings. The sampling flags take the values a batch job line may have (the same checks).`, rawDefaultMaxTokens),
		Flags: append(append(append(modelFlags(), samplingFlags()...), sessionFlags()...),
			&cli.BoolFlag{Name: "raw", Usage: "plain text completion: no chat template"},
			&cli.StringFlag{Name: "system", Usage: "a system message"},
			&cli.BoolFlag{Name: "no-think", Usage: "ask the model to answer without reasoning (enable_thinking false)"},
			&cli.BoolFlag{Name: "show-reasoning", Usage: "print the reasoning block (default: on a terminal only)"},
			&cli.BoolFlag{Name: "json", Usage: "print one result object instead of streaming"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no timing line on stderr"},
		),
		Action: func(c *cli.Context) error {
			o := runOptions{
				modelOptions: readModelOptions(c), sessionOptions: readSessionOptions(c),
				Raw: c.Bool("raw"), System: c.String("system"), JSON: c.Bool("json"), Quiet: c.Bool("quiet"),
				NoThink: c.Bool("no-think"),
			}
			kind := jobs.Chat
			if o.Raw {
				kind = jobs.Completion
			}
			var err error
			if o.Params, err = readSampling(c, kind); err != nil {
				return err
			}
			if c.IsSet("show-reasoning") {
				v := c.Bool("show-reasoning")
				o.ShowReasoning = &v
			}
			if c.NArg() > 1 {
				return usageErr("run takes one PROMPT argument; quote it (got %d arguments)", c.NArg())
			}
			o.Prompt = c.Args().First()
			if !st.InIsTerminal && st.In != nil {
				data, err := io.ReadAll(st.In)
				if err != nil {
					return err
				}
				o.Stdin = string(data)
			}
			if strings.TrimSpace(o.Prompt) == "" && strings.TrimSpace(o.Stdin) == "" {
				return usageErr("no prompt: give one as an argument or on standard input")
			}
			return runRun(c, st, o)
		},
	}
}

// runJob turns the command line into the same job a batch line would be.
func (o *runOptions) job() (*jobs.Job, error) {
	text := o.Prompt
	if strings.TrimSpace(o.Stdin) != "" {
		if text == "" {
			text = o.Stdin
		} else {
			text = o.Prompt + "\n\n" + o.Stdin
		}
	}
	job := &jobs.Job{Line: 1, Params: o.Params, Session: o.Session, ForkFrom: o.ForkFrom}
	if o.Raw {
		if o.System != "" || o.NoThink {
			return nil, usageErr("--system and --no-think need the chat template; drop --raw")
		}
		job.Kind, job.Prompt = jobs.Completion, text
		if job.Params.MaxTokens == nil {
			n := rawDefaultMaxTokens
			job.Params.MaxTokens = &n
		}
		return job, nil
	}
	var msgs []map[string]string
	if o.System != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": o.System})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": text})
	job.Kind = jobs.Chat
	job.Messages, _ = json.Marshal(msgs)
	if o.NoThink {
		job.TemplateKwargs = json.RawMessage(`{"enable_thinking":false}`)
	}
	return job, nil
}

func runRun(c *cli.Context, st *Streams, o runOptions) error {
	job, err := o.job()
	if err != nil {
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

	var out executor.Stream
	var splitter *chat.ThinkSplitter
	if !o.JSON {
		showReasoning := st.OutIsTerminal
		if o.ShowReasoning != nil {
			showReasoning = *o.ShowReasoning
		}
		answer := func(s string) { io.WriteString(st.Out, s) }
		reasoning := func(string) {}
		if showReasoning {
			reasoning = func(s string) {
				if st.OutIsTerminal {
					s = "\x1b[2m" + s + "\x1b[0m"
				}
				io.WriteString(st.Out, s)
			}
		}
		if job.Kind == jobs.Chat {
			splitter = chat.NewThinkSplitter(false, reasoning, answer)
			out.Text = func(s string) { splitter.Write(s) }
			// the rendered prompt decides whether generation starts inside <think>
			out.Prompt = func(prompt string) {
				splitter = chat.NewThinkSplitter(chat.PromptOpensThink(prompt), reasoning, answer)
			}
		} else {
			out.Text = answer
		}
	}
	res, jerr := x.Run(c.Context, job, out)
	if jerr != nil {
		if jerr.Status == 400 {
			return usageErr("%v", jerr.Err)
		}
		return jerr.Err
	}
	if splitter != nil {
		splitter.Flush()
	}
	if o.JSON {
		b, _ := json.Marshal(jobs.Success(job.Origin(), res.Body, res.Warnings).Body)
		fmt.Fprintln(st.Out, string(b))
	} else if st.OutIsTerminal || !strings.HasSuffix(res.Result.Text, "\n") {
		fmt.Fprintln(st.Out)
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(st.Err, "petal: warning:", w)
	}
	if !o.Quiet && !o.JSON {
		fmt.Fprintln(st.Err, timingLine(res.Timings, res.Result.FinishReason))
	}
	if res.Result.FinishReason == jobs.FinishCancelled {
		return &exitError{ExitInterrupted, fmt.Errorf("interrupted")}
	}
	return nil
}

func timingLine(t jobs.Timings, finish string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "petal: prompt %d tokens", t.PromptN)
	if t.CacheN > 0 {
		fmt.Fprintf(&b, " (+%d restored in %.0f ms)", t.CacheN, t.RestoreMS)
	}
	fmt.Fprintf(&b, " in %.0f ms (%.1f tok/s) · generated %d tokens in %.0f ms (%.1f tok/s) · first token %.0f ms",
		t.PromptMS, t.PromptPerSecond, t.PredictedN, t.PredictedMS, t.PredictedPerSecond, t.TTFTMS)
	if t.LoadMS > 0 {
		fmt.Fprintf(&b, " · load %.0f ms", t.LoadMS)
	}
	if t.SaveMS > 0 {
		fmt.Fprintf(&b, " · saved in %.0f ms", t.SaveMS)
	}
	fmt.Fprintf(&b, " · %s", finish)
	return b.String()
}
