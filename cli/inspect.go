package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"petal/engine/checkpoint"
	"petal/engine/model"
)

type inspectOptions struct {
	Model   string
	Context int
	JSON    bool
}

func inspectCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "describe a model folder: configuration, parameters, storage, memory needed",
		ArgsUsage: " ",
		Description: `Reads config.json and the safetensors headers (no weights are read) and prints the model's
shape, parameter count, bytes per dtype and bit width, ignored tensors (vision tower, MTP head),
and the memory a sequence of --context tokens needs on the CPU backend.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model folder or Hugging Face repo id (default: $PETAL_MODEL, else the embedded tiny model)"},
			&cli.IntFlag{Name: "context", Value: 32768, Usage: "context length for the memory estimate"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr("inspect takes no arguments (got %q); use --model", c.Args().First())
			}
			return runInspect(st, inspectOptions{Model: c.String("model"), Context: c.Int("context"), JSON: c.Bool("json")})
		},
	}
}

// memoryEstimate is what a model needs at a context length (float32 state).
type memoryEstimate struct {
	WeightsBytes   int64 `json:"weights_bytes"`
	KVCacheBytes   int64 `json:"kv_cache_bytes"`
	RecurrentBytes int64 `json:"recurrent_state_bytes"`
	TotalBytes     int64 `json:"total_bytes"`
	Context        int   `json:"context"`
}

func estimateMemory(d *model.Dims, weights int64, context int) memoryEstimate {
	e := memoryEstimate{WeightsBytes: weights, Context: context}
	for _, full := range d.Full {
		if full {
			e.KVCacheBytes += int64(context) * int64(2*d.KVHeads*d.HeadDim) * 4
		} else {
			e.RecurrentBytes += int64(d.ValueHeads*d.ValueDim*d.KeyDim+(d.ConvK-1)*d.ConvChannels()) * 4
		}
	}
	e.TotalBytes = e.WeightsBytes + e.KVCacheBytes + e.RecurrentBytes
	return e
}

func runInspect(st *Streams, o inspectOptions) error {
	dir, name, err := resolveModel(o.Model, st.Getenv)
	if err != nil {
		return usageErr("%v", err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	d, err := model.NewDims(&ck.Config)
	if err != nil {
		return err
	}
	stats := ck.Stats()
	var total int64
	for _, b := range stats.BytesByDType {
		total += b
	}
	mem := estimateMemory(&d, total, o.Context)
	if o.JSON {
		ignored := ck.Ignored()
		if ignored == nil {
			ignored = []string{}
		}
		out := map[string]any{
			"model": name, "dir": dir, "config": configJSON(&ck.Config), "parameters": stats.Params,
			"bytes_by_dtype": stats.BytesByDType, "quantized_bytes_by_bits": stats.QuantBytesByBits,
			"tensors": stats.Tensors, "ignored_tensors": ignored, "memory": mem,
		}
		enc := json.NewEncoder(st.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	c := &ck.Config
	full := 0
	for _, f := range d.Full {
		if f {
			full++
		}
	}
	w := st.Out
	fmt.Fprintf(w, "model         %s\n", name)
	fmt.Fprintf(w, "folder        %s\n", dir)
	fmt.Fprintf(w, "type          %s\n", c.ModelType)
	fmt.Fprintf(w, "layers        %d: %d Gated DeltaNet, %d gated full attention\n", d.Layers, d.Layers-full, full)
	fmt.Fprintf(w, "hidden        %d, vocabulary %d (embeddings %s)\n", d.Hidden, d.Vocab, tiedWord(c.TieWordEmbeddings))
	fmt.Fprintf(w, "attention     %d query heads on %d KV heads of dim %d, RoPE on %d dims, theta %g\n", d.QHeads, d.KVHeads, d.HeadDim, d.RotaryDim, d.RopeTheta)
	fmt.Fprintf(w, "deltanet      %d key heads x %d, %d value heads x %d, conv kernel %d\n", d.KeyHeads, d.KeyDim, d.ValueHeads, d.ValueDim, d.ConvK)
	fmt.Fprintf(w, "experts       %d routed (top %d, intermediate %d) + shared (intermediate %d)\n", d.Experts, d.TopK, d.Inter, d.SharedInter)
	fmt.Fprintf(w, "context       %d positions (max_position_embeddings)\n", c.MaxPositionEmbeddings)
	fmt.Fprintf(w, "parameters    %s (%d)\n", human(float64(stats.Params), ""), stats.Params)
	fmt.Fprintf(w, "tensors       %d bound, %d ignored\n", stats.Tensors, stats.IgnoredTensors)
	fmt.Fprintf(w, "storage       %s\n", bytesLine(stats.BytesByDType))
	var bits []int
	for b := range stats.QuantBytesByBits {
		bits = append(bits, b)
	}
	sort.Ints(bits)
	for _, b := range bits {
		fmt.Fprintf(w, "  %d-bit       %s\n", b, humanBytes(stats.QuantBytesByBits[b]))
	}
	if ign := ck.Ignored(); len(ign) > 0 {
		fmt.Fprintf(w, "ignored       %s\n", summarizeIgnored(ign))
	}
	fmt.Fprintf(w, "memory at %d tokens (cpu, float32 state): weights %s (memory-mapped) + KV cache %s + recurrent state %s = %s\n",
		o.Context, humanBytes(mem.WeightsBytes), humanBytes(mem.KVCacheBytes), humanBytes(mem.RecurrentBytes), humanBytes(mem.TotalBytes))
	return nil
}

// configJSON is the configuration under config.json's own key names, as
// everything else petal prints in JSON is snake_case.
func configJSON(c *checkpoint.Config) map[string]any {
	eos := c.EOSTokenIDs
	if eos == nil {
		eos = []int{}
	}
	return map[string]any{
		"model_type": c.ModelType, "hidden_size": c.HiddenSize, "num_hidden_layers": c.NumHiddenLayers,
		"vocab_size": c.VocabSize, "layer_types": c.LayerTypes,
		"num_attention_heads": c.NumAttentionHeads, "num_key_value_heads": c.NumKeyValueHeads,
		"head_dim": c.HeadDim, "attn_output_gate": c.AttnOutputGate,
		"linear_num_key_heads": c.LinearNumKeyHeads, "linear_num_value_heads": c.LinearNumValueHeads,
		"linear_key_head_dim": c.LinearKeyHeadDim, "linear_value_head_dim": c.LinearValueHeadDim,
		"linear_conv_kernel_dim": c.LinearConvKernelDim,
		"num_experts":            c.NumExperts, "num_experts_per_tok": c.NumExpertsPerTok,
		"moe_intermediate_size": c.MoeIntermediateSize, "shared_expert_intermediate_size": c.SharedExpertIntermediateSize,
		"norm_topk_prob": c.NormTopKProb, "rms_norm_eps": c.RMSNormEps,
		"rope_theta": c.RopeTheta, "partial_rotary_factor": c.PartialRotaryFactor, "rope_type": c.RopeType,
		"max_position_embeddings": c.MaxPositionEmbeddings, "tie_word_embeddings": c.TieWordEmbeddings,
		"bos_token_id": c.BOSTokenID, "eos_token_ids": eos,
	}
}

func tiedWord(tied bool) string {
	if tied {
		return "tied to the output head"
	}
	return "separate from the output head"
}

func bytesLine(m map[checkpoint.DType]int64) string {
	var keys []string
	for k := range m {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var parts []string
	var total int64
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, humanBytes(m[checkpoint.DType(k)])))
		total += m[checkpoint.DType(k)]
	}
	return fmt.Sprintf("%s (%s)", humanBytes(total), strings.Join(parts, ", "))
}

// summarizeIgnored groups ignored tensor names by their first component.
func summarizeIgnored(names []string) string {
	count := map[string]int{}
	for _, n := range names {
		count[strings.SplitN(n, ".", 2)[0]]++
	}
	var parts []string
	for k, n := range count {
		parts = append(parts, fmt.Sprintf("%s.* (%d)", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func humanBytes(b int64) string {
	return human(float64(b), "B")
}

func human(v float64, unit string) string {
	for _, p := range []struct {
		s string
		f float64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"K", 1e3}} {
		if v >= p.f {
			return fmt.Sprintf("%.2f %s%s", v/p.f, p.s, unit)
		}
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}
