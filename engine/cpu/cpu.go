// Package cpu is the pure-Go backend: float32 throughout, parallel over
// output rows on all cores, weights read in place from the memory map. It is
// the executable specification that the GPU backends are tested against, so
// it stays plain; speed comes from not wasting work, not from cleverness.
package cpu

import (
	"fmt"
	"slices"
	"time"

	"petal/engine/backend"
	"petal/engine/quant"
	"petal/engine/sample"
)

// Backend runs ops on the host, one op at a time (its kernels share task
// and scratch memory): use one Backend per model.
type Backend struct {
	scratch scratch
	tasks   tasks

	// Which form of the gated delta rule runs (Options.DeltaRule), and the
	// block length of the chunked one.
	deltaForm  deltaForm
	deltaChunk int

	kv      backend.DType // element type of the KV caches models keep here
	sampler sample.Kernel // the sampling ops' scratch
}

// Options choose among kernels that compute the same thing, for ablations.
type Options struct {
	// DeltaRule is the form of the gated delta rule: "sequential" (token by
	// token, spec 2.5; also ""), "chunked" (blocks of DeltaChunk tokens,
	// spec 2.6), or "auto" (chunked only for ops long enough that it
	// measured faster, see deltachunk.go).
	DeltaRule string
	// DeltaChunk is the block length of the chunked form, 1 to 128; 0 is 16.
	DeltaChunk int
	// KV is the element type of the KV caches (backend.KVCacheTyper): F32
	// (also 0) or BF16, which halves the bytes attention reads per token.
	KV backend.DType
}

// tasks hold each kernel's arguments and its row function, bound once, so
// handing work to parallel.For allocates nothing.
type tasks struct {
	norm                 normTask
	gatedNorm            gatedNormTask
	conv                 convTask
	delta                deltaTask
	prep                 prepTask
	attn                 attnTask
	normFn, gatedNormFn  func(lo, hi int)
	convFn               func(lo, hi int)
	deltaNormFn, deltaFn func(lo, hi int)
	deltaNormHeadsFn     func(lo, hi int)
	deltaGramFn          func(lo, hi int)
	deltaChunkFn         func(lo, hi int)
	prepFn, attnFn       func(lo, hi int)
	experts              expertsTask
	expertsFn            func(lo, hi int)
	linears              linearsTask
	linearsFn            func(lo, hi int)
}

// New returns a CPU backend with the default Options.
func New() *Backend {
	b, _ := NewWithOptions(Options{})
	return b
}

// NewWithOptions returns a CPU backend with the given kernel choices.
func NewWithOptions(o Options) (*Backend, error) {
	form, err := parseDeltaForm(o.DeltaRule)
	if err != nil {
		return nil, err
	}
	if o.DeltaChunk == 0 {
		o.DeltaChunk = defaultDeltaChunk
	}
	if o.DeltaChunk < 1 || o.DeltaChunk > maxDeltaChunk {
		return nil, fmt.Errorf("cpu: delta rule block of %d tokens, want 1 to %d", o.DeltaChunk, maxDeltaChunk)
	}
	switch o.KV {
	case 0:
		o.KV = backend.F32
	case backend.F32, backend.BF16:
	default:
		return nil, fmt.Errorf("cpu: KV caches of element type %s, want f32 or bf16", o.KV)
	}
	b := &Backend{deltaForm: form, deltaChunk: o.DeltaChunk, kv: o.KV}
	t := &b.tasks
	t.normFn, t.gatedNormFn, t.convFn = t.norm.run, t.gatedNorm.run, t.conv.run
	t.deltaNormFn, t.deltaFn = t.delta.normalize, t.delta.run
	t.deltaNormHeadsFn, t.deltaGramFn, t.deltaChunkFn = t.delta.normalizeHeads, t.delta.grams, t.delta.runChunked
	t.prepFn, t.attnFn = t.prep.run, t.attn.run
	t.expertsFn = t.experts.run
	t.linearsFn = t.linears.run
	return b, nil
}

// memory is one allocation; exactly one slice is set, by element type:
// bf16 and f16 are stored as their 16-bit patterns, as a GPU stores them.
type memory struct {
	f []float32
	i []int32
	h []uint16
}

