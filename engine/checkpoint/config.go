package checkpoint

import (
	"encoding/json"
	"fmt"
)

// Config is the text model's configuration, typed, as config.json gives it
// (its text_config object, or the top level for a text-only export), with
// the defaults of transformers' Qwen3_5MoeTextConfig for optional fields.
type Config struct {
	ModelType                              string // "qwen3_5_moe_text" (or "qwen3_5_moe" for a top-level text config)
	HiddenSize, NumHiddenLayers, VocabSize int
	LayerTypes                             []string // "linear_attention" or "full_attention", one per layer

	NumAttentionHeads, NumKeyValueHeads, HeadDim int
	AttnOutputGate                               bool

	LinearNumKeyHeads, LinearNumValueHeads                    int
	LinearKeyHeadDim, LinearValueHeadDim, LinearConvKernelDim int

	NumExperts, NumExpertsPerTok                      int
	MoeIntermediateSize, SharedExpertIntermediateSize int
	NormTopKProb                                      bool

	RMSNormEps                     float64
	RopeTheta, PartialRotaryFactor float64
	RopeType                       string // always "default": other types are rejected
	MaxPositionEmbeddings          int
	TieWordEmbeddings              bool

	BOSTokenID  int   // -1 when absent
	EOSTokenIDs []int // empty when absent
}

// RotaryDim is the number of leading dimensions of each head that RoPE rotates.
func (c *Config) RotaryDim() int { return int(float64(c.HeadDim) * c.PartialRotaryFactor) }

// Layer kinds in LayerTypes.
const (
	LinearAttention = "linear_attention"
	FullAttention   = "full_attention"
)

// ropeFields is a rope_parameters object or its legacy rope_scaling spelling.
type ropeFields struct {
	RopeType            *string  `json:"rope_type"`
	Type                *string  `json:"type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// textFields mirrors the text-config keys petal reads; pointers tell absent
// from zero.
type textFields struct {
	ModelType                    *string         `json:"model_type"`
	HiddenSize                   *int            `json:"hidden_size"`
	NumHiddenLayers              *int            `json:"num_hidden_layers"`
	VocabSize                    *int            `json:"vocab_size"`
	LayerTypes                   []string        `json:"layer_types"`
	FullAttentionInterval        *int            `json:"full_attention_interval"`
	NumAttentionHeads            *int            `json:"num_attention_heads"`
	NumKeyValueHeads             *int            `json:"num_key_value_heads"`
	HeadDim                      *int            `json:"head_dim"`
	AttnOutputGate               *bool           `json:"attn_output_gate"`
	LinearNumKeyHeads            *int            `json:"linear_num_key_heads"`
	LinearNumValueHeads          *int            `json:"linear_num_value_heads"`
	LinearKeyHeadDim             *int            `json:"linear_key_head_dim"`
	LinearValueHeadDim           *int            `json:"linear_value_head_dim"`
	LinearConvKernelDim          *int            `json:"linear_conv_kernel_dim"`
	NumExperts                   *int            `json:"num_experts"`
	NumExpertsPerTok             *int            `json:"num_experts_per_tok"`
	MoeIntermediateSize          *int            `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize *int            `json:"shared_expert_intermediate_size"`
	MLPOnlyLayers                []int           `json:"mlp_only_layers"`
	NormTopKProb                 *bool           `json:"norm_topk_prob"`
	HiddenAct                    *string         `json:"hidden_act"`
	RMSNormEps                   *float64        `json:"rms_norm_eps"`
	RopeParameters               *ropeFields     `json:"rope_parameters"`
	RopeScaling                  *ropeFields     `json:"rope_scaling"`
	RopeTheta                    *float64        `json:"rope_theta"`
	PartialRotaryFactor          *float64        `json:"partial_rotary_factor"`
	MaxPositionEmbeddings        *int            `json:"max_position_embeddings"`
	TieWordEmbeddings            *bool           `json:"tie_word_embeddings"`
	BOSTokenID                   json.RawMessage `json:"bos_token_id"`
	EOSTokenID                   json.RawMessage `json:"eos_token_id"`
}

