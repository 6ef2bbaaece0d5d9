package model

import (
	"fmt"
	"time"

	"petal/engine/backend"
	"petal/engine/checkpoint"
)

// Model is a bound model ready to run on one backend.
type Model struct {
	Dims  Dims
	W     *Weights
	Chunk int // most tokens run through the model at once; bounds temporary memory

	// Trace, when set, receives the hidden states of every position of each
	// chunk at each stage, numbered as the oracle numbers them: 0 the
	// embeddings, 1..Layers the residual stream after each layer, Layers+1
	// the final-norm output. Diagnostic: it reads back from the device.
	Trace func(stage int, rows int, h []float32)

	// KV is the element type of the KV caches of new states: the backend's
	// setting (backend.KVCacheTyper), else F32.
	KV backend.DType
	// Profile, when set, receives the time of every op of each Forward by
	// its label, on a backend that times ops (backend.Profiler).
	// Diagnostic: timing op by op may be slower than a plain run.
	Profile *Profile

	// FullKV sizes a state's KV caches for its whole MaxContext on first
	// use, rather than growing them by doubling: no program is compiled
	// twice for a cache that grew. For a maximum context the user chose.
	FullKV bool

	be        backend.Backend
	spare     *State         // the last state freed, kept for the next (see State.Free)
	zeros     backend.Buffer // f32 zeros, for clearing a state taken over
	ws        workspace
	logitsAll backend.Buffer // [min(Chunk, AllLogitsChunk), vocab], allocated on first use
	host      []float32      // read-back buffer for logits
	sampler   *Sampler       // decode.go, allocated on first use
	tokenHost [1]int32       // staging for one-value writes
}

// Load binds a checkpoint's weights on a backend. chunk bounds how many
// tokens one pass processes (and so the temporary memory).
func Load(ck *checkpoint.Checkpoint, be backend.Backend, chunk int) (*Model, error) {
	if chunk < 1 {
		return nil, fmt.Errorf("model: chunk size %d, want at least 1", chunk)
	}
	d, err := NewDims(&ck.Config)
	if err != nil {
		return nil, err
	}
	w, err := BindWeights(ck, be, d)
	if err != nil {
		return nil, err
	}
	m := newModel(d, w, chunk, be)
	if m.ws, err = newWorkspace(be, &d, chunk); err != nil {
		return nil, err
	}
	return m, nil
}

func newModel(d Dims, w *Weights, chunk int, be backend.Backend) *Model {
	kv := backend.F32
	if t, ok := be.(backend.KVCacheTyper); ok {
		kv = t.KVCacheType()
	}
	return &Model{Dims: d, W: w, Chunk: chunk, KV: kv, be: be}
}

// Backend is the backend the model runs on.
func (m *Model) Backend() backend.Backend { return m.be }

// Logits selects which positions of a Forward call produce logits.
type Logits int

const (
	NoLogits     Logits = iota // only advance the state
	LastLogits                 // the last position (generation)
	AllLogits                  // every position (scoring)
	DeviceLogits               // the last position's, left on the device for a sampling op (decode.go)
)

// Forward runs tokens through the model after what the state already holds,
// in chunks of at most m.Chunk, and hands each requested row of logits to
// emit with its absolute position (the row predicts the token after it).
// The slice passed to emit is reused; copy what must be kept.
func (m *Model) Forward(s *State, tokens []int32, want Logits, emit func(pos int, logits []float32)) error {
	if err := m.reserve(s, s.Pos()+len(tokens)); err != nil {
		return err
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= m.Dims.Vocab {
			return fmt.Errorf("model: token id %d outside the vocabulary of %d", t, m.Dims.Vocab)
		}
	}
	step := m.chunkFor(want)
	for start := 0; start < len(tokens); start += step {
		chunk := tokens[start:min(start+step, len(tokens))]
		if err := m.runChunk(s, chunk, chunkMode(want, start+len(chunk), len(tokens)), emit); err != nil {
			return err
		}
	}
	return nil
}

