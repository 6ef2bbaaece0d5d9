package checkpoint

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestConfigSizeLimits: every size read from config.json is bounded before
// anything is allocated from it; the error names the field and the limit.
func TestConfigSizeLimits(t *testing.T) {
	for _, tc := range []struct {
		field string
		value int
	}{
		{"num_hidden_layers", 1e9}, {"num_hidden_layers", 1e6}, {"hidden_size", 1 << 40}, {"vocab_size", 1e9},
		{"num_attention_heads", 1e6}, {"num_key_value_heads", 1e6}, {"head_dim", 1e6},
		{"linear_num_key_heads", 1e6}, {"linear_num_value_heads", 1e6}, {"linear_key_head_dim", 1e6},
		{"linear_value_head_dim", 1e6}, {"linear_conv_kernel_dim", 1e6}, {"num_experts", 1e8},
		{"moe_intermediate_size", 1e9}, {"shared_expert_intermediate_size", 1e9}, {"max_position_embeddings", 1e12},
	} {
		text := testTextConfig()
		text[tc.field] = tc.value
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parseTestConfig(t, true, text)
		runtime.ReadMemStats(&after)
		wantErr(t, err, "config.json", "text_config."+tc.field, "limit")
		if lim := sizeLimits[tc.field]; lim == 0 || !strings.Contains(err.Error(), strconv.Itoa(lim)) {
			t.Errorf("%s: error %q does not give the limit %d", tc.field, err, lim)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s = %d: parsing allocated %d bytes before refusing", tc.field, tc.value, grew)
		}
	}
	// the limits themselves are accepted
	text := testTextConfig()
	text["max_position_embeddings"] = sizeLimits["max_position_embeddings"]
	if _, err := parseTestConfig(t, true, text); err != nil {
		t.Error(err)
	}
}
