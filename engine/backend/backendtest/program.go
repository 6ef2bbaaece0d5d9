package backendtest

import (
	"math/rand/v2"

	"petal/engine/backend"
)

// layers is a small model's decode step over its own buffers: embed; a
// gated-attention mixer; a Gated DeltaNet mixer; a mixture of experts;
// advance. outputs are the buffers whose contents are compared: the
// residual stream, the states and caches, the position.
type layers struct {
	ops     []backend.Op
	outputs []backend.Buffer
	tokens  backend.Buffer
}

// newLayers builds the step from seed, so two calls give identical ops over
// separate, identical buffers; the KV caches are of type kv.
func newLayers(e *env, seed uint64, kv backend.DType) *layers {
	e = &env{t: e.t, be: e.be, rng: rand.New(rand.NewPCG(seed, 1))}
	const (
		vocab, H, maxPos               = 41, 128, 12
		QH, KVH, D, rot                = 4, 2, 32, 12
		Hk, Dk, Hv, Dv, K              = 2, 16, 4, 16, 4
		E, inter, sInter, topK         = 5, 64, 128, 2
		eps                    float32 = 1e-6
	)
	mat := func(experts, rows, cols, bits int) backend.Matrix {
		m, _ := e.matrix(experts, rows, cols, bits)
		return m
	}
	vec := func(n int, scale float32) backend.Buffer { return e.buf(e.random(n, scale)) }
	ones := func(n int) backend.Buffer {
		v := e.random(n, 0.1)
		for i := range v {
			v[i] += 1
		}
		return e.buf(v)
	}
	l := &layers{tokens: e.ints(7)}
	pos := e.ints(0)
	h, a, r := e.poisoned(H), e.poisoned(H), e.poisoned(H)
	kc, vc := e.typed(kv, nans(maxPos*KVH*D)), e.typed(kv, nans(maxPos*KVH*D))
	QW, KW := QH*2*D, KVH*D
	proj := e.poisoned(QW + 2*KW)
	q, attn := e.poisoned(QH*D), e.poisoned(QH*D)
	C, VW := 2*Hk*Dk+Hv*Dv, Hv*Dv
	dproj := e.poisoned(C + VW + 2*Hv)
	conv, core, normed := e.poisoned(C), e.poisoned(VW), e.poisoned(VW)
	convState, recur := vec((K-1)*C, 1), vec(Hv*Dv*Dk, 0.1)
	idx, wts := e.ints(0, 0), e.poisoned(topK)
	aLog := e.random(Hv, 1)
	for i := range aLog {
		aLog[i] += 1.5
	}
	l.ops = []backend.Op{
		&backend.Embed{Tokens: l.tokens, Table: mat(1, vocab, H, 4), Out: h, Rows: 1},
		&backend.AddRMSNorm{H: h, Weight: ones(H), Out: a, Rows: 1, Dim: H, Eps: eps},
		&backend.QLinearGroup{X: a, W: []backend.Matrix{mat(1, QW, H, 4), mat(1, KW, H, 4), mat(1, KW, H, 4)}, Y: proj, Rows: 1},
		&backend.QKPrep{QG: proj.View(0, QW), K: proj.View(QW, KW), V: proj.View(QW+KW, KW), QNorm: ones(D), KNorm: ones(D),
			Q: q, KCache: kc, VCache: vc, Pos: pos, Rows: 1, QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e4, Eps: eps},
		&backend.Attention{Q: q, QG: proj.View(0, QW), KCache: kc, VCache: vc, Out: attn, Pos: pos, Rows: 1, QHeads: QH, KVHeads: KVH, HeadDim: D},
		&backend.QLinear{X: attn, W: mat(1, H, QH*D, 4), Y: r, Rows: 1},
		&backend.AddRMSNorm{H: h, Delta: r, Weight: ones(H), Out: a, Rows: 1, Dim: H, Eps: eps},
		&backend.QLinearGroup{X: a, W: []backend.Matrix{mat(1, C, H, 4), mat(1, VW, H, 4), mat(1, Hv, H, 4), mat(1, Hv, H, 4)}, Y: dproj, Rows: 1},
		&backend.ConvSiLU{X: dproj.View(0, C), State: convState, Weight: vec(C*K, 0.5), Out: conv, Rows: 1, Chans: C, K: K},
		&backend.DeltaRule{QKV: conv, B: dproj.View(C+VW, Hv), A: dproj.View(C+VW+Hv, Hv), ALog: e.buf(aLog), DtBias: vec(Hv, 0.5),
			State: recur, Out: core, Rows: 1, KeyHeads: Hk, KeyDim: Dk, ValueHeads: Hv, ValueDim: Dv},
		&backend.GatedRMSNorm{X: core, Z: dproj.View(C, VW), Weight: ones(Dv), Out: normed, Rows: 1, Heads: Hv, Dim: Dv, Eps: eps},
		&backend.QLinear{X: normed, W: mat(1, H, VW, 4), Y: r, Rows: 1},
		&backend.AddRMSNorm{H: h, Delta: r, Weight: ones(H), Out: a, Rows: 1, Dim: H, Eps: eps},
		&backend.Route{X: a, Router: mat(1, E, H, 8), Idx: idx, Weights: wts, Rows: 1, TopK: topK, Normalize: true},
		&backend.Experts{X: a, Idx: idx, Weights: wts, Gate: mat(E, inter, H, 4), Up: mat(E, inter, H, 4), Down: mat(E, H, inter, 4),
			SharedGate: mat(1, sInter, H, 4), SharedUp: mat(1, sInter, H, 4), SharedDown: mat(1, H, sInter, 4),
			SharedExpertGate: mat(1, 1, H, 8), Out: r, Rows: 1, TopK: topK, Inter: inter, SharedInter: sInter},
		&backend.AddRMSNorm{H: h, Delta: r, Weight: ones(H), Out: a, Rows: 1, Dim: H, Eps: eps},
		&backend.Advance{Pos: pos, By: 1},
	}
	l.outputs = []backend.Buffer{h, a, convState, recur, kc.View(0, 4*KW), vc.View(0, 4*KW)}
	return l
}

