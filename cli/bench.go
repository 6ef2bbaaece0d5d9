package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"petal/bench"
	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/executor"
	"petal/engine/model"
	"petal/engine/model/synthwrite"
	"petal/engine/sample"
	"petal/jobs"
)

type benchOptions struct {
	modelOptions
	Synthetic      string
	Seed           uint64
	Lengths        string // both sweeps
	PromptLengths  string // overrides Lengths for prefill
	ContextLengths string // overrides Lengths for decode
	DecodeTokens   int
	Repeats        int
	PrefillContext bool
	Profile        bool
	Floors         bool
	Ablate         string // backend switches, each run as a sweep of its own
	AblateLengths  string // the lengths of those sweeps (default: the main sweep's)
	AblateRepeats  int    // runs a measurement of those sweeps, against the base swept again as often (0: --repeats, against the main sweep)
	JSON           bool
	Out            string
	Chart          string
	Force          bool
	Quiet          bool
	Sampling       sample.Params // how decode picks its tokens (greedy unless --temperature)
}

// benchSamplingFlags are run's sampling flags that shape a decode step's
// pick (not its stops or its length): the cost of a sampled token is timed
// with them.
var benchSamplingFlags = []string{"temperature", "top-p", "top-k", "min-p"}

// readBenchSampling checks the sampling flags as run does (one set of
// limits) and gives the sampler's settings: greedy unless --temperature is
// above 0; top-p 1 (off) where not given; the draws seeded by --seed.
func readBenchSampling(c *cli.Context) (sample.Params, error) {
	options := map[string]any{}
	for _, name := range benchSamplingFlags {
		if !c.IsSet(name) {
			continue
		}
		field := strings.ReplaceAll(name, "-", "_")
		if name == "top-k" {
			options[field] = c.Int(name)
			continue
		}
		x := c.Float64(name)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return sample.Params{}, usageErr("--%s %v: want a finite number", name, x)
		}
		options[field] = x
	}
	p, err := jobs.CheckParams(jobs.Completion, options)
	if err != nil {
		return sample.Params{}, usageErr("%s", flagMessage(err))
	}
	s := executor.ShapeOver(sample.Params{TopP: 1, RepetitionPenalty: 1, Seed: c.Uint64("seed")}, p)
	if s.Temperature <= 0 && (s.TopK > 0 || s.TopP < 1 || s.MinP > 0) {
		return sample.Params{}, usageErr("--top-p, --top-k and --min-p shape a sampled pick: give --temperature above 0 too (without it decode is greedy)")
	}
	return s, nil
}

