package checkpoint

import "fmt"

// validate checks that the sizes agree with each other.
func (c *Config) validate(prefix string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint: config.json: "+prefix+format, args...)
	}
	for _, p := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers}, {"vocab_size", c.VocabSize},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
		{"linear_num_key_heads", c.LinearNumKeyHeads}, {"linear_num_value_heads", c.LinearNumValueHeads},
		{"linear_key_head_dim", c.LinearKeyHeadDim}, {"linear_value_head_dim", c.LinearValueHeadDim},
		{"linear_conv_kernel_dim", c.LinearConvKernelDim},
		{"num_experts", c.NumExperts}, {"num_experts_per_tok", c.NumExpertsPerTok},
		{"moe_intermediate_size", c.MoeIntermediateSize}, {"shared_expert_intermediate_size", c.SharedExpertIntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if p.v <= 0 {
			return fail("%s is %d, want a positive number", p.name, p.v)
		}
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return fail("layer_types has %d entries, but num_hidden_layers is %d", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		if t != LinearAttention && t != FullAttention {
			return fail("layer_types[%d] is %q, want %q or %q", i, t, LinearAttention, FullAttention)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fail("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		return fail("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinearNumValueHeads, c.LinearNumKeyHeads)
	}
	if c.NumExpertsPerTok > c.NumExperts {
		return fail("num_experts_per_tok %d is more than num_experts %d", c.NumExpertsPerTok, c.NumExperts)
	}
	if !(c.RMSNormEps > 0) {
		return fail("rms_norm_eps is %g, want a positive number", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) {
		return fail("rope_theta is %g, want a positive number", c.RopeTheta)
	}
	rd := float64(c.HeadDim) * c.PartialRotaryFactor
	if !(c.PartialRotaryFactor > 0 && c.PartialRotaryFactor <= 1) || rd != float64(int(rd)) || int(rd)%2 != 0 {
		return fail("partial_rotary_factor %g gives %g rotary dimensions of head_dim %d, want an even whole number", c.PartialRotaryFactor, rd, c.HeadDim)
	}
	if c.BOSTokenID >= c.VocabSize {
		return fail("bos_token_id %d is outside the vocabulary (%d)", c.BOSTokenID, c.VocabSize)
	}
	for _, id := range c.EOSTokenIDs {
		if id >= c.VocabSize {
			return fail("eos_token_id %d is outside the vocabulary (%d)", id, c.VocabSize)
		}
	}
	return nil
}
