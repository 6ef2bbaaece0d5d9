package checkpoint

import (
	"encoding/binary"
	"path/filepath"
	"testing"
)

// routerTensors is a 4-bit quantised [4, 64] router for layer 0 (whose
// config override says 8-bit) plus a norm.
func routerTensors() []testTensor {
	return []testTensor{
		{"language_model.model.layers.0.mlp.gate.weight", "U32", []int{4, 8}, zeros(4 * 8 * 4)},
		{"language_model.model.layers.0.mlp.gate.scales", "BF16", []int{4, 1}, zeros(8)},
		{"language_model.model.layers.0.mlp.gate.biases", "BF16", []int{4, 1}, zeros(8)},
		{"language_model.model.layers.1.mlp.gate.weight", "U32", []int{4, 8}, zeros(4 * 8 * 4)},
		{"language_model.model.layers.1.mlp.gate.scales", "BF16", []int{4, 1}, zeros(8)},
		{"language_model.model.layers.1.mlp.gate.biases", "BF16", []int{4, 1}, zeros(8)},
		{"language_model.model.norm.weight", "BF16", []int{64}, zeros(128)},
	}
}

func TestOpenTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	file := encodeSafetensors(routerTensors())
	writeBytes(t, dir, singleFile, file[:len(file)-10]) // the norm, last in the file, loses its tail
	_, err := Open(dir)
	wantErr(t, err, "model.safetensors", `"language_model.model.norm.weight"`, "truncated")
}

