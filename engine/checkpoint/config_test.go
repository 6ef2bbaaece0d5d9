package checkpoint

import (
	"encoding/json"
	"slices"
	"testing"
)

func parseTestConfig(t *testing.T, wrap bool, text map[string]any) (Config, error) {
	t.Helper()
	var cfg any = text
	if wrap {
		cfg = map[string]any{"model_type": "qwen3_5_moe", "text_config": text}
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return parseConfig(js)
}

func TestConfigDefaultsAndDerivedLayerTypes(t *testing.T) {
	text := testTextConfig()
	for _, k := range []string{"attn_output_gate", "rms_norm_eps", "max_position_embeddings", "linear_conv_kernel_dim", "tie_word_embeddings"} {
		delete(text, k)
	}
	text["num_hidden_layers"] = 8
	c, err := parseTestConfig(t, true, text)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{LinearAttention, LinearAttention, LinearAttention, FullAttention, LinearAttention, LinearAttention, LinearAttention, FullAttention}
	if !slices.Equal(c.LayerTypes, want) {
		t.Errorf("layer types %v, want full attention at 3 and 7", c.LayerTypes)
	}
	if !c.AttnOutputGate || !c.NormTopKProb || c.RMSNormEps != 1e-6 || c.MaxPositionEmbeddings != 32768 || c.LinearConvKernelDim != 4 || c.TieWordEmbeddings {
		t.Errorf("defaults %+v", c)
	}
	if c.BOSTokenID != -1 || !slices.Equal(c.EOSTokenIDs, []int{100}) {
		t.Errorf("bos %d eos %v, want -1 and [100]", c.BOSTokenID, c.EOSTokenIDs)
	}
}

func TestConfigTopLevelAndLegacyRope(t *testing.T) {
	text := testTextConfig()
	delete(text, "rope_parameters")
	text["rope_theta"] = 1e6
	text["partial_rotary_factor"] = 0.5
	text["eos_token_id"] = []int{7, 9}
	text["bos_token_id"] = 3
	c, err := parseTestConfig(t, false, text)
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 1e6 || c.PartialRotaryFactor != 0.5 || c.RotaryDim() != 16 || c.RopeType != "default" {
		t.Errorf("rope theta %g partial %g dims %d type %q", c.RopeTheta, c.PartialRotaryFactor, c.RotaryDim(), c.RopeType)
	}
	if c.BOSTokenID != 3 || !slices.Equal(c.EOSTokenIDs, []int{7, 9}) {
		t.Errorf("bos %d eos %v", c.BOSTokenID, c.EOSTokenIDs)
	}

	text["rope_scaling"] = map[string]any{"type": "default", "rope_theta": 5e6}
	if c, err = parseTestConfig(t, true, text); err != nil || c.RopeTheta != 5e6 {
		t.Errorf("rope_scaling: theta %g, err %v", c.RopeTheta, err)
	}
	text["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 2e7, "partial_rotary_factor": 0.25}
	if c, err = parseTestConfig(t, true, text); err != nil || c.RopeTheta != 2e7 || c.PartialRotaryFactor != 0.25 {
		t.Errorf("rope_parameters over legacy keys: theta %g partial %g, err %v", c.RopeTheta, c.PartialRotaryFactor, err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(m map[string]any)
		culprits []string
	}{
		{"rope type", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"rope_type": "yarn", "rope_theta": 1e7, "factor": 4}
		}, []string{"text_config.rope_parameters", `"yarn"`}},
		{"legacy rope type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear"} },
			[]string{"text_config.rope_scaling", `"linear"`}},
		{"layer_types length", func(m map[string]any) {
			m["layer_types"] = []string{LinearAttention, LinearAttention, FullAttention}
		}, []string{"text_config.layer_types", "3 entries", "num_hidden_layers is 4"}},
		{"layer_types value", func(m map[string]any) {
			m["layer_types"] = []string{LinearAttention, LinearAttention, LinearAttention, "sliding_attention"}
		}, []string{"text_config.layer_types[3]", `"sliding_attention"`}},
		{"layer_types vs interval", func(m map[string]any) {
			m["layer_types"] = []string{FullAttention, LinearAttention, LinearAttention, LinearAttention}
		}, []string{"text_config.layer_types[0]", "full_attention_interval 4"}},
		{"heads", func(m map[string]any) { m["num_key_value_heads"] = 3 },
			[]string{"text_config.num_attention_heads 2", "num_key_value_heads 3"}},
		{"linear heads", func(m map[string]any) { m["linear_num_key_heads"] = 3 },
			[]string{"text_config.linear_num_value_heads 2", "linear_num_key_heads 3"}},
		{"experts", func(m map[string]any) { m["num_experts_per_tok"] = 5 },
			[]string{"text_config.num_experts_per_tok 5", "num_experts 4"}},
		{"missing", func(m map[string]any) { delete(m, "hidden_size") }, []string{"text_config.hidden_size", "missing"}},
		{"zero", func(m map[string]any) { m["moe_intermediate_size"] = 0 }, []string{"text_config.moe_intermediate_size", "is 0"}},
		{"rotary", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"rope_theta": 1e7, "partial_rotary_factor": 0.3}
		}, []string{"text_config.partial_rotary_factor 0.3"}},
		{"model type", func(m map[string]any) { m["model_type"] = "qwen3_next" }, []string{"text_config.model_type", `"qwen3_next"`}},
		{"activation", func(m map[string]any) { m["hidden_act"] = "gelu" }, []string{"text_config.hidden_act", `"gelu"`}},
		{"mlp only", func(m map[string]any) { m["mlp_only_layers"] = []int{1} }, []string{"text_config.mlp_only_layers"}},
		{"eos", func(m map[string]any) { m["eos_token_id"] = "x" }, []string{"text_config.eos_token_id"}},
		{"eos range", func(m map[string]any) { m["eos_token_id"] = 500 }, []string{"text_config.eos_token_id 500", "128"}},
		{"type", func(m map[string]any) { m["hidden_size"] = "64" }, []string{"hidden_size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := testTextConfig()
			tc.edit(text)
			_, err := parseTestConfig(t, true, text)
			wantErr(t, err, append(tc.culprits, "config.json")...)
		})
	}
}

