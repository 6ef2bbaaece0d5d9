package cuda

import (
	"testing"

	"petal/engine/backend"
)

type fakeMem struct{ _ byte } // not zero-sized: distinct allocations compare unequal

func (*fakeMem) Backend() string { return "fake" }

// TestGDNFusible: a Gated DeltaNet step of one token is fused where its
// conv and rule outputs are dead: in a program of two layers that share
// those buffers (as the model's do), each layer's step fuses; an op that
// reads the rule's output elsewhere, a chunk of two rows, or heads of 64
// keep the ops apart.
func TestGDNFusible(t *testing.T) {
	const Hk, Hv, D = 2, 4, GDNHeadDim
	C, VW := (2*Hk+Hv)*D, Hv*D
	buf := func(n int) backend.Buffer { return backend.Buffer{Mem: &fakeMem{}, Len: n, Type: backend.F32} }
	conv, core, x, z, normed := buf(C), buf(VW), buf(C), buf(VW), buf(VW)
	layer := func(rows, dim int) []backend.Op {
		return []backend.Op{
			&backend.ConvSiLU{X: x, State: buf(3 * C), Weight: buf(4 * C), Out: conv, Rows: rows, Chans: C, K: 4},
			&backend.DeltaRule{QKV: conv, B: buf(Hv), A: buf(Hv), ALog: buf(Hv), DtBias: buf(Hv), State: buf(Hv * D * D), Out: core,
				Rows: rows, KeyHeads: Hk, KeyDim: dim, ValueHeads: Hv, ValueDim: dim},
			&backend.GatedRMSNorm{X: core, Z: z, Weight: buf(D), Out: normed, Rows: rows, Heads: Hv, Dim: dim},
			&backend.QLinear{X: normed, Rows: rows},
		}
	}
	two := append(layer(1, D), layer(1, D)...)
	if !gdnFusible(two, 0) || !gdnFusible(two, 4) {
		t.Error("the steps of two layers sharing their buffers are not fused")
	}
	if gdnFusible(two, 1) || gdnFusible(two, 3) {
		t.Error("a triple fused from the middle of a step")
	}
	reader := append(layer(1, D), &backend.QLinear{X: core, Rows: 1})
	if gdnFusible(reader, 0) {
		t.Error("fused although a later op reads the delta rule's output")
	}
	early := append([]backend.Op{&backend.QLinear{X: conv, Rows: 1}}, layer(1, D)...)
	if gdnFusible(early, 1) {
		t.Error("fused although an earlier op (the next run's) reads the conv's output")
	}
	if gdnFusible(layer(2, D), 0) || gdnFusible(layer(1, 64), 0) {
		t.Error("fused a chunk of two rows, or heads of 64")
	}
}