func benchCommand(st *Streams) *cli.Command {
	var flags []cli.Flag
	for _, f := range modelFlags() {
		if !slices.Contains(f.Names(), "chat-template") { // bench renders no chat
			flags = append(flags, f)
		}
	}
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure prefill and decode speed over prompt and context lengths",
		ArgsUsage: " ",
		Description: `Measures two speeds at each length N, in tokens per second:
  prefill  N random tokens run from an empty state (in --chunk sized passes) with logits for
           the last one, as a prompt is run before generation: N / time. The first run at a
           length records and compiles its programs, as a one-shot prompt does; --json gives that
           part of each run's time as compile_runs_seconds (median compile_seconds).
  decode   after a state of N tokens, --decode-tokens single-token steps, each with its logits and
           the greedy pick of the next token: steps / time. One step before them is not timed (it
           records the op program). --temperature (above 0), with --top-k, --top-p and --min-p,
           times a sampled pick instead, as run makes with those settings (run's defaults come
           from the model's generation_config.json, which for Qwen3.6 samples). By default the state of N tokens is random K/V and recurrent
           state imported into the model, which costs nothing on a slow machine and times the same
           work; --prefill-context builds it by prefilling N tokens for real instead.
Lengths default to 256, 512, 1K, ... 128K, up to --max-context (default: the model's
max_position_embeddings). --repeats runs each measurement several times and keeps the median.

--synthetic NAME builds a model of a named shape with random 4-bit weights in memory, so no
checkpoint is needed: qwen3.6-35b-a3b (about 20 GB; refused where the memory is not there, unless
--force) or tiny (the embedded model's shape). Without it the model comes from --model (default:
the embedded tiny model). The speed of random weights is the speed of real ones of that shape.

Results print as a table, or as JSON with --json (--out FILE writes the JSON to a file too);
--chart FILE.svg draws tokens per second against length. Progress goes to stderr.

Before the sweep, the backend's ceilings are measured in the same run (--floors=false leaves them
out): its read bandwidth (a streaming read of a buffer far above the caches) and its prefill matrix
kernel's rate on a large problem. Each speed is then also a share of its floor ("% floor"):
  decode   tok/s against read bandwidth / the bytes a token must read (the active 4-bit weights:
           the routed and shared experts, the projections, the router, the lm_head; the KV cache at
           N; the recurrent state)
  prefill  tok/s against matrix rate / the FLOPs a token needs (2 x the active matrix weights, plus
           causal attention's 4 x head_dim x query heads per key in each full-attention layer over
           (N+1)/2 keys on average, plus the lm_head once)
The report gives the load time (on a GPU also kernel launches per decoded token and the peak device
memory in use): for --model, engine.Open's (mapping the checkpoint's files and uploading its
weights, with the page cache as it is: run it twice, or cat the files to /dev/null first, for a warm
load); for --synthetic, making the random weights on the host and uploading them.

--write-model DIR (with --synthetic NAME, and --seed) writes that synthetic model as a model folder
instead of measuring: config.json with the MLX 4-bit quantization block, safetensors shards of up
to 5 GiB with their index, and the embedded tiny model's tokenizer and chat template. The weights
are made a layer at a time and the folder appears only once complete. petal bench --model DIR (or
run, batch) then loads it as it would a downloaded checkpoint, so its load time is a real one;
the weights are --synthetic's, bit for bit. A folder that is not empty is refused; --force
replaces one that --write-model wrote before, and nothing else.

--ablate KEY=VALUE[,KEY=VALUE...] runs the sweep again once per switch, with that one option added to
the --backend spec (cuda: graphs=off, fused=off, attn=plain, delta=sequential, gemm=plain,
qmv=fast, kv=bf16, pdl=off, norms=apart, router=plain, moelayer=one; cpu: delta=chunked, kv=bf16, ...), and prints each
switch's effect on prefill and decode tok/s per length in percent
(in --json as "ablation"). Each run builds the model again. --ablate-lengths LIST measures those
sweeps at other lengths than the main one (a subset of them, to compare: 512,4K,16K, say).
--ablate-repeats N runs each of their measurements N times (the median kept) and sweeps the base
backend again at their lengths as often to compare them with (in --json as "ablation_base"), not
the main sweep: a single run is a length's first, which carries the host's work for a length not
seen before and swings by several percent.

--profile runs each measurement once more with every op timed on its own and prints, per length,
where the time went: milliseconds per token and share by layer kind (full-attention layers,
Gated DeltaNet layers, the ops outside the layers) and op family within each (attn.sdpa,
delta.rule, moe.experts, head.logits, ...), for prefill and decode; in --json as "profile".

Examples:
  petal bench --synthetic tiny --lengths 256,1K,4K
  petal bench --lengths 1K --profile --backend cpu:kv=bf16
  petal bench --synthetic qwen3.6-35b-a3b --lengths 4K --temperature 0.7 --top-k 20 --top-p 0.8
  petal bench --synthetic qwen3.6-35b-a3b --max-context 8192 --chart speed.svg
  petal bench --synthetic qwen3.6-35b-a3b --write-model /tmp/q36 && petal bench --model /tmp/q36
  petal bench --backend cuda --synthetic qwen3.6-35b-a3b --ablate graphs=off,fused=off,gemm=plain
  petal bench -m mlx-community/Qwen3.6-35B-A3B-4bit --json > speed.json`,
		Flags: append(append(flags, benchSamplingFlagDefs()...),
			&cli.StringFlag{Name: "synthetic", Usage: "random weights of a named shape: " + strings.Join(model.SyntheticNames(), ", ")},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the synthetic weights and of the random prompts and states"},
			&cli.StringFlag{Name: "lengths", Usage: "lengths to measure, like 256,1K,4K (default: 256 to 128K by doubling, up to --max-context)"},
			&cli.StringFlag{Name: "prompt-lengths", Usage: "lengths for prefill only (default: --lengths)"},
			&cli.StringFlag{Name: "context-lengths", Usage: "context lengths for decode only (default: --lengths)"},
			&cli.IntFlag{Name: "decode-tokens", Value: 32, Usage: "timed decode steps per measurement"},
			&cli.IntFlag{Name: "repeats", Value: 1, Usage: "runs per measurement; the median is kept"},
			&cli.BoolFlag{Name: "prefill-context", Usage: "build decode's N-token state by prefilling, not by importing a random one"},
			&cli.BoolFlag{Name: "profile", Usage: "also time every op and print the time by layer kind and op family"},
			&cli.BoolFlag{Name: "floors", Value: true, Usage: "measure the backend's read bandwidth and matrix rate first and give each speed as a share of its floor"},
			&cli.StringFlag{Name: "ablate", Usage: "backend switches KEY=VALUE[,...]: the sweep again once per switch, and the effect of each in % (one key may take several values: gemm=tc,gemm=plain)"},
			&cli.StringFlag{Name: "ablate-lengths", Usage: "lengths of the --ablate sweeps, for prefill and decode (default: those of the main sweep)"},
			&cli.IntFlag{Name: "ablate-repeats", Usage: "runs per measurement of the --ablate sweeps, the median kept, compared with the base backend swept again at their lengths as often, not with the main sweep (default: --repeats, against the main sweep)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON instead of a table"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "also write the JSON report to this file"},
			&cli.StringFlag{Name: "chart", Usage: "write an SVG chart of tokens per second against length to this file"},
			&cli.StringFlag{Name: "write-model", Usage: "write the --synthetic model (of --seed) as a model folder DIR, measuring nothing; petal bench --model DIR then times a real load of it"},
			&cli.BoolFlag{Name: "force", Usage: "try a synthetic model even where the memory check says it does not fit; with --write-model, replace a synthetic folder written before"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress lines on stderr"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr("bench takes no arguments (got %q); use --model or --synthetic", c.Args().First())
			}
			o := benchOptions{
				modelOptions: readModelOptions(c), Synthetic: c.String("synthetic"), Seed: c.Uint64("seed"),
				Lengths: c.String("lengths"), PromptLengths: c.String("prompt-lengths"), ContextLengths: c.String("context-lengths"),
				DecodeTokens: c.Int("decode-tokens"), Repeats: c.Int("repeats"), PrefillContext: c.Bool("prefill-context"), Profile: c.Bool("profile"),
				Floors: c.Bool("floors"), Ablate: c.String("ablate"), AblateLengths: c.String("ablate-lengths"), AblateRepeats: c.Int("ablate-repeats"),
				JSON: c.Bool("json"), Out: c.String("out"), Chart: c.String("chart"), Force: c.Bool("force"), Quiet: c.Bool("quiet"),
			}
			var err error
			if o.Sampling, err = readBenchSampling(c); err != nil {
				return err
			}
			if c.IsSet("write-model") {
				dir := c.String("write-model")
				if dir == "" {
					return usageErr("--write-model: name the folder to write")
				}
				if err := checkWriteModelFlags(c); err != nil {
					return err
				}
				return writeSyntheticModel(c.Context, st, o, dir)
			}
			return runBench(c.Context, st, o)
		},
	}
}

