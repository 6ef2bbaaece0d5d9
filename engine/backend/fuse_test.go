package backend_test

import (
	"testing"

	"petal/engine/backend"
)

type fakeMem struct{ _ byte } // not zero-sized: distinct allocations compare unequal

func (*fakeMem) Backend() string { return "fake" }

// TestDeltaNetStep: a Gated DeltaNet step of one token may be fused where
// its conv and rule outputs are dead: in a program of two layers that share
// those buffers (as the model's do), each layer's step fuses; an op that
// reads the rule's output elsewhere (later, or earlier: the next run's), a
// chunk of two rows, heads other than asked, or a conv of another width
// keep the ops apart.
func TestDeltaNetStep(t *testing.T) {
	const Hk, Hv, D, K = 2, 4, 128, 4
	C, VW := (2*Hk+Hv)*D, Hv*D
	buf := func(n int) backend.Buffer { return backend.Buffer{Mem: &fakeMem{}, Len: n, Type: backend.F32} }
	conv, core, x, z, normed := buf(C), buf(VW), buf(C), buf(VW), buf(VW)
	layer := func(rows, dim int) []backend.Op {
		return []backend.Op{
			&backend.ConvSiLU{X: x, State: buf(3 * C), Weight: buf(4 * C), Out: conv, Rows: rows, Chans: C, K: K},
			&backend.DeltaRule{QKV: conv, B: buf(Hv), A: buf(Hv), ALog: buf(Hv), DtBias: buf(Hv), State: buf(Hv * D * D), Out: core,
				Rows: rows, KeyHeads: Hk, KeyDim: dim, ValueHeads: Hv, ValueDim: dim},
			&backend.GatedRMSNorm{X: core, Z: z, Weight: buf(D), Out: normed, Rows: rows, Heads: Hv, Dim: dim},
			&backend.QLinear{X: normed, Rows: rows},
		}
	}
	fusible := func(ops []backend.Op, i int) bool {
		_, _, _, ok := backend.DeltaNetStep(ops, i, D, K)
		return ok
	}
	two := append(layer(1, D), layer(1, D)...)
	if !fusible(two, 0) || !fusible(two, 4) {
		t.Error("the steps of two layers sharing their buffers are not fused")
	}
	if c, d, g, _ := backend.DeltaNetStep(two, 0, D, K); c != two[0] || d != two[1] || g != two[2] {
		t.Error("the step's ops are not the program's")
	}
	if fusible(two, 1) || fusible(two, 3) || fusible(two, -1) || fusible(two, 6) {
		t.Error("a triple fused from the middle of a step, or out of range")
	}
	reader := append(layer(1, D), &backend.QLinear{X: core, Rows: 1})
	if fusible(reader, 0) {
		t.Error("fused although a later op reads the delta rule's output")
	}
	early := append([]backend.Op{&backend.QLinear{X: conv, Rows: 1}}, layer(1, D)...)
	if fusible(early, 1) {
		t.Error("fused although an earlier op (the next run's) reads the conv's output")
	}
	if fusible(layer(2, D), 0) || fusible(layer(1, 64), 0) {
		t.Error("fused a chunk of two rows, or heads of 64")
	}
	if _, _, _, ok := backend.DeltaNetStep(layer(1, D), 0, D, 3); ok {
		t.Error("fused a conv of width 4 where 3 was asked")
	}
}

// TestReadByOwnProducers: an in_proj's qkv, which a conv GEMM leaves mostly
// unwritten, is dead where only the convs right after the in_projs that
// write it read it (two layers sharing the buffer), and live where another
// op reads it, or a conv reads it after an op that does not write it.
func TestReadByOwnProducers(t *testing.T) {
	buf := func(n int) backend.Buffer { return backend.Buffer{Mem: &fakeMem{}, Len: n, Type: backend.F32} }
	const C = 64
	proj := buf(3 * C)
	qkv := proj.View(0, C)
	layer := func() []backend.Op {
		return []backend.Op{
			&backend.QLinearGroup{X: buf(C), Y: proj, Rows: 1},
			&backend.ConvSiLU{X: qkv, State: buf(3 * C), Weight: buf(4 * C), Out: buf(C), Rows: 1, Chans: C, K: 4},
		}
	}
	two := append(layer(), layer()...)
	if !backend.ReadByOwnProducers(two, []backend.Buffer{qkv}, 1) {
		t.Error("the qkv of two layers' in_proj and conv is live")
	}
	if backend.ReadByOwnProducers(append(two, &backend.QLinear{X: qkv, Rows: 1}), []backend.Buffer{qkv}, 1) {
		t.Error("the qkv is dead although a QLinear reads it")
	}
	conv := two[3]
	if backend.ReadByOwnProducers([]backend.Op{two[0], two[1], &backend.QLinear{X: buf(C), Rows: 1}, conv}, []backend.Buffer{qkv}, 1) {
		t.Error("the qkv is dead although a conv reads it after an op that does not write it")
	}
}