// steps is how many decode steps program runs; the KV rows it fills are
// the ones compared.
const steps = 4

// program: the step compiled as one program and run steps times equals its
// ops compiled and run one at a time, in order and in the order that takes,
// among the ops Dependencies says are ready, the latest first; with KV
// caches of type kv.
func program(e *env, kv backend.DType) {
	tokens := []int32{7, 3, 40, 0}
	whole := newLayers(e, 1, kv)
	p, err := e.be.Compile(whole.ops)
	e.fatal(err)
	for _, tok := range tokens {
		e.fatal(e.be.WriteInts(whole.tokens, []int32{tok}))
		e.fatal(p.Run())
	}
	e.fatal(e.be.Sync())
	deps := backend.Dependencies(whole.ops)
	for _, order := range [][]int{inOrder(len(whole.ops)), latestReady(deps)} {
		single := newLayers(e, 1, kv)
		progs := make([]backend.Program, len(single.ops))
		for i, op := range single.ops {
			progs[i], err = e.be.Compile([]backend.Op{op})
			e.fatal(err)
		}
		for _, tok := range tokens {
			e.fatal(e.be.WriteInts(single.tokens, []int32{tok}))
			for _, i := range order {
				e.fatal(progs[i].Run())
			}
		}
		for j, out := range whole.outputs {
			if msg := compare(e.read(out), wide(e.read(single.outputs[j])), ProgramTolerance); msg != "" {
				e.t.Errorf("output %d of the compiled program against its ops one at a time in order %v: %s", j, order, msg)
			}
		}
	}
}

func inOrder(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	return o
}

// latestReady is a topological order of the dependency lists that runs the
// latest op whose dependencies are done first.
func latestReady(deps [][]int) []int {
	done := make([]bool, len(deps))
	var order []int
	for len(order) < len(deps) {
		for i := len(deps) - 1; i >= 0; i-- {
			if done[i] {
				continue
			}
			ready := true
			for _, d := range deps[i] {
				ready = ready && done[d]
			}
			if ready {
				done[i] = true
				order = append(order, i)
				break
			}
		}
	}
	return order
}
