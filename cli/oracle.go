package cli

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/metal"
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
and NLL (and, with --bars bfloat16, the worst per-position rel-L2 and the mean KL). Exit code 1
when a bar is missed: --bars float32 holds a backend to the bars of a float32 engine
(logits rel-L2 <= 1e-4, max |Δ| <= 2e-3, the same argmax wherever the reference margin is >= 1e-3,
NLL within 1e-4), --bars bfloat16 to those of a bfloat16 engine (rel-L2 <= 3e-2, per position
<= 0.1, top-1 agreement >= 97 % and the same argmax wherever the margin is >= 0.25, mean KL <=
2e-3, NLL within 0.01), for backends that run bf16 on purpose. The default, --bars auto, takes the
bars the backend is built for: bfloat16 for cuda with any of gemm=wg or tc, attn=flash, delta=tf32 or chunked or
kv=bf16 (its defaults among them) and for cpu:kv=bf16, float32 otherwise. The bars are those of
../shared/oracle/README.md.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "oracle", Value: "../shared/oracle", Usage: "oracle folder (reference model and data)"},
			&cli.StringFlag{Name: "backend", Value: "cpu", Usage: "backend to check (cpu unless named: the check is of one backend, not of whatever auto finds): " + backendUsage},
			&cli.IntFlag{Name: "chunk", Value: 64, Usage: "prefill chunk size"},
			&cli.Float64Flag{Name: "bar", Usage: "relative L2 error allowed per stage and for logits (default 1e-4, 3e-2 with --bars bfloat16)"},
			&cli.StringFlag{Name: "bars", Value: "auto", Usage: "the bars to hold the backend to: float32, bfloat16, or auto (those the backend is built for)"},
		},
		Action: func(c *cli.Context) error {
			name := c.String("bars")
			if name == "auto" {
				name = barsFor(c.String("backend"))
			}
			b, err := oracleBars(name)
			if err != nil {
				return err
			}
			if c.IsSet("bar") {
				b.relL2 = c.Float64("bar")
			}
			return runOracle(st, c.String("oracle"), c.String("backend"), c.Int("chunk"), b)
		},
	}
}

// bars are the agreement with the reference a backend must reach
// (../shared/oracle/README.md, "Suggested acceptance bars").
type bars struct {
	name        string
	relL2       float64 // per sequence, and per stage of the hidden states
	maxAbs      float64 // max |Δlogit| (float32 only; 0: not checked)
	posRelL2    float64 // per position (bfloat16 only; 0: not checked)
	margin      float32 // the argmax must agree wherever the reference margin is at least this
	top1        float64 // share of positions whose argmax agrees (0: not checked)
	meanKL      float64 // mean KL(reference || backend) over positions (0: not checked)
	nll         float64 // |NLL - reference NLL|
	showKLAndPP bool    // print the per-position and KL columns
}

// barsFor names the bars a backend spec is built for: bfloat16 where it
// rounds to bf16 on purpose (cuda's tensor-core prefill, flash attention,
// chunked delta rule, a bf16 KV cache), float32 otherwise. A spec that
// does not parse gets float32; opening the backend reports the error.
func barsFor(spec string) string {
	sp, err := backend.ParseSpec(spec)
	if err != nil {
		return "float32"
	}
	switch sp.Name {
	case "cuda":
		if o, err := cuda.ParseOptions(sp.Options); err == nil && (o.TensorCores || o.FlashAttention || o.ChunkedDelta || o.KV == backend.BF16) {
			return "bfloat16"
		}
	case "cpu":
		if o, err := cpu.ParseOptions(sp.Options); err == nil && o.KV == backend.BF16 {
			return "bfloat16"
		}
	case "metal":
		if o, err := metal.ParseOptions(sp.Options); err == nil && o.KV == backend.BF16 {
			return "bfloat16"
		}
	}
	return "float32"
}

func oracleBars(name string) (bars, error) {
	switch name {
	case "float32", "f32":
		return bars{name: "float32", relL2: 1e-4, maxAbs: 2e-3, margin: 1e-3, nll: 1e-4}, nil
	case "bfloat16", "bf16":
		return bars{name: "bfloat16", relL2: 3e-2, posRelL2: 0.1, margin: 0.25, top1: 0.97, meanKL: 2e-3, nll: 0.01, showKLAndPP: true}, nil
	}
	return bars{}, usageErr("--bars %q: want float32, bfloat16 or auto", name)
}

func runOracle(st *Streams, dir, backendName string, chunk int, b bars) error {
	bar := b.relL2
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
	fmt.Fprintf(st.Out, "\n%-6s %10s %10s %8s %12s %12s", "seq", "rel-L2", "max|Δ|", "argmax", "NLL", "reference")
	if b.showKLAndPP {
		fmt.Fprintf(st.Out, " %12s %10s", "max pos-L2", "mean KL")
	}
	fmt.Fprintln(st.Out)
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
		var worstPos, kl float64
		for p := range ids {
			g, w := got[p*V:(p+1)*V], want[p*V:(p+1)*V]
			if sample.Argmax(g) == sample.Argmax(w) {
				agree++
			} else if oracle.Margin(w) >= b.margin {
				strict++
			}
			worstPos = math.Max(worstPos, oracle.Compare(g, w).RelL2)
			kl += oracle.KL(w, g)
		}
		kl /= float64(len(ids))
		n := sum / float64(len(ids)-1)
		share := float64(agree) / float64(len(ids))
		fmt.Fprintf(st.Out, "%-6s %10.3g %10.3g %7.1f%% %12.6f %12.6f", name, d.RelL2, d.MaxAbs, 100*share, n, nll[i])
		if b.showKLAndPP {
			fmt.Fprintf(st.Out, " %12.3g %10.3g", worstPos, kl)
		}
		fmt.Fprintln(st.Out)
		if d.RelL2 > b.relL2 || (b.maxAbs > 0 && d.MaxAbs > b.maxAbs) || strict > 0 || math.Abs(n-float64(nll[i])) > b.nll ||
			(b.posRelL2 > 0 && worstPos > b.posRelL2) || share < b.top1 || (b.meanKL > 0 && kl > b.meanKL) {
			failed = true
		}
	}
	if failed {
		return &exitError{ExitJobsFailed, fmt.Errorf("the %s backend misses the %s bars", be.Name(), b.name)}
	}
	fmt.Fprintf(st.Out, "\nthe %s backend meets the %s bars\n", be.Name(), b.name)
	return nil
}