func TestTakeQuantWrongShape(t *testing.T) {
	c, err := Open(newCheckpointDir(t, routerTensors()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.TakeQuant("model.layers.1.mlp.gate", 0, 5, 64)
	wantErr(t, err, `"model.layers.1.mlp.gate.weight"`, "[4 8]", "[5 8]")
	_, err = c.TakeQuant("model.layers.1.mlp.gate", 2, 4, 64)
	wantErr(t, err, `"model.layers.1.mlp.gate.weight"`, "[4 8]", "[2 4 8]")
	_, err = c.TakeQuant("model.layers.1.mlp.gate", 0, 4, 128)
	wantErr(t, err, `"model.layers.1.mlp.gate.scales"`, "[4 1]", "[4 2]")
}

func TestTakeQuantBitsMismatchOverride(t *testing.T) {
	c, err := Open(newCheckpointDir(t, routerTensors()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.TakeQuant("model.layers.0.mlp.gate", 0, 4, 64)
	wantErr(t, err, `"model.layers.0.mlp.gate.weight"`, "4-bit", "at 8 bits", `"model.layers.0.mlp.gate"`)
	// Layer 1 has no override: the default 4 bits match the stored codes.
	if _, err := c.TakeQuant("model.layers.1.mlp.gate", 0, 4, 64); err != nil {
		t.Error(err)
	}
}

func TestTakeQuantWrongDType(t *testing.T) {
	tensors := routerTensors()
	tensors[4].dtype, tensors[4].data = "F32", zeros(16) // layer 1 scales
	c, err := Open(newCheckpointDir(t, tensors))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.TakeQuant("model.layers.1.mlp.gate", 0, 4, 64)
	wantErr(t, err, `"model.layers.1.mlp.gate.scales"`, "F32", "BF16")
}

func TestTakeMissingTensor(t *testing.T) {
	c, err := Open(newCheckpointDir(t, routerTensors()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Take("model.layers.0.input_layernorm.weight")
	wantErr(t, err, `"model.layers.0.input_layernorm.weight"`, "missing")
	_, err = c.TakeQuant("model.layers.2.mlp.gate", 0, 4, 64)
	wantErr(t, err, `"model.layers.2.mlp.gate.weight"`)
	if got := c.Unused(); len(got) != len(routerTensors()) {
		t.Errorf("unused %v: failed takes must not mark tensors", got)
	}
}

func TestOpenUnknownDType(t *testing.T) {
	tensors := append(routerTensors(), testTensor{"language_model.model.layers.0.input_layernorm.weight", "F8_E4M3", []int{64}, zeros(64)})
	_, err := Open(newCheckpointDir(t, tensors))
	wantErr(t, err, "model.safetensors", `"language_model.model.layers.0.input_layernorm.weight"`, "F8_E4M3", "U32, BF16, F16, F32, I32")
}

// TestIgnoredTensorsMayHaveOtherDTypes: a vision-tower tensor of a dtype
// petal never reads does not stop the text model from opening.
func TestIgnoredTensorsMayHaveOtherDTypes(t *testing.T) {
	tensors := append(routerTensors(), testTensor{"vision_tower.pos_ids", "I64", []int{8}, zeros(64)})
	c, err := Open(newCheckpointDir(t, tensors))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ign := c.Ignored(); len(ign) != 1 || ign[0] != "vision_tower.pos_ids" {
		t.Errorf("ignored %v", ign)
	}
}

func TestOpenRawHuggingFace(t *testing.T) {
	tensors := append(routerTensors(),
		testTensor{"model.language_model.layers.0.linear_attn.conv1d.weight", "BF16", []int{8, 1, 4}, zeros(64)})
	_, err := Open(newCheckpointDir(t, tensors))
	wantErr(t, err, `"model.language_model.layers.0.linear_attn.conv1d.weight"`, "[8 1 4]", "Hugging Face", "mlx_lm.convert")

	// The MLX layout [C, K, 1] opens.
	tensors[len(tensors)-1].shape = []int{8, 4, 1}
	c, err := Open(newCheckpointDir(t, tensors))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestOpenBadHeaderLength(t *testing.T) {
	good := encodeSafetensors(routerTensors())
	for _, tc := range []struct {
		name   string
		length uint64
	}{
		{"past the end", uint64(len(good))},
		{"huge", 1 << 40},
		{"zero", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeConfig(t, dir, testTextConfig(), testQuantBlock())
			file := append([]byte(nil), good...)
			binary.LittleEndian.PutUint64(file, tc.length)
			writeBytes(t, dir, singleFile, file)
			_, err := Open(dir)
			wantErr(t, err, "model.safetensors", "header length")
		})
	}
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	writeBytes(t, dir, singleFile, []byte{1, 2, 3})
	_, err := Open(dir)
	wantErr(t, err, "model.safetensors", "too short")
}

func TestOpenSizeMismatch(t *testing.T) {
	tensors := routerTensors()
	tensors[6].data = zeros(126) // norm [64] BF16 needs 128 bytes
	_, err := Open(newCheckpointDir(t, tensors))
	wantErr(t, err, `"language_model.model.norm.weight"`, "126 bytes", "needs 128")
}

// shardedDir writes the router tensors in two shards and an index.
func shardedDir(t *testing.T, edit func(weightMap map[string]string)) string {
	t.Helper()
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	tensors := routerTensors()
	shards := map[string][]testTensor{
		"model-00001-of-00002.safetensors": tensors[:3],
		"model-00002-of-00002.safetensors": tensors[3:],
	}
	weightMap := map[string]string{}
	for file, ts := range shards {
		writeBytes(t, dir, file, encodeSafetensors(ts))
		for _, tn := range ts {
			weightMap[tn.name] = file
		}
	}
	if edit != nil {
		edit(weightMap)
	}
	writeJSON(t, dir, indexFile, map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	return dir
}

func TestOpenSharded(t *testing.T) {
	c, err := Open(shardedDir(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Names()) != len(routerTensors()) {
		t.Errorf("names %v", c.Names())
	}
	tn, _ := c.Tensor("model.norm.weight")
	if tn.File != "model-00002-of-00002.safetensors" {
		t.Errorf("norm from %q, want shard 2", tn.File)
	}
}

func TestOpenIndexErrors(t *testing.T) {
	norm := "language_model.model.norm.weight"
	_, err := Open(shardedDir(t, func(m map[string]string) { m[norm] = "model-00003-of-00003.safetensors" }))
	wantErr(t, err, indexFile, "model-00003-of-00003.safetensors", "does not exist")

	_, err = Open(shardedDir(t, func(m map[string]string) { m[norm] = "model-00001-of-00002.safetensors" }))
	wantErr(t, err, `"`+norm+`"`, "model-00002-of-00002.safetensors", "maps it to model-00001-of-00002.safetensors")

	_, err = Open(shardedDir(t, func(m map[string]string) { m["language_model.model.extra"] = "model-00001-of-00002.safetensors" }))
	wantErr(t, err, `"language_model.model.extra"`, "does not contain it")

	_, err = Open(shardedDir(t, func(m map[string]string) { delete(m, norm) }))
	wantErr(t, err, `"`+norm+`"`, "not listed")

	_, err = Open(shardedDir(t, func(m map[string]string) { m[norm] = "../model-00002-of-00002.safetensors" }))
	wantErr(t, err, `"`+norm+`"`, "outside the folder")
}

func TestOpenMissingFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	wantErr(t, err, filepath.Join(dir, configFile))

	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	_, err = Open(dir)
	wantErr(t, err, singleFile, indexFile)
}

func TestOpenNameCollision(t *testing.T) {
	tensors := append(routerTensors(), testTensor{"model.language_model.norm.weight", "BF16", []int{64}, zeros(128)})
	_, err := Open(newCheckpointDir(t, tensors))
	wantErr(t, err, `"language_model.model.norm.weight"`, `"model.language_model.norm.weight"`, `"model.norm.weight"`)
}

func TestUnquantisedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), nil)
	writeBytes(t, dir, singleFile, encodeSafetensors(routerTensors()))
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if q := c.Quant("model.layers.1.mlp.gate"); q.Quantized() {
		t.Errorf("quant %+v without a quantization block", q)
	}
	_, err = c.TakeQuant("model.layers.1.mlp.gate", 0, 4, 64)
	wantErr(t, err, `"model.layers.1.mlp.gate"`, "not quantised", "no quantization block")
	wantErr(t, c.RequireQuantized(), dir, "no quantization block", "not an MLX-quantised checkpoint", "mlx_lm.convert --hf-path <model> -q")
	if st := c.Stats(); st.Params != int64(2*(4*8+4+4)+64) || len(st.QuantBytesByBits) != 0 {
		t.Errorf("stats %+v: without quantization every element counts once", st)
	}
}

func TestQuantOverrideFalse(t *testing.T) {
	dir := t.TempDir()
	q := testQuantBlock()
	q["language_model.model.layers.1.mlp.gate"] = false
	q["vision_tower.blocks.0.attn.qkv"] = map[string]any{"group_size": 32, "bits": 8}
	writeConfig(t, dir, testTextConfig(), q)
	writeBytes(t, dir, singleFile, encodeSafetensors(routerTensors()))
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Quant("model.layers.1.mlp.gate"); got.Quantized() {
		t.Errorf("override false gives %+v", got)
	}
	_, err = c.TakeQuant("model.layers.1.mlp.gate", 0, 4, 64)
	wantErr(t, err, `"model.layers.1.mlp.gate"`, "marks it false")
	if got := c.Quant("model.layers.2.mlp.gate"); got != (QuantSpec{Bits: 4, GroupSize: 64, Mode: "affine"}) {
		t.Errorf("default %+v", got)
	}
}

func TestOpenQuantizationErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(q map[string]any)
		culprits []string
	}{
		{"mode", func(q map[string]any) { q["mode"] = "mxfp4" }, []string{"quantization.mode", `"mxfp4"`}},
		{"override mode", func(q map[string]any) {
			q["language_model.model.layers.0.mlp.gate"] = map[string]any{"bits": 8, "group_size": 64, "mode": "nvfp4"}
		}, []string{"quantization.language_model.model.layers.0.mlp.gate.mode", `"nvfp4"`}},
		{"bits", func(q map[string]any) { q["bits"] = 3 }, []string{"quantization.bits", "3"}},
		{"missing bits", func(q map[string]any) { delete(q, "bits") }, []string{"quantization.bits", "missing"}},
		{"group", func(q map[string]any) { q["group_size"] = -64 }, []string{"quantization.group_size", "-64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			q := testQuantBlock()
			tc.edit(q)
			writeConfig(t, dir, testTextConfig(), q)
			writeBytes(t, dir, singleFile, encodeSafetensors(routerTensors()))
			_, err := Open(dir)
			wantErr(t, err, append(tc.culprits, configFile)...)
		})
	}
}