func (*memory) Backend() string { return "cpu" }

// matrix is a bound weight: the checkpoint's own bytes.
type matrix struct{ m quant.Matrix }

func (w *matrix) Shape() quant.Matrix { return w.m }

func (b *Backend) Name() string { return "cpu" }

// KVCacheType is the element type of the KV caches (Options.KV).
func (b *Backend) KVCacheType() backend.DType { return b.kv }

func (b *Backend) Alloc(n int, t backend.DType) (backend.Buffer, error) {
	if err := backend.CheckAlloc(n, t); err != nil {
		return backend.Buffer{}, err
	}
	m := &memory{}
	switch t {
	case backend.F32:
		m.f = make([]float32, n)
	case backend.I32:
		m.i = make([]int32, n)
	default:
		m.h = make([]uint16, n)
	}
	return backend.Buffer{Mem: m, Len: n, Type: t}, nil
}

func (b *Backend) Free(buf backend.Buffer) {
	if m, ok := buf.Mem.(*memory); ok {
		m.f, m.i, m.h = nil, nil, nil
	}
}

func (b *Backend) Upload(m quant.Matrix) (backend.Matrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &matrix{m}, nil
}

// mine checks that buf is an allocation of this backend still held.
func mine(buf backend.Buffer) error {
	m, ok := buf.Mem.(*memory)
	if !ok {
		return fmt.Errorf("cpu: a buffer of another backend")
	}
	if m.f == nil && m.i == nil && m.h == nil && buf.Len > 0 {
		return fmt.Errorf("cpu: a freed buffer")
	}
	return nil
}

func (b *Backend) Write(dst backend.Buffer, src []float32) error {
	if err := hostCheck(dst, len(src), false); err != nil {
		return err
	}
	switch dst.Type {
	case backend.F32:
		copy(F(dst), src)
	case backend.BF16, backend.F16:
		backend.Narrow(dst.Type, src, H(dst))
	}
	return nil
}

func (b *Backend) WriteInts(dst backend.Buffer, src []int32) error {
	if err := hostCheck(dst, len(src), true); err != nil {
		return err
	}
	copy(I(dst), src)
	return nil
}

func (b *Backend) Read(src backend.Buffer, dst []float32) error {
	if err := hostCheck(src, len(dst), false); err != nil {
		return err
	}
	widen(src, dst)
	return nil
}

func (b *Backend) ReadInts(src backend.Buffer, dst []int32) error {
	if err := hostCheck(src, len(dst), true); err != nil {
		return err
	}
	copy(dst, I(src))
	return nil
}

func hostCheck(buf backend.Buffer, n int, ints bool) error {
	if err := backend.CheckHost(buf, n, ints); err != nil {
		return err
	}
	return mine(buf)
}

// widen sets dst to the values of the float buffer src.
func widen(src backend.Buffer, dst []float32) {
	switch src.Type {
	case backend.F32:
		copy(dst, F(src))
	case backend.BF16:
		for i, h := range H(src) {
			dst[i] = backend.Float32FromBF16(h)
		}
	case backend.F16:
		for i, h := range H(src) {
			dst[i] = backend.Float32FromF16(h)
		}
	}
}

// Copy copies between buffers, converting float types as Write does.
func (b *Backend) Copy(dst, src backend.Buffer) error {
	if err := backend.CheckCopy(dst, src); err != nil {
		return err
	}
	if err := mine(dst); err != nil {
		return err
	}
	if err := mine(src); err != nil {
		return err
	}
	switch {
	case dst.Type == src.Type && dst.Type == backend.I32:
		copy(I(dst), I(src))
	case dst.Type == src.Type && dst.Type == backend.F32:
		copy(F(dst), F(src))
	case dst.Type == src.Type:
		copy(H(dst), H(src))
	case dst.Type == backend.F32:
		widen(src, F(dst))
	case src.Type == backend.F32:
		narrow(F(src), dst)
	default: // between the 16-bit types: through float32, which holds both exactly
		h := H(src)
		tmp := b.scratch.get(slotCopy, len(h))
		widen(src, tmp)
		narrow(tmp, dst)
	}
	return nil
}