// benchSamplingFlagDefs are run's definitions of benchSamplingFlags.
func benchSamplingFlagDefs() []cli.Flag {
	var out []cli.Flag
	for _, f := range samplingFlags() {
		if slices.Contains(benchSamplingFlags, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

func runBench(ctx context.Context, st *Streams, o benchOptions) error {
	switch {
	case o.Synthetic != "" && o.Model != "":
		return usageErr("--synthetic and --model both given; choose one")
	case o.DecodeTokens < 1:
		return usageErr("--decode-tokens %d: want at least 1", o.DecodeTokens)
	case o.Repeats < 1:
		return usageErr("--repeats %d: want at least 1", o.Repeats)
	case o.Chunk < 0:
		return usageErr("--chunk %d: want at least 1", o.Chunk)
	case o.MaxContext < 0:
		return usageErr("--max-context %d: want a positive number", o.MaxContext)
	}
	var switches []backend.Option
	if o.AblateLengths != "" && o.Ablate == "" {
		return usageErr("--ablate-lengths without --ablate: name the switches to run at those lengths")
	}
	if o.AblateRepeats != 0 && o.Ablate == "" {
		return usageErr("--ablate-repeats without --ablate: name the switches to run that often")
	}
	if o.AblateRepeats < 0 {
		return usageErr("--ablate-repeats %d: want at least 1", o.AblateRepeats)
	}
	if o.Ablate != "" {
		if o.AblateLengths != "" {
			if _, err := bench.ParseLengths(o.AblateLengths); err != nil {
				return usageErr("--ablate-lengths: %v", err)
			}
		}
		var err error
		if switches, err = bench.ParseSwitches(o.Ablate); err != nil {
			return usageErr("%v", err)
		}
		if sp, err := backend.ParseSpec(o.Backend); err == nil && sp.Name != "auto" {
			if _, err := ablationSpecs(o.Backend, switches); err != nil {
				return err // before the first sweep, so a typo costs none
			}
		}
	}
	progress := func(line string) {
		if !o.Quiet {
			fmt.Fprintln(st.Err, line)
		}
	}
	r, name, runErr := benchOnce(ctx, st, o, progress)
	if r == nil {
		return runErr
	}
	if runErr == nil && len(switches) > 0 {
		runErr = ablate(ctx, st, o, name, switches, r, progress)
	}
	if err := writeBenchReport(st.Out, r, o); err != nil {
		return err
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return &exitError{ExitInterrupted, fmt.Errorf("interrupted: the lengths measured so far are above")}
		}
		return runErr
	}
	return nil
}

// ablate runs the sweep again once per switch, each with the base backend
// (named: where --backend was auto, the one it chose) and that one option,
// and adds each comparison to r. A switch whose sweep fails is
// recorded with its error and the others still run.
func ablate(ctx context.Context, st *Streams, o benchOptions, base string, switches []backend.Option, r *bench.Report, progress func(string)) error {
	if sp, err := backend.ParseSpec(o.Backend); err == nil && sp.Name != "auto" {
		base = o.Backend
	}
	specs, err := ablationSpecs(base, switches)
	if err != nil {
		return err
	}
	sweep := func(spec string) benchOptions {
		vo := o
		vo.Backend, vo.Floors, vo.Profile = spec, false, false
		if o.AblateLengths != "" {
			vo.Lengths, vo.PromptLengths, vo.ContextLengths = o.AblateLengths, "", ""
		}
		if o.AblateRepeats > 0 {
			vo.Repeats = o.AblateRepeats
		}
		return vo
	}
	against := r
	if o.AblateRepeats > 0 {
		// the base again at the ablations' lengths and runs: the main
		// sweep's single runs are each a length's first, which carry the
		// host's work for a length not seen before
		progress(fmt.Sprintf("ablation base: --backend %s, %d runs a measurement", base, o.AblateRepeats))
		b, _, err := benchOnce(ctx, st, sweep(base), progress)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("the ablation's base sweep: %w", err)
		}
		against = b
		r.AblationRepeats, r.AblationBase = o.AblateRepeats, bench.BaseEntries(b)
	}
	for i, sw := range switches {
		label := sw.Key + "=" + sw.Value
		progress(fmt.Sprintf("ablation %d of %d: --backend %s", i+1, len(switches), specs[i]))
		v, _, err := benchOnce(ctx, st, sweep(specs[i]), progress)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			progress(fmt.Sprintf("ablation %s failed: %v", label, err))
			r.Ablation = append(r.Ablation, bench.Ablation{Switch: label, Backend: specs[i], Error: err.Error()})
			continue
		}
		r.Ablation = append(r.Ablation, bench.Compare(against, v, label, specs[i]))
	}
	return nil
}

