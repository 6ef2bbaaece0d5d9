package model_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
)

// TestNewDimsLimits: a config built in code gets the bounds config.json does.
func TestNewDimsLimits(t *testing.T) {
	c, err := model.NamedConfig("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.NumHiddenLayers = 2000
	c.LayerTypes = make([]string, c.NumHiddenLayers)
	for i := range c.LayerTypes {
		c.LayerTypes[i] = checkpoint.LinearAttention
	}
	_, err = model.NewDims(&c)
	if err == nil || !strings.Contains(err.Error(), "num_hidden_layers") || !strings.Contains(err.Error(), "1024") {
		t.Errorf("2000 layers: error %v, want one naming num_hidden_layers and its limit", err)
	}
	c, _ = model.NamedConfig("tiny")
	c.VocabSize = 1 << 30
	if _, err = model.NewDims(&c); err == nil || !strings.Contains(err.Error(), "vocab_size") {
		t.Errorf("vocabulary of 2^30: error %v", err)
	}
}

// TestLoadErrorListCapped: a checkpoint missing every tensor of 500 layers
// gets the first 20 problems and a count of the rest, not ten thousand lines.
func TestLoadErrorListCapped(t *testing.T) {
	c, _ := model.NamedConfig("tiny")
	text := map[string]any{
		"model_type": "qwen3_5_moe_text", "hidden_size": c.HiddenSize, "num_hidden_layers": 500, "vocab_size": c.VocabSize,
		"num_attention_heads": c.NumAttentionHeads, "num_key_value_heads": c.NumKeyValueHeads, "head_dim": c.HeadDim,
		"linear_num_key_heads": c.LinearNumKeyHeads, "linear_num_value_heads": c.LinearNumValueHeads,
		"linear_key_head_dim": c.LinearKeyHeadDim, "linear_value_head_dim": c.LinearValueHeadDim,
		"num_experts": c.NumExperts, "num_experts_per_tok": c.NumExpertsPerTok,
		"moe_intermediate_size": c.MoeIntermediateSize, "shared_expert_intermediate_size": c.SharedExpertIntermediateSize,
	}
	cfg, err := json.Marshal(map[string]any{"text_config": text, "quantization": map[string]any{"group_size": 64, "bits": 4}})
	if err != nil {
		t.Fatal(err)
	}
	header := `{"__metadata__":{"format":"mlx"}}`
	st := append(binary.LittleEndian.AppendUint64(nil, uint64(len(header))), header...)
	ck, err := checkpoint.OpenFS(fstest.MapFS{"m/config.json": {Data: cfg}, "m/model.safetensors": {Data: st}}, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	_, err = model.Load(ck, cpu.New(), 16)
	if err == nil {
		t.Fatal("a checkpoint with no tensors loaded")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 21 || !strings.Contains(lines[20], "and ") || !strings.Contains(lines[20], " more") {
		t.Errorf("%d lines, last %q; want 20 problems and a count", len(lines), lines[len(lines)-1])
	}
	if !strings.Contains(lines[0], "model.embed_tokens") {
		t.Errorf("first problem %q, want the embedding", lines[0])
	}
}

// TestLoadUnquantised: a checkpoint whose config.json has no quantization
// block gets one message saying what it is and how to convert it, not an
// "extra tensor" line per tensor.
func TestLoadUnquantised(t *testing.T) {
	ck := openEmbedded(t)
	dir := ck.Dir
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(cfg, &top); err != nil {
		t.Fatal(err)
	}
	delete(top, "quantization")
	delete(top, "quantization_config")
	if cfg, err = json.Marshal(top); err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, name := range []string{"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fsys["m/"+name] = &fstest.MapFile{Data: data}
	}
	fsys["m/config.json"] = &fstest.MapFile{Data: cfg}
	unq, err := checkpoint.OpenFS(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer unq.Close()
	_, err = model.Load(unq, cpu.New(), 16)
	if err == nil {
		t.Fatal("loaded without a quantization block")
	}
	msg := err.Error()
	for _, want := range []string{"m", "quantization", "not an MLX-quantised checkpoint", "mlx_lm.convert", "-q", "mlx_vlm"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error has %d lines, want one:\n%s", strings.Count(msg, "\n")+1, msg)
	}
}
