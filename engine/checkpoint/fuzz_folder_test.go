package checkpoint_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/fixtures"
)

// maxFuzzData bounds the data area of a fuzzed file (it is a sparse file of
// zeros), large enough for the embedded model's weights.
const maxFuzzData = 16 << 20

// FuzzLoadFolder writes a model folder from a fuzzed config.json and a fuzzed
// safetensors header (followed by dataLen zero bytes) and loads it as petal
// does: open the checkpoint, then bind the model. Whatever the bytes, it
// must return an error or a model, never panic, and never allocate far more
// than its input (config sizes are bounded before anything is sized by them).
//
// Its inputs are large (the main seed is the embedded model), so minimising
// one takes long: go test -fuzz FuzzLoadFolder -fuzzminimizetime 2s.
func FuzzLoadFolder(f *testing.F) {
	cfg, header, dataLen := embeddedModelAsOneFile(f)
	f.Add(cfg, header, dataLen)
	f.Add(cfg, []byte(`{}`), uint32(0))
	f.Add(cfg, header[:len(header)/2], dataLen)
	f.Add([]byte(`{"model_type":"qwen3_5_moe","text_config":{"num_hidden_layers":1000000000}}`), []byte(`{}`), uint32(0))
	f.Add([]byte(`{"quantization":{"bits":4,"group_size":64},"text_config":{"model_type":"qwen3_5_moe_text","hidden_size":64,"num_hidden_layers":4,"vocab_size":128,`+
		`"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":16,`+
		`"linear_value_head_dim":16,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":32}}`),
		[]byte(`{"model.norm.weight":{"dtype":"BF16","shape":[64],"data_offsets":[0,128]}}`), uint32(128))
	f.Add([]byte(`{}`), []byte(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), uint32(5))
	f.Fuzz(func(t *testing.T, cfg, header []byte, dataLen uint32) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		writeSparseShard(t, filepath.Join(dir, "model.safetensors"), header, int64(min(dataLen, maxFuzzData)))

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ck, err := checkpoint.Open(dir)
		if err == nil {
			if _, err := model.Load(ck, cpu.New(), 4); err == nil {
				if st := ck.Stats(); st.Tensors == 0 {
					t.Errorf("a model loaded from a file with no tensors")
				}
			}
			ck.Close()
		}
		runtime.ReadMemStats(&after)
		// the embedded model's own load stays well under this
		limit := uint64(64<<20 + 64*(len(cfg)+len(header)))
		if grew := after.TotalAlloc - before.TotalAlloc; grew > limit {
			t.Errorf("loading allocated %d bytes for %d bytes of config and %d of header", grew, len(cfg), len(header))
		}
	})
}

// writeSparseShard writes the length prefix and header, then extends the
// file with dataLen zero bytes without writing them.
func writeSparseShard(t *testing.T, path string, header []byte, dataLen int64) {
	t.Helper()
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	if err := os.WriteFile(path, append(out, header...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(len(out)+len(header))+dataLen); err != nil {
		t.Fatal(err)
	}
}

// embeddedModelAsOneFile is the embedded model's config.json and the header
// of its two shards merged into one file's, with that file's data length.
func embeddedModelAsOneFile(f testing.TB) (cfg, header []byte, dataLen uint32) {
	dir, err := fixtures.DefaultModel(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	if cfg, err = os.ReadFile(filepath.Join(dir, "config.json")); err != nil {
		f.Fatal(err)
	}
	merged := map[string]json.RawMessage{}
	var offset int64
	for _, shard := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		file, err := os.ReadFile(filepath.Join(dir, shard))
		if err != nil {
			f.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(file)
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(file[8:8+n], &entries); err != nil {
			f.Fatal(err)
		}
		for name, raw := range entries {
			if name == "__metadata__" {
				merged[name] = raw
				continue
			}
			var e map[string]any
			if err := json.Unmarshal(raw, &e); err != nil {
				f.Fatal(err)
			}
			offs := e["data_offsets"].([]any)
			e["data_offsets"] = []int64{int64(offs[0].(float64)) + offset, int64(offs[1].(float64)) + offset}
			if merged[name], err = json.Marshal(e); err != nil {
				f.Fatal(err)
			}
		}
		offset += int64(len(file)) - 8 - int64(n)
	}
	if header, err = json.Marshal(merged); err != nil {
		f.Fatal(err)
	}
	return cfg, header, uint32(offset)
}

// TestFuzzLoadFolderSeedLoads: the main seed of FuzzLoadFolder reaches the
// end of loading, so the fuzzer starts from a folder that binds a model.
func TestFuzzLoadFolderSeedLoads(t *testing.T) {
	cfg, header, dataLen := embeddedModelAsOneFile(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	writeSparseShard(t, filepath.Join(dir, "model.safetensors"), header, int64(dataLen))
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := model.Load(ck, cpu.New(), 4); err != nil {
		t.Fatal(err)
	}
}
