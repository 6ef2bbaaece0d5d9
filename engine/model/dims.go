// Package model defines the Qwen3.5/3.6 hybrid mixture-of-experts model once:
// its sizes, its weights bound strictly by name, its per-sequence state, and a
// forward pass that records backend ops and reads top to bottom like the
// paper. Nothing here knows which machine runs the ops.
package model

import (
	"fmt"
	"maps"
	"slices"

	"petal/engine/checkpoint"
)

// Dims are the sizes the forward pass needs, derived once from config.json.
// Nothing about head counts, expert counts or RoPE is assumed beyond it.
type Dims struct {
	Hidden, Vocab, Layers int
	Full                  []bool // per layer: gated full attention (else Gated DeltaNet)

	// gated attention
	QHeads, KVHeads, HeadDim, RotaryDim int
	RopeTheta                           float64

	// Gated DeltaNet
	KeyHeads, KeyDim, ValueHeads, ValueDim, ConvK int

	// mixture of experts
	Experts, TopK, Inter, SharedInter int
	NormTopK                          bool

	Eps float32
}

// ConvChannels is the width of in_proj_qkv: q and k for every key head, v for
// every value head.
func (d *Dims) ConvChannels() int { return 2*d.KeyHeads*d.KeyDim + d.ValueHeads*d.ValueDim }

// ValueWidth is the width of the DeltaNet output (and of in_proj_z).
func (d *Dims) ValueWidth() int { return d.ValueHeads * d.ValueDim }

// NewDims derives and checks the model sizes from a text config.
func NewDims(c *checkpoint.Config) (Dims, error) {
	d := Dims{
		Hidden: c.HiddenSize, Vocab: c.VocabSize, Layers: c.NumHiddenLayers,
		QHeads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
		RotaryDim: c.RotaryDim(), RopeTheta: c.RopeTheta,
		KeyHeads: c.LinearNumKeyHeads, KeyDim: c.LinearKeyHeadDim,
		ValueHeads: c.LinearNumValueHeads, ValueDim: c.LinearValueHeadDim, ConvK: c.LinearConvKernelDim,
		Experts: c.NumExperts, TopK: c.NumExpertsPerTok, Inter: c.MoeIntermediateSize,
		SharedInter: c.SharedExpertIntermediateSize, NormTopK: c.NormTopKProb,
		Eps: float32(c.RMSNormEps),
	}
	positive := map[string]int{
		"hidden_size": d.Hidden, "vocab_size": d.Vocab, "num_hidden_layers": d.Layers,
		"num_attention_heads": d.QHeads, "num_key_value_heads": d.KVHeads, "head_dim": d.HeadDim,
		"linear_num_key_heads": d.KeyHeads, "linear_key_head_dim": d.KeyDim,
		"linear_num_value_heads": d.ValueHeads, "linear_value_head_dim": d.ValueDim,
		"linear_conv_kernel_dim": d.ConvK, "num_experts": d.Experts, "num_experts_per_tok": d.TopK,
		"moe_intermediate_size": d.Inter, "shared_expert_intermediate_size": d.SharedInter,
	}
	for _, name := range slices.Sorted(maps.Keys(positive)) {
		// bounded before anything is sized from them (a config built in code is not parsed)
		switch v, lim := positive[name], checkpoint.SizeLimit(name); {
		case v <= 0:
			return d, fmt.Errorf("model: config field %s is %d, want > 0", name, v)
		case lim > 0 && v > lim:
			return d, fmt.Errorf("model: config field %s is %d, over the limit of %d", name, v, lim)
		}
	}
	if len(c.LayerTypes) != d.Layers {
		return d, fmt.Errorf("model: config has %d layer_types for %d layers", len(c.LayerTypes), d.Layers)
	}
	for i, t := range c.LayerTypes {
		switch t {
		case "full_attention":
			d.Full = append(d.Full, true)
		case "linear_attention":
			d.Full = append(d.Full, false)
		default:
			return d, fmt.Errorf("model: layer %d has unknown layer type %q", i, t)
		}
	}
	switch {
	case d.QHeads%d.KVHeads != 0:
		return d, fmt.Errorf("model: %d attention heads do not share %d key/value heads evenly", d.QHeads, d.KVHeads)
	case d.ValueHeads%d.KeyHeads != 0:
		return d, fmt.Errorf("model: %d linear value heads do not share %d key heads evenly", d.ValueHeads, d.KeyHeads)
	case d.RotaryDim <= 0 || d.RotaryDim > d.HeadDim || d.RotaryDim%2 != 0:
		return d, fmt.Errorf("model: rotary dimension %d does not fit head_dim %d", d.RotaryDim, d.HeadDim)
	case d.TopK > d.Experts:
		return d, fmt.Errorf("model: num_experts_per_tok %d exceeds num_experts %d", d.TopK, d.Experts)
	case !c.AttnOutputGate:
		return d, fmt.Errorf("model: attn_output_gate false is not this model family")
	}
	return d, nil
}
