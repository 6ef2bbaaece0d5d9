package cuda

import (
	"math"
	"slices"
	"testing"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/model"
	"petal/engine/oracle/oracletest"
)

// TestSnapshotRoundTripOnGPU: a session's state read from the GPU
// (Snapshot) and written back into a new state (Import) continues exactly
// as the state it came from: the next tokens' logits, over prompt chunks
// and one-token decode steps, are the same bits; with f32 and bf16 KV
// caches. (The snapshot file format itself is engine/session's; this is
// the device side of it.)
func TestSnapshotRoundTripOnGPU(t *testing.T) {
	gpu(t)
	for _, kv := range []backend.DType{backend.F32, backend.BF16} {
		t.Run("kv="+kv.String(), func(t *testing.T) {
			o := DefaultOptions()
			o.KV = kv
			be := testBackend(t, o)
			e, err := engine.Open("../../fixtures/tiny-qwen36-moe-4bit", engine.Options{Backend: be, Chunk: 16})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := e.Model
			ids := make([]int32, 60)
			for i := range ids {
				ids[i] = int32((i*37 + 11) % m.Dims.Vocab)
			}
			orig := m.NewState(128)
			defer orig.Free(be)
			if err := m.Forward(orig, ids[:41], model.NoLogits, nil); err != nil {
				t.Fatal(err)
			}
			data, err := m.Snapshot(orig)
			if err != nil {
				t.Fatal(err)
			}
			copied, err := m.Import(data, 128)
			if err != nil {
				t.Fatal(err)
			}
			defer copied.Free(be)
			if copied.Pos() != orig.Pos() {
				t.Fatalf("imported state at position %d, the original at %d", copied.Pos(), orig.Pos())
			}
			// a chunk of 13 tokens, then single tokens
			for _, span := range [][2]int{{41, 54}, {54, 55}, {55, 56}, {56, 60}} {
				a := oracletest.AllLogits(t, m, orig, ids[span[0]:span[1]])
				b := oracletest.AllLogits(t, m, copied, ids[span[0]:span[1]])
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
						t.Fatalf("tokens %d..%d: logit %d is %v after the round trip, %v without", span[0], span[1], i, b[i], a[i])
					}
				}
			}
			// and the states themselves, read back after all that, agree
			sa, err := m.Snapshot(orig)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := m.Snapshot(copied)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sa.Tokens, sb.Tokens) || sa.KV != sb.KV {
				t.Fatalf("tokens or KV type differ: %d and %d tokens, %v and %v", len(sa.Tokens), len(sb.Tokens), sa.KV, sb.KV)
			}
			for part, pair := range map[string][2][][]float32{"K": {sa.K, sb.K}, "V": {sa.V, sb.V}, "conv": {sa.Conv, sb.Conv}, "recurrent": {sa.Recur, sb.Recur}} {
				for l := range pair[0] {
					x, y := pair[0][l], pair[1][l]
					if len(x) != len(y) {
						t.Fatalf("%s of layer %d: %d and %d values", part, l, len(x), len(y))
					}
					for i := range x {
						if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
							t.Fatalf("%s of layer %d differs at %d: %v and %v", part, l, i, x[i], y[i])
						}
					}
				}
			}
		})
	}
}