// ablationSpecs is the backend spec of each switch's sweep: base with the
// switch's option, checked as its backend will parse it.
func ablationSpecs(base string, switches []backend.Option) ([]string, error) {
	specs := make([]string, len(switches))
	for i, sw := range switches {
		spec, err := bench.WithOption(base, sw)
		if err == nil {
			err = checkBackendOptions(spec)
		}
		if err != nil {
			return nil, usageErr("--ablate %s=%s: %v", sw.Key, sw.Value, err)
		}
		specs[i] = spec
	}
	return specs, nil
}

// checkBackendOptions parses a spec's options the way its backend will,
// without opening it.
func checkBackendOptions(spec string) error {
	sp, err := backend.ParseSpec(spec)
	if err != nil {
		return err
	}
	switch sp.Name {
	case "cpu":
		_, err = cpu.ParseOptions(sp.Options)
	case "cuda":
		_, err = cuda.ParseOptions(sp.Options)
	}
	return err
}

// benchOnce makes the model on o's backend, runs the sweep, and closes the
// backend (a GPU's memory is free for the next sweep); it returns the
// report and the backend's name.
func benchOnce(ctx context.Context, st *Streams, o benchOptions, progress func(string)) (*bench.Report, string, error) {
	opts := bench.Options{DecodeTokens: o.DecodeTokens, Repeats: o.Repeats, PrefillContext: o.PrefillContext, Seed: o.Seed,
		Profile: o.Profile, Floors: o.Floors, Sampling: o.Sampling}
	var m *model.Model
	var load float64
	var loadIs string
	if o.Synthetic != "" {
		cfg, err := model.NamedConfig(o.Synthetic)
		if err != nil {
			return nil, "", usageErr("--synthetic: %v", err)
		}
		if err := benchLengths(&opts, o, benchMaxContext(o.MaxContext, cfg.MaxPositionEmbeddings)); err != nil {
			return nil, "", err
		}
		start := time.Now()
		if m, err = syntheticModel(o, progress, opts); err != nil {
			return nil, "", err
		}
		load, loadIs = time.Since(start).Seconds(), "making the random weights on the host and uploading them"
		opts.Model, opts.Synthetic = o.Synthetic, true
	} else {
		e, name, err := openEngine(st, o.modelOptions)
		if err != nil {
			return nil, "", err
		}
		defer e.Close()
		if err := benchLengths(&opts, o, e.MaxContext); err != nil {
			return nil, "", err
		}
		load, loadIs = e.LoadTime.Seconds(), modelLoadIs
		m, opts.Model = e.Model, name
		if shape, seed, ok := synthwrite.Marked(e.Checkpoint.ConfigJSON()); ok {
			opts.Synthetic = true
			opts.Model = fmt.Sprintf("%s (%s, seed %d)", name, shape, seed)
		}
	}
	defer closeBackend(m.Backend())
	r, err := bench.Run(ctx, m, opts, progress)
	if r != nil {
		r.SetLoad(load, loadIs)
	}
	return r, m.Backend().Name(), err
}