// AllLogitsChunk bounds the chunks of a Forward that wants every
// position's logits (scoring): its logits buffer holds a chunk's rows of
// vocabulary floats, 3.8 GiB at 4096 tokens for a vocabulary of 248K,
// where a GPU's long chunks (16384 on CUDA) would make it 15.2.
const AllLogitsChunk = 4096

// chunkFor is the chunk length of a Forward that wants want.
func (m *Model) chunkFor(want Logits) int {
	if want == AllLogits {
		return min(m.Chunk, AllLogitsChunk)
	}
	return m.Chunk
}

// Prepare records and compiles, ahead of Forward, the chunk programs that
// a Forward of tokens more tokens into s with want would use, and keeps
// them in s as Forward would; a Forward then starts at once. (The bench
// times it apart, to tell compiling from running.)
func (m *Model) Prepare(s *State, tokens int, want Logits) error {
	if err := m.reserve(s, s.Pos()+tokens); err != nil {
		return err
	}
	if m.Trace != nil {
		return nil // a traced Forward records its programs each time
	}
	step := m.chunkFor(want)
	for start := 0; start < tokens; start += step {
		n := min(step, tokens-start)
		if _, err := m.chunkProgram(s, n, chunkMode(want, start+n, tokens)); err != nil {
			return err
		}
	}
	return nil
}

// chunkMode is the logits a chunk ending at token end of total asks for:
// the last row's only of the last chunk.
func chunkMode(want Logits, end, total int) Logits {
	if (want == LastLogits || want == DeviceLogits) && end < total {
		return NoLogits
	}
	return want
}

// chunkProgram is s's program for chunks of n tokens with mode, recorded
// and compiled the first time it is asked for.
func (m *Model) chunkProgram(s *State, n int, mode Logits) (*program, error) {
	if p := s.programs[programKey(n, mode)]; p != nil {
		return p, nil
	}
	p, err := m.record(s, n, mode, false)
	if err != nil {
		return nil, err
	}
	s.programs[programKey(n, mode)] = p
	return p, nil
}

func (m *Model) runChunk(s *State, chunk []int32, mode Logits, emit func(int, []float32)) error {
	n, pos0 := len(chunk), s.Pos()
	var p *program
	var err error
	if m.Trace != nil {
		p, err = m.record(s, n, mode, true)
	} else {
		p, err = m.chunkProgram(s, n, mode)
	}
	if err != nil {
		return err
	}
	if err := m.be.WriteInts(m.ws.tokens.View(0, n), chunk); err != nil {
		return err
	}
	for i, prog := range p.compiled {
		if err := m.run(prog); err != nil {
			return err
		}
		if m.Trace != nil {
			out := m.ws.h
			if i == len(p.segments)-1 {
				out = m.ws.a
			}
			buf := make([]float32, n*m.Dims.Hidden)
			if err := m.be.Read(out.Rows(0, n, m.Dims.Hidden), buf); err != nil {
				return err
			}
			m.Trace(i, n, buf)
		}
	}
	s.Tokens = append(s.Tokens, chunk...)
	switch mode {
	case LastLogits:
		m.host = grow(m.host, m.Dims.Vocab)
		if err := m.be.Read(m.ws.logits, m.host); err != nil {
			return err
		}
		emit(pos0+n-1, m.host)
	case AllLogits:
		V := m.Dims.Vocab
		m.host = grow(m.host, n*V)
		if err := m.be.Read(m.logitsAll.Rows(0, n, V), m.host); err != nil {
			return err
		}
		for i := range n {
			emit(pos0+i, m.host[i*V:(i+1)*V])
		}
	}
	return nil
}

// RunProgram runs a compiled program of this model (a decode step, say),
// op by op into the profile when there is one.
func (m *Model) RunProgram(prog backend.Program) error { return m.run(prog) }