// supportedModelTypes are the model_type values of the Qwen3.5/3.6 MoE text model.
var supportedModelTypes = map[string]bool{"qwen3_5_moe_text": true, "qwen3_5_moe": true}

// parseConfig reads the text configuration out of config.json's bytes.
func parseConfig(data []byte) (Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return Config{}, fmt.Errorf("checkpoint: config.json: %v", err)
	}
	var outer, text textFields
	if err := json.Unmarshal(data, &outer); err != nil {
		return Config{}, fmt.Errorf("checkpoint: config.json: %s", describeJSONError("", err))
	}
	prefix := ""
	if tc, ok := top["text_config"]; ok && !isNull(tc) {
		prefix = "text_config."
		if err := json.Unmarshal(tc, &text); err != nil {
			return Config{}, fmt.Errorf("checkpoint: config.json: %s", describeJSONError(prefix, err))
		}
	} else {
		text = outer
	}
	// The multimodal wrapper may carry these at the top level only.
	if text.ModelType == nil {
		text.ModelType = outer.ModelType
	}
	if text.TieWordEmbeddings == nil {
		text.TieWordEmbeddings = outer.TieWordEmbeddings
	}
	if isNull(text.BOSTokenID) {
		text.BOSTokenID = outer.BOSTokenID
	}
	if isNull(text.EOSTokenID) {
		text.EOSTokenID = outer.EOSTokenID
	}
	c, err := text.config(prefix)
	if err != nil {
		return Config{}, err
	}
	if err := c.validate(prefix); err != nil {
		return Config{}, err
	}
	return c, nil
}

