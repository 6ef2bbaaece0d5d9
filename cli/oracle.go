package cli

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/model"
	"petal/engine/oracle"
	"petal/engine/sample"
)

func oracleCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:  "oracle",
		Usage: "compare a backend with the reference data, stage by stage, naming the first divergence",
		Description: `Loads the reference model of an oracle folder (DIR/tiny-qwen36-moe-4bit) on --backend, runs the
reference sequences of DIR/reference teacher-forced, and prints for the first sequence the error of
the hidden states after every stage (embeddings, each layer, final norm) with the first stage that
exceeds --bar, then for every sequence the logits' relative L2 error, max |Δ|, argmax agreement
and NLL. Exit code 1 when a bar of the float32 engine is missed.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "oracle", Value: "../shared/oracle", Usage: "oracle folder (reference model and data)"},
			&cli.StringFlag{Name: "backend", Value: "cpu", Usage: "backend to check (cpu unless named: the check is of one backend, not of whatever auto finds): " + backendUsage},
			&cli.IntFlag{Name: "chunk", Value: 64, Usage: "prefill chunk size"},
			&cli.Float64Flag{Name: "bar", Value: 1e-4, Usage: "relative L2 error allowed per stage and for logits"},
		},
		Action: func(c *cli.Context) error {
			return runOracle(st, c.String("oracle"), c.String("backend"), c.Int("chunk"), c.Float64("bar"))
		},
	}
}

func runOracle(st *Streams, dir, backendName string, chunk int, bar float64) error {
	be, err := newBackend(backendName, func(msg string) { fmt.Fprintln(st.Err, "petal:", msg) })
	if err != nil {
		return err
	}
	e, err := engine.Open(filepath.Join(dir, "tiny-qwen36-moe-4bit"), engine.Options{Backend: be, Chunk: chunk})
	if err != nil {
		return usageErr("%v", err)
	}
	defer e.Close()
	ref, err := oracle.Open(filepath.Join(dir, "reference"))
	if err != nil {
		return usageErr("%v", err)
	}
	defer ref.Close()
	m := e.Model
	failed := false

	// hidden states of seq0, stage by stage
	ids, err := ref.Ints("seq0.input_ids")
	if err != nil {
		return err
	}
	stages := make([][]float32, m.Dims.Layers+2)
	m.Trace = func(stage, _ int, h []float32) { stages[stage] = append(stages[stage], h...) }
	err = m.Forward(m.NewState(len(ids)+1), ids, model.NoLogits, nil)
	m.Trace = nil
	if err != nil {
		return err
	}
	rep, err := ref.CompareLayers("seq0.hidden_states", stages, bar)
	if err != nil {
		return err
	}
	fmt.Fprintf(st.Out, "hidden states of seq0 on %s:\n", be.Name())
	rep.Write(st.Out)
	failed = rep.FirstOver >= 0

	// logits of every sequence
	nll, _, err := ref.Floats("nll")
	if err != nil {
		return err
	}
	fmt.Fprintf(st.Out, "\n%-6s %10s %10s %8s %12s %12s\n", "seq", "rel-L2", "max|Δ|", "argmax", "NLL", "reference")
	V := m.Dims.Vocab
	lp := make([]float64, V)
	for i, name := range oracle.Sequences {
		ids, err := ref.Ints(name + ".input_ids")
		if err != nil {
			return err
		}
		want, _, err := ref.Floats(name + ".logits")
		if err != nil {
			return err
		}
		got := make([]float32, 0, len(want))
		var sum float64
		err = m.Forward(m.NewState(len(ids)+1), ids, model.AllLogits, func(pos int, l []float32) {
			got = append(got, l...)
			if pos+1 < len(ids) {
				sample.LogSoftmax(l, lp)
				sum -= lp[ids[pos+1]]
			}
		})
		if err != nil {
			return err
		}
		d := oracle.Compare(got, want)
		agree, strict := 0, 0
		for p := range ids {
			g, w := got[p*V:(p+1)*V], want[p*V:(p+1)*V]
			if sample.Argmax(g) == sample.Argmax(w) {
				agree++
			} else if topMargin(w) >= 1e-3 {
				strict++
			}
		}
		n := sum / float64(len(ids)-1)
		fmt.Fprintf(st.Out, "%-6s %10.3g %10.3g %7.1f%% %12.6f %12.6f\n", name, d.RelL2, d.MaxAbs, 100*float64(agree)/float64(len(ids)), n, nll[i])
		if d.RelL2 > bar || d.MaxAbs > 2e-3 || strict > 0 || math.Abs(n-float64(nll[i])) > 1e-4 {
			failed = true
		}
	}
	if failed {
		return &exitError{ExitJobsFailed, fmt.Errorf("the %s backend misses the float32 bars", be.Name())}
	}
	fmt.Fprintf(st.Out, "\nthe %s backend meets the float32 bars\n", be.Name())
	return nil
}

func topMargin(x []float32) float32 {
	a := sample.Argmax(x)
	second := float32(math.Inf(-1))
	for i, v := range x {
		if int32(i) != a && v > second {
			second = v
		}
	}
	return x[a] - second
}