// run runs a compiled program, op by op into the profile when there is one.
func (m *Model) run(prog backend.Program) error {
	if m.Profile == nil {
		return prog.Run()
	}
	pr, ok := m.be.(backend.Profiler)
	if !ok {
		return fmt.Errorf("model: the %s backend cannot time ops one by one", m.be.Name())
	}
	ops := prog.Ops()
	times := make([]time.Duration, len(ops))
	if err := pr.ProfiledRun(prog, times); err != nil {
		return err
	}
	m.Profile.add(ops, times)
	return nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func programKey(n int, mode Logits) int { return n*4 + int(mode) }

// program is the forward pass of one chunk length, recorded and compiled
// once and run unchanged at every position: the position is read from the
// state's device buffer, which the last op advances.
type program struct {
	segments [][]backend.Op    // when tracing one per stage (see Model.Trace), else one
	compiled []backend.Program // one per segment
	ops      []backend.Op      // the segment being recorded
}

// add records op under label (see backend.Labeled).
func (p *program) add(label string, op backend.Op) {
	op.(interface{ SetLabel(string) }).SetLabel(label)
	p.ops = append(p.ops, op)
}

// tailLabel labels the ops that follow the logits (sampling, decode.go).
func tailLabel(op backend.Op) string {
	switch op.(type) {
	case *backend.Sample:
		return "head.sample"
	case *backend.Logprobs:
		return "head.logprobs"
	}
	return "head." + op.Name()
}

func (p *program) cut() {
	p.segments = append(p.segments, p.ops)
	p.ops = nil
}

// record writes down the forward pass for n tokens: embed, then per layer
// norm, token mixer, residual, norm, mixture of experts, residual; final
// norm; logits; then the tail ops (sampling, decode.go), and the advance.
func (m *Model) record(s *State, n int, mode Logits, trace bool, tail ...backend.Op) (*program, error) {
	d, w, ws := &m.Dims, m.W, &m.ws
	p := &program{}
	H := d.Hidden
	h, a, r := ws.h.Rows(0, n, H), ws.a.Rows(0, n, H), ws.r.Rows(0, n, H)

	p.add("embed", &backend.Embed{Tokens: ws.tokens.View(0, n), Table: w.Embed, Out: h, Rows: n})
	if trace {
		p.cut()
	}
	var pending backend.Buffer // the last MoE output, not yet added to h
	for i, l := range w.Layers {
		L := fmt.Sprintf("L%d.", i)
		p.add(L+"input_norm", &backend.AddRMSNorm{H: h, Delta: pending, Weight: l.InputNorm, Out: a, Rows: n, Dim: H, Eps: d.Eps})
		if l.Attn != nil {
			m.gatedAttention(p, L, s, i, l.Attn, a, r, n)
		} else {
			m.gatedDeltaNet(p, L, s, i, l.DeltaNet, a, r, n)
		}
		p.add(L+"post_norm", &backend.AddRMSNorm{H: h, Delta: r, Weight: l.PostNorm, Out: a, Rows: n, Dim: H, Eps: d.Eps})
		m.mixtureOfExperts(p, L, &l.MoE, a, r, n)
		pending = r
		if trace { // settle the residual so the layer's output can be read
			p.add(L+"trace_norm", &backend.AddRMSNorm{H: h, Delta: r, Weight: w.FinalNorm, Out: a, Rows: n, Dim: H, Eps: d.Eps})
			pending = backend.Buffer{}
			p.cut()
		}
	}
	p.add("final_norm", &backend.AddRMSNorm{H: h, Delta: pending, Weight: w.FinalNorm, Out: a, Rows: n, Dim: H, Eps: d.Eps})
	switch mode {
	case LastLogits, DeviceLogits:
		p.add("head.logits", &backend.QLinear{X: a.Rows(n-1, 1, H), W: w.LMHead, Y: ws.logits, Rows: 1})
	case AllLogits:
		if m.logitsAll.Mem == nil {
			var err error
			if m.logitsAll, err = m.be.Alloc(m.chunkFor(AllLogits)*d.Vocab, backend.F32); err != nil {
				return nil, err
			}
		}
		p.add("head.logits", &backend.QLinear{X: a, W: w.LMHead, Y: m.logitsAll.Rows(0, n, d.Vocab), Rows: n})
	}
	for _, op := range tail {
		p.add(tailLabel(op), op)
	}
	p.add("advance", &backend.Advance{Pos: s.pos, By: n})
	p.cut()
	for i, seg := range p.segments {
		prog, err := m.be.Compile(seg)
		if err != nil {
			return nil, fmt.Errorf("model: compiling the forward pass of %d tokens (part %d): %w", n, i, err)
		}
		p.compiled = append(p.compiled, prog)
	}
	return p, nil
}

// gatedAttention: projections, q/k norm and RoPE into the cache, causal GQA
// attention gated by sigmoid, output projection. (spec 2.4)
func (m *Model) gatedAttention(p *program, L string, s *State, i int, w *AttnWeights, a, out backend.Buffer, n int) {
	d, ws := &m.Dims, &m.ws
	QW, KW := d.QHeads*2*d.HeadDim, d.kvWidth()
	proj := ws.attnProj.View(0, n*(QW+2*KW)) // q (with gates), k, v side by side
	qg, k, v := proj.View(0, n*QW), proj.View(n*QW, n*KW), proj.View(n*(QW+KW), n*KW)
	q, o := ws.q.Rows(0, n, d.QHeads*d.HeadDim), ws.attn.Rows(0, n, d.QHeads*d.HeadDim)

	p.add(L+"attn.qkv_proj", &backend.QLinearGroup{X: a, W: []backend.Matrix{w.QProj, w.KProj, w.VProj}, Y: proj, Rows: n})
	prep := &backend.QKPrep{QG: qg, K: k, V: v, QNorm: w.QNorm, KNorm: w.KNorm, Q: q,
		KCache: s.KCache[i], VCache: s.VCache[i], Pos: s.pos, Rows: n,
		QHeads: d.QHeads, KVHeads: d.KVHeads, HeadDim: d.HeadDim, RotaryDim: d.RotaryDim,
		RopeTheta: d.RopeTheta, Eps: d.Eps}
	attn := &backend.Attention{Q: q, QG: qg, KCache: s.KCache[i], VCache: s.VCache[i], Out: o, Pos: s.pos, Rows: n,
		QHeads: d.QHeads, KVHeads: d.KVHeads, HeadDim: d.HeadDim}
	p.add(L+"attn.qk_prep", prep)
	p.add(L+"attn.sdpa", attn)
	p.add(L+"attn.o_proj", &backend.QLinear{X: o, W: w.OProj, Y: out, Rows: n})
}

// gatedDeltaNet: projections, causal conv + SiLU, the gated delta rule over
// the recurrent state, gated RMSNorm, output projection. (spec 2.5)
func (m *Model) gatedDeltaNet(p *program, L string, s *State, i int, w *DeltaNetWeights, a, out backend.Buffer, n int) {
	d, ws := &m.Dims, &m.ws
	C, VW, Hv := d.ConvChannels(), d.ValueWidth(), d.ValueHeads
	proj := ws.deltaProj.View(0, n*(C+VW+2*Hv)) // qkv, z, b, a side by side
	qkv, z := proj.View(0, n*C), proj.View(n*C, n*VW)
	beta, decay := proj.View(n*(C+VW), n*Hv), proj.View(n*(C+VW+Hv), n*Hv)
	conv := ws.conv.Rows(0, n, C)
	core, normed := ws.core.Rows(0, n, VW), ws.normed.Rows(0, n, VW)

	p.add(L+"delta.in_proj", &backend.QLinearGroup{X: a, W: []backend.Matrix{w.InQKV, w.InZ, w.InB, w.InA}, Y: proj, Rows: n})
	p.add(L+"delta.conv", &backend.ConvSiLU{X: qkv, State: s.Conv[i], Weight: w.Conv, Out: conv, Rows: n, Chans: C, K: d.ConvK})
	p.add(L+"delta.rule", &backend.DeltaRule{QKV: conv, B: beta, A: decay, ALog: w.ALog, DtBias: w.DtBias,
		State: s.Recur[i], Out: core, Rows: n,
		KeyHeads: d.KeyHeads, KeyDim: d.KeyDim, ValueHeads: d.ValueHeads, ValueDim: d.ValueDim})
	p.add(L+"delta.norm", &backend.GatedRMSNorm{X: core, Z: z, Weight: w.Norm, Out: normed, Rows: n,
		Heads: d.ValueHeads, Dim: d.ValueDim, Eps: d.Eps})
	p.add(L+"delta.out_proj", &backend.QLinear{X: normed, W: w.OutProj, Y: out, Rows: n})
}

// mixtureOfExperts: route each token to its top-k experts and add the gated
// shared expert. (spec 2.8)
func (m *Model) mixtureOfExperts(p *program, L string, w *MoEWeights, a, out backend.Buffer, n int) {
	d, ws := &m.Dims, &m.ws
	idx, wts := ws.expertIdx.Rows(0, n, d.TopK), ws.expertWts.Rows(0, n, d.TopK)
	p.add(L+"moe.router", &backend.Route{X: a, Router: w.Router, Idx: idx, Weights: wts, Rows: n, TopK: d.TopK, Normalize: d.NormTopK})
	p.add(L+"moe.experts", &backend.Experts{X: a, Idx: idx, Weights: wts, Gate: w.Gate, Up: w.Up, Down: w.Down,
		SharedGate: w.SharedGate, SharedUp: w.SharedUp, SharedDown: w.SharedDown,
		SharedExpertGate: w.SharedExpertGate, Out: out, Rows: n, TopK: d.TopK,
		Inter: d.Inter, SharedInter: d.SharedInter})
}

// workspace holds the activations of one chunk; every layer reuses it.
type workspace struct {
	tokens               backend.Buffer // int [chunk]
	h, a, r              backend.Buffer // [chunk, hidden]: residual stream, normed input, mixer/MoE output
	attnProj, q, attn    backend.Buffer // gated attention: [qg | k | v] of the chunk, queries, output
	deltaProj, conv      backend.Buffer // Gated DeltaNet: [qkv | z | b | a] of the chunk, conv output
	core, normed         backend.Buffer
	expertIdx, expertWts backend.Buffer // routing
	logits               backend.Buffer // [vocab] for the last position
}

func newWorkspace(be backend.Backend, d *Dims, chunk int) (workspace, error) {
	var errs []error
	var held []backend.Buffer
	alloc := func(n int, t backend.DType) backend.Buffer {
		b, err := be.Alloc(n, t)
		if err != nil {
			errs = append(errs, err)
		} else {
			held = append(held, b)
		}
		return b
	}
	f := func(width int) backend.Buffer { return alloc(chunk*width, backend.F32) }
	ws := workspace{
		tokens: alloc(chunk, backend.I32),
		h:      f(d.Hidden), a: f(d.Hidden), r: f(d.Hidden),
		attnProj: f(d.QHeads*2*d.HeadDim + 2*d.kvWidth()),
		q:        f(d.QHeads * d.HeadDim), attn: f(d.QHeads * d.HeadDim),
		deltaProj: f(d.ConvChannels() + d.ValueWidth() + 2*d.ValueHeads),
		conv:      f(d.ConvChannels()),
		core:      f(d.ValueWidth()), normed: f(d.ValueWidth()),
		expertIdx: alloc(chunk*d.TopK, backend.I32), expertWts: f(d.TopK),
		logits: alloc(d.Vocab, backend.F32),
	}
	if len(errs) > 0 {
		for _, b := range held {
			be.Free(b)
		}
		return workspace{}, fmt.Errorf("model: workspace of a %d-token chunk: %w", chunk, errs[0])
	}
	return ws, nil
}
