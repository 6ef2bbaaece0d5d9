package synthwrite

import (
	"encoding/json"
	"fmt"
	"sort"

	"petal/engine/checkpoint"
	"petal/engine/model"
)

// textConfig is config.json's text_config as the Qwen3.5/3.6 MoE
// releases spell it, in their order.
type textConfig struct {
	ModelType                    string         `json:"model_type"`
	HiddenSize                   int            `json:"hidden_size"`
	NumHiddenLayers              int            `json:"num_hidden_layers"`
	VocabSize                    int            `json:"vocab_size"`
	LayerTypes                   []string       `json:"layer_types"`
	FullAttentionInterval        int            `json:"full_attention_interval,omitempty"`
	NumAttentionHeads            int            `json:"num_attention_heads"`
	NumKeyValueHeads             int            `json:"num_key_value_heads"`
	HeadDim                      int            `json:"head_dim"`
	AttnOutputGate               bool           `json:"attn_output_gate"`
	LinearNumKeyHeads            int            `json:"linear_num_key_heads"`
	LinearNumValueHeads          int            `json:"linear_num_value_heads"`
	LinearKeyHeadDim             int            `json:"linear_key_head_dim"`
	LinearValueHeadDim           int            `json:"linear_value_head_dim"`
	LinearConvKernelDim          int            `json:"linear_conv_kernel_dim"`
	NumExperts                   int            `json:"num_experts"`
	NumExpertsPerTok             int            `json:"num_experts_per_tok"`
	MoeIntermediateSize          int            `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize int            `json:"shared_expert_intermediate_size"`
	MLPOnlyLayers                []int          `json:"mlp_only_layers"`
	NormTopKProb                 bool           `json:"norm_topk_prob"`
	HiddenAct                    string         `json:"hidden_act"`
	RMSNormEps                   float64        `json:"rms_norm_eps"`
	RopeParameters               ropeParameters `json:"rope_parameters"`
	MaxPositionEmbeddings        int            `json:"max_position_embeddings"`
	TieWordEmbeddings            bool           `json:"tie_word_embeddings"`
	DType                        string         `json:"dtype"`
	BOSTokenID                   *int           `json:"bos_token_id,omitempty"`
	EOSTokenID                   []int          `json:"eos_token_id,omitempty"`
}

type ropeParameters struct {
	RopeType            string  `json:"rope_type"`
	RopeTheta           float64 `json:"rope_theta"`
	PartialRotaryFactor float64 `json:"partial_rotary_factor"`
}

// configJSON is config.json: the multimodal release's wrapper around the
// text config, the quantization block (group 64, 4 bits, and an override
// for every module of another width: the 8-bit routers and shared-expert
// gates) under both the names mlx-lm writes, and the marker of a
// synthetic folder.
func configJSON(c checkpoint.Config, l *model.SyntheticLayout, opt Options) ([]byte, error) {
	text := textConfig{
		ModelType: c.ModelType, HiddenSize: c.HiddenSize, NumHiddenLayers: c.NumHiddenLayers, VocabSize: c.VocabSize,
		LayerTypes: c.LayerTypes, FullAttentionInterval: fullAttentionInterval(c.LayerTypes),
		NumAttentionHeads: c.NumAttentionHeads, NumKeyValueHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, AttnOutputGate: c.AttnOutputGate,
		LinearNumKeyHeads: c.LinearNumKeyHeads, LinearNumValueHeads: c.LinearNumValueHeads,
		LinearKeyHeadDim: c.LinearKeyHeadDim, LinearValueHeadDim: c.LinearValueHeadDim, LinearConvKernelDim: c.LinearConvKernelDim,
		NumExperts: c.NumExperts, NumExpertsPerTok: c.NumExpertsPerTok,
		MoeIntermediateSize: c.MoeIntermediateSize, SharedExpertIntermediateSize: c.SharedExpertIntermediateSize,
		MLPOnlyLayers: []int{}, NormTopKProb: c.NormTopKProb, HiddenAct: "silu", RMSNormEps: c.RMSNormEps,
		RopeParameters:        ropeParameters{RopeType: "default", RopeTheta: c.RopeTheta, PartialRotaryFactor: c.PartialRotaryFactor},
		MaxPositionEmbeddings: c.MaxPositionEmbeddings,
		TieWordEmbeddings:     false, // Synthetic makes its own output head
		DType:                 "bfloat16",
		EOSTokenID:            c.EOSTokenIDs,
	}
	if text.ModelType == "" || text.ModelType == "qwen3_5_moe" {
		text.ModelType = "qwen3_5_moe_text"
	}
	if c.BOSTokenID >= 0 {
		text.BOSTokenID = &c.BOSTokenID
	}
	quant := map[string]any{"group_size": l.GroupSize, "bits": 4, "mode": "affine"}
	modules := make([]string, 0, len(l.Bits))
	for m := range l.Bits {
		modules = append(modules, m)
	}
	sort.Strings(modules)
	for _, m := range modules {
		if b := l.Bits[m]; b != 4 {
			quant[fileName(m)] = map[string]int{"group_size": l.GroupSize, "bits": b}
		}
	}
	top := struct {
		Architectures      []string       `json:"architectures"`
		ModelType          string         `json:"model_type"`
		Quantization       map[string]any `json:"quantization"`
		QuantizationConfig map[string]any `json:"quantization_config"`
		TextConfig         textConfig     `json:"text_config"`
		TieWordEmbeddings  bool           `json:"tie_word_embeddings"`
		Synthetic          map[string]any `json:"petal_synthetic"`
	}{
		Architectures: []string{"Qwen3_5MoeForConditionalGeneration"}, ModelType: "qwen3_5_moe",
		Quantization: quant, QuantizationConfig: quant, TextConfig: text,
		Synthetic: map[string]any{
			"shape": opt.Shape, "seed": opt.Seed,
			"note": "random weights (petal bench --synthetic SHAPE --seed SEED --write-model DIR); the tokenizer is the embedded tiny model's",
		},
	}
	data, err := json.MarshalIndent(top, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("synthwrite: config.json: %w", err)
	}
	return append(data, '\n'), nil
}

// fullAttentionInterval is the interval the layer types follow (every
// n-th layer full attention), or 0 where they follow none.
func fullAttentionInterval(types []string) int {
	n := 0
	for i, t := range types {
		if t == checkpoint.FullAttention {
			n = i + 1
			break
		}
	}
	if n == 0 {
		return 0
	}
	for i, t := range types {
		if full := (i+1)%n == 0; full != (t == checkpoint.FullAttention) {
			return 0
		}
	}
	return n
}