// config fills a Config from the fields, with defaults for optional ones.
func (f *textFields) config(prefix string) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("checkpoint: config.json: "+prefix+format, args...)
	}
	c := Config{
		AttnOutputGate:        orDefault(f.AttnOutputGate, true),
		LinearConvKernelDim:   orDefault(f.LinearConvKernelDim, 4),
		NormTopKProb:          orDefault(f.NormTopKProb, true),
		RMSNormEps:            orDefault(f.RMSNormEps, 1e-6),
		MaxPositionEmbeddings: orDefault(f.MaxPositionEmbeddings, 32768),
		TieWordEmbeddings:     orDefault(f.TieWordEmbeddings, false),
	}
	if f.ModelType == nil {
		return fail("model_type is missing")
	}
	if c.ModelType = *f.ModelType; !supportedModelTypes[c.ModelType] {
		return fail("model_type %q is not supported (qwen3_5_moe_text)", c.ModelType)
	}
	required := []struct {
		name string
		src  *int
		dst  *int
	}{
		{"hidden_size", f.HiddenSize, &c.HiddenSize},
		{"num_hidden_layers", f.NumHiddenLayers, &c.NumHiddenLayers},
		{"vocab_size", f.VocabSize, &c.VocabSize},
		{"num_attention_heads", f.NumAttentionHeads, &c.NumAttentionHeads},
		{"num_key_value_heads", f.NumKeyValueHeads, &c.NumKeyValueHeads},
		{"head_dim", f.HeadDim, &c.HeadDim},
		{"linear_num_key_heads", f.LinearNumKeyHeads, &c.LinearNumKeyHeads},
		{"linear_num_value_heads", f.LinearNumValueHeads, &c.LinearNumValueHeads},
		{"linear_key_head_dim", f.LinearKeyHeadDim, &c.LinearKeyHeadDim},
		{"linear_value_head_dim", f.LinearValueHeadDim, &c.LinearValueHeadDim},
		{"num_experts", f.NumExperts, &c.NumExperts},
		{"num_experts_per_tok", f.NumExpertsPerTok, &c.NumExpertsPerTok},
		{"moe_intermediate_size", f.MoeIntermediateSize, &c.MoeIntermediateSize},
		{"shared_expert_intermediate_size", f.SharedExpertIntermediateSize, &c.SharedExpertIntermediateSize},
	}
	for _, r := range required {
		if r.src == nil {
			return fail("%s is missing", r.name)
		}
		*r.dst = *r.src
		if err := checkSizeLimit(prefix, r.name, *r.dst); err != nil {
			return Config{}, err
		}
	}
	for _, r := range []struct {
		name string
		v    int
	}{{"linear_conv_kernel_dim", c.LinearConvKernelDim}, {"max_position_embeddings", c.MaxPositionEmbeddings}} {
		if err := checkSizeLimit(prefix, r.name, r.v); err != nil {
			return Config{}, err
		}
	}
	if f.HiddenAct != nil && *f.HiddenAct != "silu" {
		return fail("hidden_act %q is not supported (silu)", *f.HiddenAct)
	}
	if len(f.MLPOnlyLayers) > 0 {
		return fail("mlp_only_layers %v: every layer must be a mixture-of-experts layer", f.MLPOnlyLayers)
	}

	c.LayerTypes = f.LayerTypes
	if c.LayerTypes == nil {
		interval := orDefault(f.FullAttentionInterval, 4)
		if interval <= 0 {
			return fail("full_attention_interval is %d, want a positive number", interval)
		}
		c.LayerTypes = make([]string, max(c.NumHiddenLayers, 0))
		for i := range c.LayerTypes {
			c.LayerTypes[i] = LinearAttention
			if (i+1)%interval == 0 {
				c.LayerTypes[i] = FullAttention
			}
		}
	} else if f.FullAttentionInterval != nil && *f.FullAttentionInterval > 0 && len(c.LayerTypes) == c.NumHiddenLayers {
		// Both spellings present: they must describe the same schedule (a length mismatch is reported by validate).
		for i, t := range c.LayerTypes {
			if full := (i+1)%*f.FullAttentionInterval == 0; full != (t == FullAttention) {
				return fail("layer_types[%d] is %q, but full_attention_interval %d says otherwise", i, t, *f.FullAttentionInterval)
			}
		}
	}

	if err := c.readRope(f, prefix); err != nil {
		return Config{}, err
	}
	var err error
	if c.BOSTokenID, err = parseTokenID(f.BOSTokenID); err != nil {
		return fail("bos_token_id: %v", err)
	}
	if c.EOSTokenIDs, err = parseTokenIDs(f.EOSTokenID); err != nil {
		return fail("eos_token_id: %v", err)
	}
	return c, nil
}

// readRope takes theta, the partial factor and the type from rope_parameters,
// else the legacy rope_scaling object, else the legacy top-level keys.
func (c *Config) readRope(f *textFields, prefix string) error {
	c.RopeTheta, c.PartialRotaryFactor, c.RopeType = 10000, 0.25, "default"
	if f.RopeTheta != nil {
		c.RopeTheta = *f.RopeTheta
	}
	if f.PartialRotaryFactor != nil {
		c.PartialRotaryFactor = *f.PartialRotaryFactor
	}
	// Later sources win: legacy rope_scaling, then rope_parameters.
	for _, src := range []struct {
		name string
		r    *ropeFields
	}{{"rope_scaling", f.RopeScaling}, {"rope_parameters", f.RopeParameters}} {
		if src.r == nil {
			continue
		}
		if src.r.RopeTheta != nil {
			c.RopeTheta = *src.r.RopeTheta
		}
		if src.r.PartialRotaryFactor != nil {
			c.PartialRotaryFactor = *src.r.PartialRotaryFactor
		}
		for _, t := range []*string{src.r.RopeType, src.r.Type} {
			if t != nil && *t != "default" {
				return fmt.Errorf("checkpoint: config.json: %s%s: rope type %q is not supported (only \"default\")", prefix, src.name, *t)
			}
		}
	}
	return nil
}
