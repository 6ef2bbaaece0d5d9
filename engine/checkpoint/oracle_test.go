package checkpoint

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// oracleIndex is the part of the oracle's index read independently of the loader.
type oracleIndex struct {
	Metadata struct {
		TotalSize       int64 `json:"total_size"`
		TotalParameters int64 `json:"total_parameters"`
	} `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

func openOracle(t *testing.T) (*Checkpoint, oracleIndex) {
	t.Helper()
	needOracle(t)
	c, err := Open(oracleDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var idx oracleIndex
	js, err := os.ReadFile(filepath.Join(oracleDir, indexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &idx); err != nil {
		t.Fatal(err)
	}
	return c, idx
}

// TestOracleConfig checks the parsed configs against the oracle README's table.
func TestOracleConfig(t *testing.T) {
	c, _ := openOracle(t)
	cfg := c.Config
	ints := []struct {
		name      string
		got, want int
	}{
		{"hidden_size", cfg.HiddenSize, 256},
		{"num_hidden_layers", cfg.NumHiddenLayers, 8},
		{"vocab_size", cfg.VocabSize, 4096},
		{"num_attention_heads", cfg.NumAttentionHeads, 8},
		{"num_key_value_heads", cfg.NumKeyValueHeads, 1},
		{"head_dim", cfg.HeadDim, 256},
		{"linear_num_key_heads", cfg.LinearNumKeyHeads, 4},
		{"linear_num_value_heads", cfg.LinearNumValueHeads, 8},
		{"linear_key_head_dim", cfg.LinearKeyHeadDim, 128},
		{"linear_value_head_dim", cfg.LinearValueHeadDim, 128},
		{"linear_conv_kernel_dim", cfg.LinearConvKernelDim, 4},
		{"num_experts", cfg.NumExperts, 32},
		{"num_experts_per_tok", cfg.NumExpertsPerTok, 8},
		{"moe_intermediate_size", cfg.MoeIntermediateSize, 64},
		{"shared_expert_intermediate_size", cfg.SharedExpertIntermediateSize, 128},
		{"rotary dim", cfg.RotaryDim(), 64},
		{"bos_token_id", cfg.BOSTokenID, 4070},
		{"max_position_embeddings", cfg.MaxPositionEmbeddings, 32768},
	}
	for _, f := range ints {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
		}
	}
	wantTypes := []string{LinearAttention, LinearAttention, LinearAttention, FullAttention,
		LinearAttention, LinearAttention, LinearAttention, FullAttention}
	if !slices.Equal(cfg.LayerTypes, wantTypes) {
		t.Errorf("layer types %v, want %v", cfg.LayerTypes, wantTypes)
	}
	if cfg.ModelType != "qwen3_5_moe_text" || !cfg.AttnOutputGate || !cfg.NormTopKProb || cfg.TieWordEmbeddings {
		t.Errorf("model type %q, attn gate %v, norm top-k %v, tied %v", cfg.ModelType, cfg.AttnOutputGate, cfg.NormTopKProb, cfg.TieWordEmbeddings)
	}
	if cfg.RMSNormEps != 1e-6 || cfg.RopeTheta != 1e7 || cfg.PartialRotaryFactor != 0.25 || cfg.RopeType != "default" {
		t.Errorf("eps %g, rope theta %g, partial %g, type %q", cfg.RMSNormEps, cfg.RopeTheta, cfg.PartialRotaryFactor, cfg.RopeType)
	}
	if !slices.Equal(cfg.EOSTokenIDs, []int{4072}) {
		t.Errorf("config eos %v, want [4072]", cfg.EOSTokenIDs)
	}
	g := c.Generation
	if !slices.Equal(g.EOSTokenIDs, []int{4072, 4070}) {
		t.Errorf("generation eos %v, want [4072 4070]", g.EOSTokenIDs)
	}
	if !g.HasTemperature || g.Temperature != 0.6 || !g.HasTopK || g.TopK != 20 || !g.HasTopP || g.TopP != 0.95 || g.HasMinP {
		t.Errorf("generation sampling %+v, want temperature 0.6, top_k 20, top_p 0.95, no min_p", g)
	}
}

// TestOracleTensors checks names, quantisation specs and binding on the oracle model.
func TestOracleTensors(t *testing.T) {
	c, idx := openOracle(t)
	if got, want := len(c.Names()), len(idx.WeightMap); got != want {
		t.Errorf("%d text tensors, want the index's %d", got, want)
	}
	if len(c.Ignored()) != 0 {
		t.Errorf("ignored %v, want none", c.Ignored())
	}
	for _, name := range []string{"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
		"model.layers.0.linear_attn.in_proj_qkv.weight", "model.layers.3.self_attn.q_norm.weight"} {
		if _, ok := c.Tensor(name); !ok {
			t.Errorf("tensor %q missing", name)
		}
	}
	if q := c.Quant("model.layers.0.mlp.gate"); q != (QuantSpec{Bits: 8, GroupSize: 64, Mode: "affine"}) {
		t.Errorf("router quant %+v, want 8-bit groups of 64", q)
	}
	if q := c.Quant("model.layers.7.mlp.shared_expert_gate"); q.Bits != 8 {
		t.Errorf("shared expert gate quant %+v, want 8-bit", q)
	}
	if q := c.Quant("model.layers.0.mlp.switch_mlp.gate_proj"); q != (QuantSpec{Bits: 4, GroupSize: 64, Mode: "affine"}) {
		t.Errorf("expert quant %+v, want 4-bit groups of 64", q)
	}

	router, err := c.TakeQuant("model.layers.0.mlp.gate", 0, 32, 256)
	if err != nil {
		t.Fatal(err)
	}
	if router.Bits != 8 || router.Rows != 32 || router.Cols != 256 || router.Experts != 1 {
		t.Errorf("router %d-bit [%d,%d]x%d, want 8-bit [32,256]", router.Bits, router.Rows, router.Cols, router.Experts)
	}
	gate, err := c.TakeQuant("model.layers.0.mlp.switch_mlp.gate_proj", 32, 64, 256)
	if err != nil {
		t.Fatal(err)
	}
	if gate.Bits != 4 || gate.Experts != 32 || gate.Rows != 64 || gate.Cols != 256 || len(gate.Words) != 32*64*32 {
		t.Errorf("expert stack %d-bit %dx[%d,%d] with %d words, want 4-bit 32x[64,256]", gate.Bits, gate.Experts, gate.Rows, gate.Cols, len(gate.Words))
	}
	if _, err := c.TakeQuant("model.layers.0.mlp.switch_mlp.down_proj", 32, 256, 64); err != nil {
		t.Error(err)
	}
	if slices.Contains(c.Unused(), "model.layers.0.mlp.gate.scales") {
		t.Error("router scales still unused after TakeQuant")
	}
	for _, name := range c.Names() {
		if _, err := c.Take(name); err != nil {
			t.Fatal(err)
		}
	}
	if u := c.Unused(); len(u) != 0 {
		t.Errorf("unused after taking every tensor: %v", u)
	}
}

// TestOracleStats compares the counts with the index metadata mlx-lm wrote.
func TestOracleStats(t *testing.T) {
	c, idx := openOracle(t)
	st := c.Stats()
	if st.Params != idx.Metadata.TotalParameters || st.Params != 25313376 {
		t.Errorf("params %d, want %d", st.Params, idx.Metadata.TotalParameters)
	}
	var total int64
	for _, n := range st.BytesByDType {
		total += n
	}
	if total != idx.Metadata.TotalSize || total != 14352288 {
		t.Errorf("bytes %d, want %d", total, idx.Metadata.TotalSize)
	}
	if st.Tensors != len(idx.WeightMap) || st.IgnoredTensors != 0 {
		t.Errorf("tensors %d (ignored %d), want %d", st.Tensors, st.IgnoredTensors, len(idx.WeightMap))
	}
	// 8 layers x (router + shared-expert gate) are 8-bit; everything else quantised is 4-bit.
	if st.QuantBytesByBits[8] == 0 || st.QuantBytesByBits[4] == 0 || len(st.QuantBytesByBits) != 2 {
		t.Errorf("quantised bytes by bits %v, want 4 and 8", st.QuantBytesByBits)
	}
	if st.QuantBytesByBits[4]+st.QuantBytesByBits[8] != st.BytesByDType[U32]+st.BytesByDType[BF16]-normBytes(c) {
		t.Errorf("quantised bytes %v do not add up with the dtype totals %v", st.QuantBytesByBits, st.BytesByDType)
	}
}

// normBytes is the size of the unquantised BF16 tensors (norms, conv, dt_bias).
func normBytes(c *Checkpoint) int64 {
	var n int64
	for _, name := range c.Names() {
		tn, _ := c.Tensor(name)
		if tn.DType != BF16 {
			continue
		}
		if _, q := c.Tensor(trimLast(name) + ".scales"); q {
			continue
		}
		n += int64(len(tn.Data))
	}
	return n
}

func trimLast(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i]
		}
	}
	return name
}

// TestOracleEmbeddingMatchesReference dequantises the embedding rows of the
// reference sequence and compares them with the embeddings transformers
// computed from the same checkpoint (hidden state 0 of seq0): this pins the
// nibble order, byte order, scales and biases against an independent reader.
func TestOracleEmbeddingMatchesReference(t *testing.T) {
	c, _ := openOracle(t)
	emb, err := c.TakeQuant("model.embed_tokens", 0, 4096, 256)
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(oracleDir, "..", "reference")
	ids := refTensor(t, filepath.Join(ref, "reference-00001-of-00003.safetensors"), "seq0.input_ids").Int32s()
	hidden := refTensor(t, filepath.Join(ref, "reference-00003-of-00003.safetensors"), "seq0.hidden_states")
	if !slices.Equal(hidden.Shape, []int{10, 256, 256}) || len(ids) != 256 {
		t.Fatalf("reference shapes %v and %d ids", hidden.Shape, len(ids))
	}
	want := hidden.Float32s()[:256*256] // index 0: the embeddings
	row := make([]float32, 256)
	var maxDiff float64
	for pos, id := range ids {
		emb.DequantizeRow(int(id), row)
		for j, v := range row {
			maxDiff = math.Max(maxDiff, math.Abs(float64(v-want[pos*256+j])))
		}
	}
	// One rounding in float32 on both sides: they agree exactly.
	if maxDiff != 0 {
		t.Errorf("embeddings differ from the reference by up to %g", maxDiff)
	}
}

// TestOracleNormsAreShifted checks the MLX +1 on zero-centred norms (README
// means: input_layernorm 0.96, q/k norm 1.04, model.norm 1.67) and that the
// gated norm is not shifted (0.97), reading BF16 and F32 tensors.
func TestOracleNormsAreShifted(t *testing.T) {
	c, _ := openOracle(t)
	mean := func(suffix string) float64 {
		var sum float64
		var n int
		for _, name := range c.Names() {
			if len(name) >= len(suffix) && name[len(name)-len(suffix):] == suffix {
				tn, _ := c.Tensor(name)
				for _, v := range tn.Float32s() {
					sum += float64(v)
					n++
				}
			}
		}
		return sum / float64(n)
	}
	for _, m := range []struct {
		suffix string
		want   float64
	}{
		{"input_layernorm.weight", 0.96}, {"post_attention_layernorm.weight", 0.92},
		{"q_norm.weight", 1.04}, {"model.norm.weight", 1.67}, {"linear_attn.norm.weight", 0.97},
	} {
		if got := mean(m.suffix); math.Abs(got-m.want) > 0.01 {
			t.Errorf("mean of %s = %.3f, want %.2f", m.suffix, got, m.want)
		}
	}
	alog, err := c.Take("model.layers.0.linear_attn.A_log")
	if err != nil {
		t.Fatal(err)
	}
	if alog.DType != F32 || len(alog.Float32s()) != 8 {
		t.Errorf("A_log %s %v, want F32 [8]", alog.DType, alog.Shape)
	}
}

func refTensor(t *testing.T, path, name string) *Tensor {
	t.Helper()
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tn, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("%s has no tensor %q", path, name)
	}
	return tn
}

// BenchmarkOpenOracle measures Open (map, header parse, validation) and Close.
func BenchmarkOpenOracle(b *testing.B) {
	if _, err := os.Stat(oracleDir); err != nil {
		b.Skipf("oracle model not present at %s: %v", oracleDir, err)
	}
	for b.Loop() {
		c, err := Open(oracleDir)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