// modelLoadIs says what the load time of --model is: engine.Open's.
const modelLoadIs = "engine.Open: mapping the checkpoint's files and uploading the weights to the backend, which reads them " +
	"(from the page cache where they are in it; the cpu backend uses the maps in place and reads them later, on first use); " +
	"the backend's own start-up is not counted"

// closeBackend releases a backend that holds resources of its own.
func closeBackend(be backend.Backend) {
	if c, ok := be.(io.Closer); ok {
		c.Close()
	}
}

// benchLengths fills the sweep's lengths from the flags, the defaults
// capped at limit.
func benchLengths(opts *bench.Options, o benchOptions, limit int) error {
	pick := func(flag, value string) ([]int, error) {
		if value == "" {
			value, flag = o.Lengths, "lengths"
		}
		if value == "" {
			return bench.CapLengths(bench.DefaultLengths(), limit), nil
		}
		ls, err := bench.ParseLengths(value)
		if err != nil {
			return nil, usageErr("--%s: %v", flag, err)
		}
		for _, n := range ls {
			if n > limit {
				return nil, usageErr("--%s: length %d exceeds the maximum context of %d (raise --max-context)", flag, n, limit)
			}
		}
		return ls, nil
	}
	var err error
	if opts.PromptLengths, err = pick("prompt-lengths", o.PromptLengths); err != nil {
		return err
	}
	if opts.ContextLengths, err = pick("context-lengths", o.ContextLengths); err != nil {
		return err
	}
	opts.MaxContext = limit
	return nil
}

