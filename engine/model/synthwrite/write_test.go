package synthwrite_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/model/synthwrite"
)

// custom is a small shape unlike tiny: other head counts and widths, a
// partial rotary factor of one half, layer kinds in no fixed interval,
// four experts of which two run.
func custom() checkpoint.Config {
	return checkpoint.Config{
		ModelType: "qwen3_5_moe_text", HiddenSize: 128, NumHiddenLayers: 5, VocabSize: 4160,
		LayerTypes:        []string{"full_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention"},
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 64, AttnOutputGate: true,
		LinearNumKeyHeads: 2, LinearNumValueHeads: 4, LinearKeyHeadDim: 64, LinearValueHeadDim: 64,
		LinearConvKernelDim: 4, NumExperts: 4, NumExpertsPerTok: 2,
		MoeIntermediateSize: 64, SharedExpertIntermediateSize: 128, NormTopKProb: false,
		RMSNormEps: 1e-5, RopeTheta: 1e4, PartialRotaryFactor: 0.5, RopeType: "default",
		MaxPositionEmbeddings: 4096, BOSTokenID: -1,
	}
}

func tinyConfig(t *testing.T) checkpoint.Config {
	t.Helper()
	c, err := model.NamedConfig("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWrittenFolderLoadsAsSynthetic: the folder written for a shape and a
// seed, opened by engine.Open on the CPU, gives bit for bit the logits of
// model.Synthetic of that shape and seed: a prompt prefilled in chunks,
// then greedy decode steps. tiny is split into several shards (the index
// path), the custom shape is one file.
func TestWrittenFolderLoadsAsSynthetic(t *testing.T) {
	cases := []struct {
		name  string
		cfg   checkpoint.Config
		shard int64
		files int
	}{
		{"tiny", tinyConfig(t), 4 << 20, 4},
		{"custom", custom(), 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const seed, chunk = 7, 5
			dir := filepath.Join(t.TempDir(), "model")
			if err := synthwrite.Write(context.Background(), dir, c.cfg, synthwrite.Options{Shape: c.name, Seed: seed, ShardBytes: c.shard}); err != nil {
				t.Fatal(err)
			}
			shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			if len(shards) != c.files {
				t.Errorf("%d shard files %v, want %d", len(shards), shards, c.files)
			}
			e, err := engine.Open(dir, engine.Options{Backend: cpu.New(), Chunk: chunk})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got, want := e.Checkpoint.Config, c.cfg; !reflect.DeepEqual(got, want) {
				t.Errorf("config read back:\n got  %+v\n want %+v", got, want)
			}
			d, err := model.NewDims(&c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			synth, err := model.Synthetic(d, cpu.New(), chunk, seed)
			if err != nil {
				t.Fatal(err)
			}
			prompt := e.Encode("The quick brown fox jumps over the lazy dog")
			prompt = append(prompt, 1, 4095, 17)
			loaded, made := run(t, e.Model, prompt, 4), run(t, synth, prompt, 4)
			if len(loaded) != len(prompt)+4 {
				t.Fatalf("%d rows of logits, want %d", len(loaded), len(prompt)+4)
			}
			for i := range made {
				if !slices.Equal(bits(loaded[i]), bits(made[i])) {
					t.Fatalf("position %d: the loaded model's logits differ from model.Synthetic's", i)
				}
			}
			other, err := model.Synthetic(d, cpu.New(), chunk, seed+1)
			if err != nil {
				t.Fatal(err)
			}
			if o := run(t, other, prompt, 0); slices.Equal(bits(o[0]), bits(made[0])) {
				t.Error("another seed gives the same logits: the comparison proves nothing")
			}
		})
	}
}

// run prefills prompt (every position's logits) then takes steps greedy
// single-token decode steps, returning each position's logits.
func run(t *testing.T, m *model.Model, prompt []int32, steps int) [][]float32 {
	t.Helper()
	s := m.NewState(256)
	var rows [][]float32
	keep := func(_ int, l []float32) { rows = append(rows, slices.Clone(l)) }
	if err := m.Forward(s, prompt, model.AllLogits, keep); err != nil {
		t.Fatal(err)
	}
	for range steps {
		last := rows[len(rows)-1]
		next := int32(0)
		for i, v := range last {
			if v > last[next] {
				next = int32(i)
			}
		}
		if err := m.Forward(s, []int32{next}, model.LastLogits, keep); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// TestWrittenTensors: every tensor in the files holds exactly the bytes
// the layout made, under the multimodal release's names, with config.json's
// quantization giving the routers and shared-expert gates 8 bits.
func TestWrittenTensors(t *testing.T) {
	cfg := tinyConfig(t)
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synthwrite.Write(context.Background(), dir, cfg, synthwrite.Options{Shape: "tiny", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	d, _ := model.NewDims(&cfg)
	layout, err := model.NewSyntheticLayout(d, 3)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ts := range layout.Generate() {
		for _, want := range ts {
			got, ok := ck.Tensor(want.Name)
			if !ok {
				t.Fatalf("tensor %s missing", want.Name)
			}
			if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) {
				t.Errorf("%s: %s %v, want %s %v", want.Name, got.DType, got.Shape, want.DType, want.Shape)
				continue
			}
			var same bool
			switch want.DType {
			case checkpoint.U32:
				same = slices.Equal(got.Uint32s(), want.Words)
			case checkpoint.BF16:
				same = slices.Equal(got.Uint16s(), want.Halves)
			default:
				same = slices.Equal(bits(got.Float32s()), bits(want.Floats))
			}
			if !same {
				t.Errorf("%s: the values written are not the values made", want.Name)
			}
			n++
		}
	}
	if len(ck.Names()) != n {
		t.Errorf("%d tensors in the folder, %d made", len(ck.Names()), n)
	}
	for _, m := range []string{"model.layers.0.mlp.gate", "model.layers.7.mlp.shared_expert_gate"} {
		if q := ck.Quant(m); q.Bits != 8 || q.GroupSize != 64 {
			t.Errorf("%s quantised %+v, want 8 bits in groups of 64", m, q)
		}
	}
	if q := ck.Quant("model.layers.0.mlp.switch_mlp.up_proj"); q.Bits != 4 || q.GroupSize != 64 {
		t.Errorf("experts quantised %+v, want 4 bits in groups of 64", q)
	}
	index, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil || !strings.Contains(string(index), `"language_model.model.layers.0.mlp.gate.weight"`) {
		t.Errorf("index: %v\n%.300s", err, index)
	}
	var conf map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if tc := conf["text_config"].(map[string]any); tc["full_attention_interval"] != 4.0 || tc["tie_word_embeddings"] != false {
		t.Errorf("text_config: interval %v tied %v", tc["full_attention_interval"], tc["tie_word_embeddings"])
	}
}

// TestWriteRefusesAnExistingFolder: a folder that is not empty is left
// alone without Force; with it, only a synthetic folder written before is
// replaced, and an empty folder is filled.
func TestWriteRefusesAnExistingFolder(t *testing.T) {
	cfg := custom()
	root := t.TempDir()
	mine := filepath.Join(root, "mine")
	os.Mkdir(mine, 0o755)
	os.WriteFile(filepath.Join(mine, "notes.txt"), []byte("keep me"), 0o644)
	for _, force := range []bool{false, true} {
		err := synthwrite.Write(context.Background(), mine, cfg, synthwrite.Options{Force: force})
		if err == nil || !strings.Contains(err.Error(), mine) {
			t.Errorf("force %v: writing over a folder of notes: %v", force, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(mine, "notes.txt")); string(data) != "keep me" {
		t.Error("the folder refused was changed")
	}

	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	if err := synthwrite.Write(context.Background(), empty, cfg, synthwrite.Options{Seed: 1}); err != nil {
		t.Fatalf("empty folder: %v", err)
	}
	err := synthwrite.Write(context.Background(), empty, cfg, synthwrite.Options{Seed: 2})
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second write without force: %v", err)
	}
	if err := synthwrite.Write(context.Background(), empty, cfg, synthwrite.Options{Seed: 2, Force: true}); err != nil {
		t.Fatalf("second write with force: %v", err)
	}
	data, _ := os.ReadFile(filepath.Join(empty, "config.json"))
	if !strings.Contains(string(data), `"seed": 2`) {
		t.Errorf("the forced write did not replace the folder:\n%.400s", data)
	}
	leftovers(t, root, "mine", "empty")
}

// TestWriteErrors: an unwritable path, a vocabulary too small for the
// tokenizer and a shape that cannot be quantised fail, naming the problem
// and leaving nothing behind; so does a write interrupted half way.
func TestWriteErrors(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if err := synthwrite.Write(context.Background(), filepath.Join(file, "model"), custom(), synthwrite.Options{}); err == nil {
		t.Error("a folder under a file was written")
	}
	if err := synthwrite.Write(context.Background(), file, custom(), synthwrite.Options{Force: true}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("over a file: %v", err)
	}
	if os.Geteuid() != 0 {
		locked := filepath.Join(root, "locked")
		os.Mkdir(locked, 0o555)
		err := synthwrite.Write(context.Background(), filepath.Join(locked, "model"), custom(), synthwrite.Options{})
		if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), locked) {
			t.Errorf("read-only folder: %v", err)
		}
	}

	small := custom()
	small.VocabSize = 1000
	if err := synthwrite.Write(context.Background(), filepath.Join(root, "small"), small, synthwrite.Options{}); err == nil || !strings.Contains(err.Error(), "1000") {
		t.Errorf("vocabulary of 1000: %v", err)
	}
	odd := custom()
	odd.MoeIntermediateSize = 48
	if err := synthwrite.Write(context.Background(), filepath.Join(root, "odd"), odd, synthwrite.Options{}); err == nil || !strings.Contains(err.Error(), "48") {
		t.Errorf("experts 48 wide: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := synthwrite.Write(ctx, filepath.Join(root, "cut"), tinyConfig(t), synthwrite.Options{ShardBytes: 4 << 20, Progress: func(p synthwrite.Progress) {
		if calls++; p.Written > 6<<20 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted write: %v", err)
	}
	leftovers(t, root, "file", "locked")
}

// leftovers fails on anything in root but the names given: a partial
// folder or one moved aside.
func leftovers(t *testing.T, root string, keep ...string) {
	t.Helper()
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if !slices.Contains(keep, e.Name()) {
			t.Errorf("left behind in %s: %s", root, e.Name())
		}
	}
}