// narrow rounds src into the 16-bit float buffer dst.
func narrow(src []float32, dst backend.Buffer) { backend.Narrow(dst.Type, src, H(dst)) }

// F is the float32 slice behind a CPU buffer.
func F(b backend.Buffer) []float32 {
	if b.Type != backend.F32 {
		panic("cpu: float32 view of a " + b.Type.String() + " buffer")
	}
	return b.Mem.(*memory).f[b.Offset : b.Offset+b.Len : b.Offset+b.Len]
}

// I is the int32 slice behind a CPU buffer.
func I(b backend.Buffer) []int32 {
	if b.Type != backend.I32 {
		panic("cpu: int32 view of a " + b.Type.String() + " buffer")
	}
	return b.Mem.(*memory).i[b.Offset : b.Offset+b.Len : b.Offset+b.Len]
}

// H is the 16-bit patterns behind a CPU bf16 or f16 buffer.
func H(b backend.Buffer) []uint16 {
	if b.Type != backend.BF16 && b.Type != backend.F16 {
		panic("cpu: 16-bit view of a " + b.Type.String() + " buffer")
	}
	return b.Mem.(*memory).h[b.Offset : b.Offset+b.Len : b.Offset+b.Len]
}

func q(m backend.Matrix) *quant.Matrix { return &m.(*matrix).m }

// program is a compiled op list: the CPU runs it as given, so compiling
// only checks it.
type program struct {
	b   *Backend
	ops []backend.Op
}

func (p *program) Run() error        { return p.b.Run(p.ops...) }
func (p *program) Ops() []backend.Op { return p.ops }

// Compile checks that every op is one the CPU runs, over buffers of this
// backend of the element types its kernels take (f32, i32 for indices).
func (b *Backend) Compile(ops []backend.Op) (backend.Program, error) {
	for i, op := range ops {
		if err := checkOp(op); err != nil {
			return nil, fmt.Errorf("cpu: op %d (%s): %w", i, op.Name(), err)
		}
	}
	return &program{b: b, ops: slices.Clone(ops)}, nil
}

func checkOp(op backend.Op) error {
	switch op.(type) {
	case *backend.QLinearGroup:
		if err := checkGroup(op.(*backend.QLinearGroup)); err != nil {
			return err
		}
	case *backend.Embed, *backend.AddRMSNorm, *backend.QLinear, *backend.ConvSiLU, *backend.DeltaRule,
		*backend.GatedRMSNorm, *backend.QKPrep, *backend.Attention, *backend.Route, *backend.Experts,
		*backend.Advance:
	case *backend.Sample, *backend.Logprobs:
		if err := checkSampling(op); err != nil {
			return err
		}
	default:
		return fmt.Errorf("not implemented")
	}
	caches := kvCaches(op)
	if len(caches) > 0 {
		if err := checkCaches(op, caches); err != nil {
			return err
		}
	}
	r, w := op.Access()
	for _, buf := range append(r, w...) {
		if buf.Mem == nil {
			return fmt.Errorf("a buffer is missing")
		}
		if err := mine(buf); err != nil {
			return err
		}
		if buf.Type != backend.F32 && buf.Type != backend.I32 && !slices.Contains(caches, buf) {
			return fmt.Errorf("a %s buffer; the CPU ops take f32 (Copy converts), and 16-bit KV caches", buf.Type)
		}
	}
	return nil
}

// kvCaches are the KV cache buffers an op takes, which may be 16-bit.
func kvCaches(op backend.Op) []backend.Buffer {
	switch o := op.(type) {
	case *backend.QKPrep:
		return []backend.Buffer{o.KCache, o.VCache}
	case *backend.Attention:
		return []backend.Buffer{o.KCache, o.VCache}
	}
	return nil
}

