package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oracleDir is the reference model of the shared test data (repository root ../shared).
const oracleDir = "../../../shared/oracle/tiny-qwen36-moe-4bit"

func needOracle(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(oracleDir); err != nil {
		t.Skipf("oracle model not present at %s (shared test data missing): %v", oracleDir, err)
	}
}

// testTensor is one tensor to write into a hand-built safetensors file.
type testTensor struct {
	name  string
	dtype string
	shape []int
	data  []byte
}

// encodeSafetensors lays tensors out in order behind a JSON header padded
// with spaces to 8 bytes, as the safetensors writers do.
func encodeSafetensors(tensors []testTensor) []byte {
	sizes := make([]int, len(tensors))
	for i, t := range tensors {
		sizes[i] = len(t.data)
	}
	out := safetensorsHeader(tensors, sizes)
	for _, t := range tensors {
		out = append(out, t.data...)
	}
	return out
}

// safetensorsHeader is the length prefix and header of tensors holding
// sizes[i] bytes each, laid out in order.
func safetensorsHeader(tensors []testTensor, sizes []int) []byte {
	header := map[string]any{"__metadata__": map[string]string{"format": "mlx"}}
	offset := 0
	for i, t := range tensors {
		header[t.name] = map[string]any{
			"dtype": t.dtype, "shape": t.shape, "data_offsets": []int{offset, offset + sizes[i]},
		}
		offset += sizes[i]
	}
	js, err := json.Marshal(header)
	if err != nil {
		panic(err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(out, js...)
}

// testTextConfig is a small, consistent text config; tests edit copies of it.
func testTextConfig() map[string]any {
	return map[string]any{
		"model_type": "qwen3_5_moe_text", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 128,
		"full_attention_interval": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
		"attn_output_gate": true, "linear_num_key_heads": 1, "linear_num_value_heads": 2,
		"linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4,
		"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
		"rms_norm_eps": 1e-6, "max_position_embeddings": 4096, "tie_word_embeddings": false,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
		"bos_token_id":    nil, "eos_token_id": 100,
	}
}

// testQuantBlock quantises at 4 bits in groups of 64, the router of layer 0 at 8.
func testQuantBlock() map[string]any {
	return map[string]any{
		"group_size": 64, "bits": 4, "mode": "affine",
		"language_model.model.layers.0.mlp.gate": map[string]any{"group_size": 64, "bits": 8},
	}
}

// writeConfig writes config.json in the multimodal wrapper with the given
// text config and quantization block (nil: none).
func writeConfig(t *testing.T, dir string, text, quantization map[string]any) {
	t.Helper()
	cfg := map[string]any{"model_type": "qwen3_5_moe", "text_config": text, "tie_word_embeddings": false}
	if quantization != nil {
		cfg["quantization"] = quantization
		cfg["quantization_config"] = quantization
	}
	writeJSON(t, dir, configFile, cfg)
}

func writeJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, name, js)
}

func writeBytes(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// newCheckpointDir writes a config and one model.safetensors with tensors.
func newCheckpointDir(t *testing.T, tensors []testTensor) string {
	t.Helper()
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	writeBytes(t, dir, singleFile, encodeSafetensors(tensors))
	return dir
}

// bf16Tensor encodes float32 values, exactly representable in bfloat16.
func bf16Tensor(name string, shape []int, vals ...float32) testTensor {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint16(b, bf16Bits(v))
	}
	return testTensor{name, "BF16", shape, b}
}

// bf16Bits truncates; test values are chosen exact in bfloat16.
func bf16Bits(v float32) uint16 {
	bits := math.Float32bits(v)
	if bits&0xffff != 0 {
		panic("test value is not exact in bfloat16")
	}
	return uint16(bits >> 16)
}

func zeros(n int) []byte { return make([]byte, n) }

// wantErr fails unless err is non-nil and mentions every culprit.
func wantErr(t *testing.T, err error, culprits ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %q", culprits)
	}
	for _, c := range culprits {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not mention %q", err, c)
		}
	}
	t.Logf("error: %v", err)
	if msg := err.Error(); !strings.HasPrefix(msg, "checkpoint: ") || strings.HasSuffix(msg, ".") {
		t.Errorf("error %q: want the package prefix and no trailing period", msg)
	}
}
