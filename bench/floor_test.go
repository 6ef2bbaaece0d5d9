package bench

import (
	"math"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/model"
)

func dims35B(t *testing.T) model.Dims {
	t.Helper()
	d, err := model.NamedDims("qwen3.6-35b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestFloorsOfThe35BShape: the floors of issue 10 for the 35B shape: a
// decoded token at 4K reads about 1.66 GB of 4-bit weights plus about
// 0.21 GB of f32 KV and state; a 4K prompt needs about 5.3 GFLOP per
// token, and attention dominates at 128K (about 3x the 4K figure).
func TestFloorsOfThe35BShape(t *testing.T) {
	d := dims35B(t)
	w := float64(ActiveWeightBytes(&d))
	if !within(w, 1.66e9, 0.05) {
		t.Errorf("active weights %.3g bytes, want about 1.66e9", w)
	}
	kv := float64(DecodeBytes(&d, 4096, 4)) - w
	if !within(kv, 0.21e9, 0.15) {
		t.Errorf("KV and state at 4K %.3g bytes, want about 0.21e9", kv)
	}
	if DecodeBytes(&d, 4096, 2) >= DecodeBytes(&d, 4096, 4) {
		t.Error("a bf16 KV cache does not make decode read less")
	}
	f4 := PrefillFLOPs(&d, 4096)
	if !within(f4, 5.3e9, 0.1) {
		t.Errorf("prefill at 4K %.3g FLOP per token, want about 5.3e9", f4)
	}
	f128 := PrefillFLOPs(&d, 128<<10)
	if r := f128 / f4; r < 2.5 || r > 3.5 {
		t.Errorf("prefill at 128K is %.2fx the FLOPs per token of 4K, want about 3x", r)
	}
	t.Logf("weights %.3f GB, KV+state at 4K %.3f GB, prefill %.2f GFLOP/token at 4K, %.2f at 128K", w/1e9, kv/1e9, f4/1e9, f128/1e9)
}

// TestModelWeightBytes: counted from a model's own matrices, the active
// weights of a synthetic model (4-bit, 8-bit routers, as the floor
// assumes) are the bytes its sizes give; a bf16 KV cache reads half the
// K/V bytes.
func TestModelWeightBytes(t *testing.T) {
	m := tinyModel(t, 16)
	if got, want := ModelActiveWeightBytes(m), ActiveWeightBytes(&m.Dims); got != want || got <= 0 {
		t.Errorf("from the matrices %d bytes, from the sizes %d", got, want)
	}
	if got, want := ModelDecodeBytes(m, 100), DecodeBytes(&m.Dims, 100, 4); got != want {
		t.Errorf("decode bytes at 100: %d, want %d", got, want)
	}
}

// shadowedCPU is the CPU backend reporting a bf16 shadow of its f32 KV
// caches, as the CUDA backend does under kvshadow=on.
type shadowedCPU struct{ backend.Backend }

func (shadowedCPU) KVShadowed() bool { return true }

// TestModelDecodeBytesShadow: where the backend keeps a bf16 shadow of an
// f32 KV cache, decode reads the shadow, and the floor counts its bytes.
func TestModelDecodeBytesShadow(t *testing.T) {
	d, err := model.NamedDims("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Synthetic(d, shadowedCPU{cpu.New()}, 16, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ModelDecodeBytes(m, 100), DecodeBytes(&m.Dims, 100, 2); got != want || want >= DecodeBytes(&m.Dims, 100, 4) {
		t.Errorf("decode bytes at 100 with the shadow: %d, want the bf16 cache's %d", got, want)
	}
}