// checkCaches: K and V caches of one float type; 16-bit ones for heads
// whose rows fit the kernels' stack buffers.
func checkCaches(op backend.Op, caches []backend.Buffer) error {
	k, v := caches[0], caches[1]
	if k.Type != v.Type || !k.Type.IsFloat() {
		return fmt.Errorf("K and V caches of element types %s and %s, want one float type", k.Type, v.Type)
	}
	var d int
	switch o := op.(type) {
	case *backend.QKPrep:
		d = o.HeadDim
	case *backend.Attention:
		d = o.HeadDim
	}
	if k.Type != backend.F32 && d > maxWideHead {
		return fmt.Errorf("%s KV caches with heads of %d values; the CPU takes 16-bit caches up to %d", k.Type, d, maxWideHead)
	}
	return nil
}

// checkGroup: the matrices of a QLinearGroup share the input's width and
// their outputs fill Y.
func checkGroup(o *backend.QLinearGroup) error {
	if len(o.W) == 0 {
		return fmt.Errorf("no matrices")
	}
	for i, m := range o.W {
		if w := q(m); w.Cols != q(o.W[0]).Cols || o.X.Len != o.Rows*w.Cols {
			return fmt.Errorf("matrix %d is %d wide, the input %d rows of %d values", i, w.Cols, o.Rows, o.X.Len/max(o.Rows, 1))
		}
	}
	if off := o.Offsets(); off[len(o.W)] != o.Y.Len {
		return fmt.Errorf("outputs of %d values for a %d-value buffer", off[len(o.W)], o.Y.Len)
	}
	return nil
}

// ProfiledRun runs a program of this backend op by op, adding each op's
// wall time to times (backend.Profiler). The CPU neither fuses nor
// overlaps ops, so each time is that op's alone.
func (b *Backend) ProfiledRun(p backend.Program, times []time.Duration) error {
	prog, ok := p.(*program)
	if !ok || prog.b != b {
		return fmt.Errorf("cpu: profiling a program of another backend")
	}
	if len(times) != len(prog.ops) {
		return fmt.Errorf("cpu: %d times for a program of %d ops", len(times), len(prog.ops))
	}
	for i, op := range prog.ops {
		start := time.Now()
		if err := b.Run(op); err != nil {
			return err
		}
		times[i] += time.Since(start)
	}
	return nil
}

// Sync returns at once: Run has done the work before it returns.
func (b *Backend) Sync() error { return nil }

// Run executes ops in order, now. It is what a compiled program does, and
// a way to run ops once without compiling them.
func (b *Backend) Run(ops ...backend.Op) error {
	for _, op := range ops {
		var err error
		switch o := op.(type) {
		case *backend.QLinear:
			b.linear(q(o.W), F(o.X), o.Rows, F(o.Y))
		case *backend.QLinearGroup:
			b.linearGroup(o)
		case *backend.Embed:
			b.embed(o)
		case *backend.AddRMSNorm:
			b.addRMSNorm(o)
		case *backend.ConvSiLU:
			b.convSiLU(o)
		case *backend.DeltaRule:
			b.deltaRule(o)
		case *backend.GatedRMSNorm:
			b.gatedRMSNorm(o)
		case *backend.QKPrep:
			err = b.qkPrep(o)
		case *backend.Attention:
			err = b.attention(o)
		case *backend.Route:
			b.route(o)
		case *backend.Experts:
			b.experts(o)
		case *backend.Advance:
			I(o.Pos)[0] += int32(o.By)
		case *backend.Sample:
			b.sample(o)
		case *backend.Logprobs:
			err = b.logprobs(o)
		default:
			err = fmt.Errorf("not implemented")
		}
		if err != nil {
			return fmt.Errorf("cpu: %s: %w", op.Name(), err)
		}
	}
	return nil
}

// scratch holds temporary host memory reused across calls, so the decode
// loop allocates nothing once it has warmed up.
type scratch struct {
	bufs [slotCount][]float32
}

func (s *scratch) get(slot, n int) []float32 {
	if cap(s.bufs[slot]) < n {
		s.bufs[slot] = make([]float32, n)
	}
	return s.bufs[slot][:n]
}

// scratch slots: each kernel family uses its own, so one op's temporaries
// never alias another's within a Run.
const (
	slotDelta = iota
	slotRoute
	slotExpertX
	slotExpertH
	slotExpertY
	slotShared
	slotExpertTmp
	slotDeltaChunk
	slotCopy
	slotCount
)