func TestGenerationConfig(t *testing.T) {
	g, err := parseGeneration([]byte(`{"eos_token_id": 5, "top_k": 40, "min_p": 0.0, "presence_penalty": 1.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.EOSTokenIDs, []int{5}) || !g.HasTopK || g.TopK != 40 || !g.HasMinP || g.MinP != 0 || g.HasTemperature || g.HasTopP ||
		!g.HasPresencePenalty || g.PresencePenalty != 1.5 || g.HasRepetitionPenalty {
		t.Errorf("generation %+v", g)
	}
	_, err = parseGeneration([]byte(`{"temperature": "hot"}`))
	wantErr(t, err, "generation_config.json", "temperature")
}

func TestNormaliseName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"language_model.model.layers.0.mlp.gate.weight", "model.layers.0.mlp.gate.weight"},
		{"model.language_model.embed_tokens.weight", "model.embed_tokens.weight"},
		{"model.layers.0.input_layernorm.weight", "model.layers.0.input_layernorm.weight"},
		{"language_model.lm_head.scales", "lm_head.scales"},
		{"lm_head.weight", "lm_head.weight"},
		{"vision_tower.blocks.0.attn.qkv.weight", ""},
		{"model.visual.merger.mlp.0.weight", ""},
		{"visual.patch_embed.proj.weight", ""},
		{"mtp.layers.0.mlp.experts.0.down_proj.weight", ""},
		{"language_model.mtp.fc.weight", ""},
		{"model.mtp.norm.weight", ""},
		{"multi_modal_projector.linear.weight", ""},
		{"model.", ""},
	} {
		got, ok := normaliseName(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("normaliseName(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	if m, ok := normaliseModule("language_model.lm_head"); !ok || m != "lm_head" {
		t.Errorf("normaliseModule(language_model.lm_head) = %q, %v", m, ok)
	}
}

// TestIgnoredTensors opens an mlx-vlm style file with vision and MTP tensors.
func TestIgnoredTensors(t *testing.T) {
	tensors := append(routerTensors(),
		testTensor{"vision_tower.blocks.0.norm1.weight", "BF16", []int{4}, zeros(8)},
		testTensor{"mtp.fc.weight", "BF16", []int{2, 2}, zeros(8)},
	)
	c, err := Open(newCheckpointDir(t, tensors))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Ignored(); !slices.Equal(got, []string{"mtp.fc.weight", "vision_tower.blocks.0.norm1.weight"}) {
		t.Errorf("ignored %v", got)
	}
	if st := c.Stats(); st.IgnoredTensors != 2 || st.Tensors != len(routerTensors()) {
		t.Errorf("stats %d tensors, %d ignored", st.Tensors, st.IgnoredTensors)
	}
	if _, ok := c.Tensor("vision_tower.blocks.0.norm1.weight"); ok {
		t.Error("an ignored tensor is reachable")
	}
}
