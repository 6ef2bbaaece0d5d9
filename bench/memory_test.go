package bench

import (
	"errors"
	"strings"
	"testing"

	"petal/engine/model"
)

// TestCheckMemoryRefuses35B: the 35B shape's need, against 11.2 GB
// available, is refused with a message naming both; with room, or where the
// memory is not known, it is allowed.
func TestCheckMemoryRefuses35B(t *testing.T) {
	d, err := model.NamedDims("qwen3.6-35b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	need := EstimateNeed(&d, model.SyntheticWeightBytes(d), 512, 4096, Options{DecodeTokens: 32})
	if total := float64(need.Total()) / 1e9; total < 19 || total > 22 {
		t.Errorf("35B at 4K needs %.1f GB, want about 20", total)
	}
	small := func() (Memory, bool) { return Memory{Bytes: 11.2e9, Kind: "available"}, true }
	err = CheckMemory("synthetic qwen3.6-35b-a3b", need, small)
	var me *MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("refusal %v, want a MemoryError", err)
	}
	for _, part := range []string{"synthetic qwen3.6-35b-a3b needs about", "this machine has 11.2 GB available", "weights"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("message %q lacks %q", err, part)
		}
	}
	big := func() (Memory, bool) { return Memory{Bytes: 64e9, Kind: "installed"}, true }
	if err := CheckMemory("synthetic qwen3.6-35b-a3b", need, big); err != nil {
		t.Errorf("64 GB refused: %v", err)
	}
	unknown := func() (Memory, bool) { return Memory{}, false }
	if err := CheckMemory("synthetic qwen3.6-35b-a3b", need, unknown); err != nil {
		t.Errorf("unknown memory refused: %v", err)
	}
}

// TestEstimateNeedKV: the KV cache grows with the context, by the 35B's 10
// full-attention layers of 2 KV heads x 256 for K and for V, in float32.
func TestEstimateNeedKV(t *testing.T) {
	d, _ := model.NamedDims("qwen3.6-35b-a3b")
	o := Options{DecodeTokens: 31}
	a := EstimateNeed(&d, 0, 512, 1024, o)
	b := EstimateNeed(&d, 0, 512, 2048, o)
	if a.Context != 1056 || b.KVCache-a.KVCache != 1024*10*2*512*4 {
		t.Errorf("context %d, KV %d then %d", a.Context, a.KVCache, b.KVCache)
	}
	full := EstimateNeed(&d, 0, 512, 1024, Options{DecodeTokens: 31, PrefillContext: true, Repeats: 2})
	if full.Snapshot != full.KVCache+full.State {
		t.Errorf("a prefilled, repeated decode copies the state: snapshot %d, state %d", full.Snapshot, full.KVCache+full.State)
	}
}
