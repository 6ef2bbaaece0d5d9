package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"petal/engine/model"
	"petal/engine/model/synthwrite"
)

// sweepOnlyFlags mean nothing to --write-model, which measures nothing.
var sweepOnlyFlags = []string{"model", "backend", "device", "chunk", "max-context", "lengths", "prompt-lengths", "context-lengths",
	"decode-tokens", "repeats", "prefill-context", "profile", "floors", "ablate", "ablate-lengths", "json", "out", "chart"}

// checkWriteModelFlags refuses --write-model without a shape, or with a
// flag of the sweep it does not run.
func checkWriteModelFlags(c *cli.Context) error {
	if c.String("synthetic") == "" {
		return usageErr("--write-model needs --synthetic NAME, the shape to write (%s)", strings.Join(model.SyntheticNames(), ", "))
	}
	for _, f := range sweepOnlyFlags {
		if c.IsSet(f) {
			return usageErr("--write-model writes the model folder and measures nothing, so --%s has no effect with it; measure the folder afterwards with petal bench --model DIR", f)
		}
	}
	return nil
}

// writeSyntheticModel writes the --synthetic shape of --seed as a model
// folder, with a progress bar on a terminal and a line per shard file
// otherwise.
func writeSyntheticModel(ctx context.Context, st *Streams, o benchOptions, dir string) error {
	cfg, err := model.NamedConfig(o.Synthetic)
	if err != nil {
		return usageErr("--synthetic: %v", err)
	}
	d, err := model.NewDims(&cfg)
	if err != nil {
		return err
	}
	total := model.SyntheticWeightBytes(d)
	start := time.Now()
	var bar *progressbar.ProgressBar
	begin := func() { // once the folder is accepted and the first tensor written
		if o.Quiet {
			return
		}
		fmt.Fprintf(st.Err, "writing synthetic %s (seed %d) to %s: %.2f GB of random weights\n", o.Synthetic, o.Seed, dir, float64(total)/1e9)
		if st.ErrIsTerminal {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(st.Err), progressbar.OptionSetDescription("weights"),
				progressbar.OptionShowBytes(true), progressbar.OptionSetPredictTime(true),
				progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
		}
	}
	file, fileStart := "", start
	var last synthwrite.Progress
	done := func() { // the line for the shard just completed
		if bar == nil && !o.Quiet && file != "" {
			fmt.Fprintf(st.Err, "wrote %s: %.2f of %.2f GB, %.1f s\n", file, float64(last.Written)/1e9, float64(last.Total)/1e9, time.Since(fileStart).Seconds())
		}
	}
	err = synthwrite.Write(ctx, dir, cfg, synthwrite.Options{Shape: o.Synthetic, Seed: o.Seed, Force: o.Force,
		Progress: func(p synthwrite.Progress) {
			if file == "" {
				begin()
			}
			if p.File != file {
				done()
				file, fileStart = p.File, time.Now()
			}
			last = p
			if bar != nil {
				bar.Set64(p.Written)
			}
		}})
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{ExitInterrupted, fmt.Errorf("interrupted: nothing was written to %s", dir)}
		}
		return err
	}
	done()
	if !o.Quiet {
		fmt.Fprintf(st.Err, "wrote %s in %.1f s; measure its load with: petal bench --model %s\n", dir, time.Since(start).Seconds(), dir)
	}
	return nil
}
