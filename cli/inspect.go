package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
	"petal/engine/model"
)

type inspectOptions struct {
	Model   string
	Context int
	Chunk   int
	KV      string
	Device  int
	JSON    bool
}

func inspectCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "describe a model folder: configuration, parameters, storage, memory needed",
		ArgsUsage: " ",
		Description: `Reads config.json and the safetensors headers (no weights are read) and prints the model's
shape, parameter count, bytes per dtype and bit width, ignored tensors (vision tower, MTP head),
the memory a sequence of --context tokens needs on the CPU backend, and the device memory it needs
on the CUDA backend by part (weights as uploaded, the KV cache in --kv's type, recurrent state,
the workspace of a --chunk prefill chunk, a margin); where an NVIDIA GPU is present (--device),
its free and total memory, whether the model fits, and the longest context that does.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model folder or Hugging Face repo id (default: $PETAL_MODEL, else the embedded tiny model)"},
			&cli.IntFlag{Name: "context", Value: 32768, Usage: "context length for the memory estimate"},
			&cli.IntFlag{Name: "chunk", Value: cuda.PrefillChunkTokens, Usage: "prefill chunk size for the workspace estimate (the cuda backend's default)"},
			&cli.StringFlag{Name: "kv", Value: "f32", Usage: "element type of the KV cache for the device estimate: f32 or bf16 (as --backend cuda:kv=)"},
			&cli.IntFlag{Name: "device", Usage: "the NVIDIA GPU to compare with, from 0"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr("inspect takes no arguments (got %q); use --model", c.Args().First())
			}
			return runInspect(st, inspectOptions{Model: c.String("model"), Context: c.Int("context"), Chunk: c.Int("chunk"),
				KV: c.String("kv"), Device: c.Int("device"), JSON: c.Bool("json")})
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

// deviceEstimate is the device memory a model needs on the CUDA backend,
// by part (deviceNeed), and the GPU compared with where there is one.
type deviceEstimate struct {
	WeightsBytes    int64      `json:"weights_bytes"`
	KVCacheBytes    int64      `json:"kv_cache_bytes"`
	KVType          string     `json:"kv_type"`
	KVBytesPerToken int64      `json:"kv_bytes_per_token"`
	KVCopyBytes     int64      `json:"kv_copy_bytes"` // the f32 cache's bf16 shadow (kv_shadow), else prefill's bf16 copy of one layer's K and V
	KVShadow        bool       `json:"kv_shadow"`     // kvshadow=on, the default: every layer's f32 K and V with a bf16 copy beside it
	RecurrentBytes  int64      `json:"recurrent_state_bytes"`
	WorkspaceBytes  int64      `json:"workspace_bytes"`
	MarginBytes     int64      `json:"margin_bytes"`
	TotalBytes      int64      `json:"total_bytes"`
	Context         int        `json:"context"`
	Chunk           int        `json:"chunk"`
	GPU             *gpuMemory `json:"gpu"` // null where no GPU can be opened
}

type gpuMemory struct {
	Ordinal    int    `json:"ordinal"`
	Name       string `json:"name"`
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	Fits       bool   `json:"fits"`
	MaxContext int    `json:"max_context"` // the longest context that fits beside the rest
}

// gpuMemInfo opens GPU ordinal and reads its free and total memory (after
// the context's own share); a variable so tests can stand in for a GPU.
var gpuMemInfo = func(ordinal int) (driver.Device, int64, int64, error) {
	c, err := driver.Open(ordinal)
	if err != nil {
		return driver.Device{}, 0, 0, err
	}
	defer c.Close()
	free, total, err := c.MemInfo()
	return c.Device(), free, total, err
}

func runInspect(st *Streams, o inspectOptions) error {
	kv, err := backend.ParseDType(o.KV)
	if err != nil || kv != backend.F32 && kv != backend.BF16 {
		return usageErr("--kv %q: the KV cache is f32 or bf16", o.KV)
	}
	if o.Context < 1 || o.Chunk < 1 {
		return usageErr("--context %d, --chunk %d: want at least 1", o.Context, o.Chunk)
	}
	if o.Device < 0 {
		return usageErr("--device %d: want a GPU number from 0", o.Device)
	}
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
	chunk := min(o.Chunk, o.Context)                                // a pass holds at most the context (engine.Open)
	shadowed := kv == backend.F32 && cuda.DefaultOptions().KVShadow // the backend's default
	need := deviceNeed(ck, &d, chunk, o.Context, kv, shadowed)
	dev := deviceEstimate{WeightsBytes: need.Weights, KVCacheBytes: need.KVCache, KVType: kv.String(), KVBytesPerToken: need.KVPerToken,
		KVCopyBytes: need.KVCopyBytes(), KVShadow: shadowed, RecurrentBytes: need.State, WorkspaceBytes: need.Workspace, MarginBytes: need.Margin(), TotalBytes: need.Total(),
		Context: o.Context, Chunk: chunk}
	gpuErr := error(nil)
	if g, free, totalMem, err := gpuMemInfo(o.Device); err == nil {
		dev.GPU = &gpuMemory{Ordinal: g.Ordinal, Name: g.Name, FreeBytes: free, TotalBytes: totalMem,
			Fits: need.Total() <= free, MaxContext: need.FittingContext(free)}
	} else {
		gpuErr = err
	}
	if o.JSON {
		ignored := ck.Ignored()
		if ignored == nil {
			ignored = []string{}
		}
		out := map[string]any{
			"model": name, "dir": dir, "config": configJSON(&ck.Config), "parameters": stats.Params,
			"bytes_by_dtype": stats.BytesByDType, "quantized_bytes_by_bits": stats.QuantBytesByBits,
			"tensors": stats.Tensors, "ignored_tensors": ignored, "memory": mem,
			"device_memory": dev,
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
	kvCopy := ""
	switch {
	case shadowed:
		kvCopy = fmt.Sprintf(" + its bf16 shadow %s", gib(need.KVCopyBytes()))
	case need.KVCopy > 0:
		kvCopy = fmt.Sprintf(" + its bf16 copy for prefill %s", gib(need.KVCopyBytes()))
	}
	fmt.Fprintf(w, "device memory at %d tokens (cuda, kv=%s, chunk %d): weights %s + KV cache %s%s + recurrent state %s + workspace %s + margin %s = %s\n",
		o.Context, kv, chunk, gib(need.Weights), gib(need.KVCache), kvCopy, gib(need.State), gib(need.Workspace), gib(need.Margin()), gib(need.Total()))
	switch g := dev.GPU; {
	case g == nil && driver.Unavailable(gpuErr):
		fmt.Fprintf(w, "GPU           none here to compare with\n")
	case g == nil:
		fmt.Fprintf(w, "GPU %d         cannot be opened: %v\n", o.Device, gpuErr)
	default:
		verdict := "fits"
		if !g.Fits {
			verdict = "does NOT fit"
		}
		fmt.Fprintf(w, "GPU %d         %s: %s free of %s: %s (at most %d tokens of context fit)\n",
			g.Ordinal, g.Name, gib(g.FreeBytes), gib(g.TotalBytes), verdict, g.MaxContext)
	}
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