// benchMaxContext is --max-context when given, else the model's positions.
func benchMaxContext(flag, positions int) int {
	if flag > 0 {
		return flag
	}
	return positions
}

// syntheticModel checks that the named shape fits in memory, then builds it.
func syntheticModel(o benchOptions, progress func(string), opts bench.Options) (*model.Model, error) {
	be, err := newBackendOn(o.Backend, o.Device, progress)
	if err != nil {
		return nil, err
	}
	if o.Chunk == 0 {
		o.Chunk = backend.DefaultChunk(be)
	}
	d, err := model.NamedDims(o.Synthetic)
	if err != nil {
		return nil, usageErr("--synthetic: %v", err)
	}
	longest := slices.Max(append(slices.Clone(opts.PromptLengths), opts.ContextLengths...))
	weights := model.SyntheticWeightBytes(d)
	need := bench.EstimateNeed(&d, weights, o.Chunk, longest, opts)
	// The CPU backend keeps weights in host memory; other backends will
	// bring their own check of device memory.
	if be.Name() == "cpu" {
		err := bench.CheckMemory("synthetic "+o.Synthetic, need, bench.HostMemory)
		var me *bench.MemoryError
		switch {
		case errors.As(err, &me) && o.Force:
			progress(fmt.Sprintf("warning: %v; trying anyway (--force)", err))
		case err != nil:
			return nil, fmt.Errorf("%w (--force tries anyway; a smaller --max-context or --lengths needs less)", err)
		}
	}
	progress(fmt.Sprintf("building synthetic %s: %.2f GB of random weights", o.Synthetic, float64(weights)/1e9))
	return model.Synthetic(d, be, o.Chunk, o.Seed)
}

func writeBenchReport(stdout io.Writer, r *bench.Report, o benchOptions) error {
	if o.JSON {
		if err := writeBenchJSON(stdout, r); err != nil {
			return err
		}
	} else {
		if err := bench.WriteTable(stdout, r); err != nil {
			return err
		}
		if err := bench.WriteProfiles(stdout, r); err != nil {
			return err
		}
		if err := bench.WriteAblation(stdout, r); err != nil {
			return err
		}
	}
	if o.Out != "" {
		if err := writeBenchFile(o.Out, func(w io.Writer) error { return writeBenchJSON(w, r) }); err != nil {
			return err
		}
	}
	if o.Chart != "" && len(r.Results) > 0 {
		if err := writeBenchFile(o.Chart, func(w io.Writer) error { return bench.WriteSVG(w, r) }); err != nil {
			return err
		}
	}
	return nil
}

func writeBenchJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeBenchFile creates path and fills it with write.
func writeBenchFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
