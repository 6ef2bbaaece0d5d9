package checkpoint

import "fmt"

// sizeLimits bound every size config.json gives, far above any released
// model of this family (Qwen3.6-35B-A3B: 40 layers, hidden 2048, 256
// experts, a 248K vocabulary, 262K context), so that a damaged or hostile
// config is refused before anything is allocated from it.
var sizeLimits = map[string]int{
	"hidden_size":                     1 << 16,
	"num_hidden_layers":               1024,
	"vocab_size":                      1 << 22,
	"num_attention_heads":             1024,
	"num_key_value_heads":             1024,
	"head_dim":                        4096,
	"linear_num_key_heads":            1024,
	"linear_num_value_heads":          1024,
	"linear_key_head_dim":             4096,
	"linear_value_head_dim":           4096,
	"linear_conv_kernel_dim":          64,
	"num_experts":                     1 << 14,
	"num_experts_per_tok":             1 << 14,
	"moe_intermediate_size":           1 << 18,
	"shared_expert_intermediate_size": 1 << 18,
	"max_position_embeddings":         1 << 24,
}

// SizeLimit is the largest value petal accepts for a size field of the
// text config (its config.json name), or 0 for a field it does not bound.
func SizeLimit(field string) int { return sizeLimits[field] }

// checkSizeLimit refuses a value above its field's limit.
func checkSizeLimit(prefix, field string, v int) error {
	if lim, ok := sizeLimits[field]; ok && v > lim {
		return fmt.Errorf("checkpoint: config.json: %s%s is %d, over the limit of %d", prefix, field, v, lim)
	}
	return nil
}
