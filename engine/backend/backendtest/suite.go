package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"petal/engine/backend"
	"petal/engine/quant"
)

// Tolerances are the largest errors Run allows, per op and per element type
// of the buffers the op computes over: the largest |got - want| of an
// output over the root mean square of want (0: the same float32 bits as the
// reference rounded to float32). Ops are checked over f32 buffers; the
// 16-bit entries of Copy are the bars for the element conversions (exact by
// definition, see backend.Round). QKPrep and Attention are checked with
// bf16 KV caches too (a backend must take them): Attention's BF16 bar is
// against the reference over the values the caches hold, which a bf16 cache
// holds exactly; QKPrep's BF16 bar is for the queries, and each key and
// value it writes may be off by its BF16 bar of the output's RMS plus half
// a bf16 unit in the last place of the element (the one rounding the cache
// makes). Attention's output averages the values (its RMS about 1/30 of
// theirs over a few hundred random rows), so float32's rounding of the
// sums reads large against it: CUDA's float32 kernel gave up to 1.05e-5
// on the H200, Metal's through the CUDA dialect 2e-5 at 1000 positions.
var Tolerances = map[string]map[backend.DType]float64{
	"Embed":        {backend.F32: 0},
	"AddRMSNorm":   {backend.F32: 2e-6},
	"QLinear":      {backend.F32: 1e-5},
	"QLinearGroup": {backend.F32: 1e-5},
	"ConvSiLU":     {backend.F32: 2e-6},
	"DeltaRule":    {backend.F32: 2e-5},
	"GatedRMSNorm": {backend.F32: 2e-6},
	"QKPrep":       {backend.F32: 2e-6, backend.BF16: 2e-6},
	"Attention":    {backend.F32: 3e-5, backend.BF16: 3e-5},
	"Route":        {backend.F32: 2e-6},
	"Experts":      {backend.F32: 2e-5},
	"Advance":      {backend.I32: 0},
	"Copy":         {backend.F32: 0, backend.BF16: 0, backend.F16: 0, backend.I32: 0},
}

// ProgramTolerance bounds how far a whole compiled program's results may be
// from running its ops one at a time (a backend may fuse and reorder).
const ProgramTolerance = 1e-5

// Run checks be against the references: every op on fresh random inputs at
// sizes off the warp and tile boundaries (odd rows, widths not multiples of
// 32 where the op allows), its outputs poisoned with NaN before each run so
// an element left unwritten shows; the buffers and conversions; RoPE near
// position 128K; and a whole compiled program against its ops run one at a
// time, in order and in another order that Dependencies allows.
func Run(t *testing.T, be backend.Backend) {
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(&env{t: t, be: be, rng: rand.New(rand.NewPCG(0x5eed, uint64(i)))})
		})
	}
}

// Result is one case of the suite run by Check: its name and what failed
// (nothing when it passed).
type Result struct {
	Name     string   `json:"name"`
	Failures []string `json:"failures,omitempty"`
}

// Check runs the same cases as Run outside a test (for petal doctor): each
// case's failures are collected, and a fatal one ends that case only.
func Check(be backend.Backend) []Result {
	var out []Result
	for i, c := range cases {
		r := &recorder{}
		func() {
			defer func() {
				if v := recover(); v != nil && v != errFatal {
					r.failures = append(r.failures, fmt.Sprintf("panic: %v", v))
				}
			}()
			c.run(&env{t: r, be: be, rng: rand.New(rand.NewPCG(0x5eed, uint64(i)))})
		}()
		out = append(out, Result{Name: c.name, Failures: r.failures})
	}
	return out
}

var cases = []struct {
	name string
	run  func(*env)
}{
	{"buffers", buffers},
	{"Embed", embed},
	{"AddRMSNorm", addRMSNorm},
	{"QLinear", qLinear},
	{"QLinearGroup", qLinearGroup},
	{"ConvSiLU", convSiLU},
	{"DeltaRule", deltaRule},
	{"GatedRMSNorm", gatedRMSNorm},
	{"QKPrep", func(e *env) { qkPrep(e, 37) }},
	{"QKPrep near 128K", func(e *env) { qkPrep(e, 131067) }},
	{"QKPrep bf16 KV", func(e *env) { qkPrepTyped(e, 37, backend.BF16) }},
	{"QKPrep bf16 KV near 128K", func(e *env) { qkPrepTyped(e, 131067, backend.BF16) }},
	{"Attention", attention},
	{"Attention bf16 KV", func(e *env) { attentionTyped(e, backend.BF16) }},
	{"Route", route},
	{"Experts", experts},
	{"Advance", advance},
	{"Sample and Logprobs", sampling},
	{"program", func(e *env) { program(e, backend.F32) }},
	{"program bf16 KV", func(e *env) { program(e, backend.BF16) }},
}

// reporter is what the cases report to: a *testing.T, or a recorder.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
	Error(args ...any)
}

// recorder collects failures; a fatal one unwinds the case (Check
// recovers).
type recorder struct{ failures []string }

var errFatal = fmt.Errorf("backendtest: fatal")

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(errFatal)
}
func (r *recorder) Error(args ...any) { r.failures = append(r.failures, fmt.Sprint(args...)) }
func (r *recorder) Fatal(args ...any) {
	r.failures = append(r.failures, fmt.Sprint(args...))
	panic(errFatal)
}

type env struct {
	t   reporter
	be  backend.Backend
	rng *rand.Rand
}

func (e *env) fatal(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// random is n values uniform in [-scale, scale).
func (e *env) random(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (e.rng.Float32()*2 - 1) * scale
	}
	return v
}

func (e *env) buf(x []float32) backend.Buffer {
	e.t.Helper()
	b, err := backend.AllocFloats(e.be, backend.F32, x)
	e.fatal(err)
	return b
}

// typed is a buffer of type t holding x (rounded to t).
func (e *env) typed(t backend.DType, x []float32) backend.Buffer {
	e.t.Helper()
	b, err := backend.AllocFloats(e.be, t, x)
	e.fatal(err)
	return b
}

func (e *env) ints(x ...int32) backend.Buffer {
	e.t.Helper()
	b, err := backend.AllocInts(e.be, x)
	e.fatal(err)
	return b
}

// poisoned is an f32 buffer of n NaNs.
func (e *env) poisoned(n int) backend.Buffer { return e.buf(nans(n)) }

func nans(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

func (e *env) read(b backend.Buffer) []float32 {
	e.t.Helper()
	v := make([]float32, b.Len)
	e.fatal(e.be.Read(b, v))
	return v
}

func (e *env) readInts(b backend.Buffer) []int32 {
	e.t.Helper()
	v := make([]int32, b.Len)
	e.fatal(e.be.ReadInts(b, v))
	return v
}

// matrix is a random quantised matrix, uploaded, with its dequantised rows.
func (e *env) matrix(experts, rows, cols, bits int) (backend.Matrix, []float64) {
	e.t.Helper()
	m := quant.RandomMatrix(e.rng, experts, rows, cols, bits, 64)
	w, err := e.be.Upload(m)
	e.fatal(err)
	return w, Dequantize(&m)
}

// run compiles ops, runs them once and waits.
func (e *env) run(ops ...backend.Op) {
	e.t.Helper()
	e.fatal(backend.RunOnce(e.be, ops...))
}

// check compares an output with its reference under the op's tolerance.
func (e *env) check(op, what string, got []float32, want []float64) {
	e.t.Helper()
	e.checkTyped(op, backend.F32, what, got, want)
}

// checkTyped is check under the op's bar for element type t.
func (e *env) checkTyped(op string, t backend.DType, what string, got []float32, want []float64) {
	e.t.Helper()
	tol, ok := Tolerances[op][t]
	if !ok {
		e.t.Fatalf("no %s tolerance for %s", t, op)
	}
	if msg := compare(got, want, tol); msg != "" {
		e.t.Errorf("%s %s (%s): %s", op, what, t, msg)
	}
}

// checkRounded compares values a 16-bit buffer of type t holds with their
// reference: within the op's bar for t of the RMS plus half a unit in the
// last place of t at each element, the rounding of the store.
func (e *env) checkRounded(op string, t backend.DType, what string, got []float32, want []float64) {
	e.t.Helper()
	tol := Tolerances[op][t]
	if len(got) != len(want) {
		e.t.Fatalf("%s %s: %d values, want %d", op, what, len(got), len(want))
	}
	var ss float64
	for _, w := range want {
		ss += w * w
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	bits := 8 // bf16: 8 significant bits
	if t == backend.F16 {
		bits = 11
	}
	for i, g := range got {
		if backend.Round(t, g) != g {
			e.t.Fatalf("%s %s (%s): element %d is %g, not a %s value", op, what, t, i, g, t)
		}
		_, exp := math.Frexp(want[i])
		halfULP := math.Ldexp(1, exp-bits-1)
		if d := math.Abs(float64(g) - want[i]); !(d <= tol*rms+halfULP) {
			e.t.Fatalf("%s %s (%s): element %d is %g, want %g within %.3g", op, what, t, i, g, want[i], tol*rms+halfULP)
		}
	}
}

// compare returns "" when got is within tol of want (see Tolerances).
func compare(got []float32, want []float64, tol float64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	var ss float64
	for _, w := range want {
		ss += w * w
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	worst, at := 0.0, -1
	for i, g := range got {
		if g != g {
			return fmt.Sprintf("element %d of %d is NaN (left unwritten?), want %g", i, len(got), want[i])
		}
		if tol == 0 {
			if math.Float32bits(g) != math.Float32bits(float32(want[i])) {
				return fmt.Sprintf("element %d is %g, want exactly %g", i, g, float32(want[i]))
			}
			continue
		}
		if d := math.Abs(float64(g) - want[i]); d > worst {
			worst, at = d, i
		}
	}
	if rms > 0 && worst/rms > tol {
		return fmt.Sprintf("error %.3g of the output's RMS %.3g at element %d (%g, want %g); bar %g", worst/rms, rms, at, got[at], want[at], tol)
	}
	return ""
}

func wide(x []float32) []float64 { return widen(x) }

// buffers: writes, reads and copies between every pair of float types
// round as backend.Round says; ints copy exactly.
func buffers(e *env) {
	vals := append(e.random(37, 3), 65504, 1e-6, -0.0, float32(math.Inf(-1)), 1.0/3)
	floats := []backend.DType{backend.F32, backend.BF16, backend.F16}
	for _, from := range floats {
		src, err := backend.AllocFloats(e.be, from, vals)
		e.fatal(err)
		for _, to := range floats {
			dst, err := backend.AllocFloats(e.be, to, nans(len(vals)))
			e.fatal(err)
			e.fatal(e.be.Copy(dst, src))
			want := make([]float64, len(vals))
			for i, v := range vals {
				want[i] = float64(backend.Round(to, backend.Round(from, v)))
			}
			if msg := compare(e.read(dst), want, Tolerances["Copy"][to]); msg != "" {
				e.t.Errorf("copy %s to %s: %s", from, to, msg)
			}
			e.be.Free(dst)
		}
		e.be.Free(src)
	}
	a, b := e.ints(1, -7, 1<<30), e.ints(0, 0, 0)
	e.fatal(e.be.Copy(b, a))
	if got := e.readInts(b); !slices.Equal(got, []int32{1, -7, 1 << 30}) {
		e.t.Errorf("int copy: %v", got)
	}
	if err := e.be.Write(a, vals[:3]); err == nil {
		e.t.Error("float values written into an i32 buffer")
	}
	if err := e.be.Copy(e.poisoned(3), a); err == nil {
		e.t.Error("an i32 buffer copied into an f32 one")
	}
}

func embed(e *env) {
	const vocab, dim, rows = 53, 192, 5
	table, ref := e.matrix(1, vocab, dim, 4)
	ids := []int32{3, 52, 0, 3, 17}
	o := &backend.Embed{Tokens: e.ints(ids...), Table: table, Out: e.poisoned(rows * dim), Rows: rows}
	e.run(o)
	var want []float64
	for _, id := range ids {
		want = append(want, ref[int(id)*dim:][:dim]...)
	}
	e.check("Embed", "rows", e.read(o.Out), want)
}

func addRMSNorm(e *env) {
	const rows, dim = 3, 100
	for _, withDelta := range []bool{false, true} {
		h, w := e.random(rows*dim, 2), e.random(dim, 1)
		o := &backend.AddRMSNorm{H: e.buf(h), Weight: e.buf(w), Out: e.poisoned(rows * dim), Rows: rows, Dim: dim, Eps: 1e-6}
		var delta []float32
		if withDelta {
			delta = e.random(rows*dim, 1)
			o.Delta = e.buf(delta)
		}
		e.run(o)
		want := AddRMSNorm(h, delta, w, rows, dim, 1e-6)
		e.check("AddRMSNorm", fmt.Sprint("out, delta ", withDelta), e.read(o.Out), want)
		e.check("AddRMSNorm", fmt.Sprint("h, delta ", withDelta), e.read(o.H), wide(h))
	}
}

func qLinear(e *env) {
	const R, C = 67, 320
	for _, bits := range []int{4, 8} {
		for _, rows := range []int{1, 5} {
			w, ref := e.matrix(1, R, C, bits)
			x := e.random(rows*C, 1)
			o := &backend.QLinear{X: e.buf(x), W: w, Y: e.poisoned(rows * R), Rows: rows}
			e.run(o)
			e.check("QLinear", fmt.Sprintf("%d-bit, %d rows", bits, rows), e.read(o.Y), Linear(ref, R, C, x, rows))
		}
	}
}

func qLinearGroup(e *env) {
	const C = 192
	for _, rows := range []int{1, 3} {
		x := e.random(rows*C, 1)
		o := &backend.QLinearGroup{X: e.buf(x), Rows: rows}
		var want []float64
		for i, R := range []int{67, 5, 130, 9} {
			bits := 4
			if i == 2 {
				bits = 8
			}
			w, ref := e.matrix(1, R, C, bits)
			o.W = append(o.W, w)
			want = append(want, Linear(ref, R, C, x, rows)...)
		}
		o.Y = e.poisoned(len(want))
		e.run(o)
		e.check("QLinearGroup", fmt.Sprint(rows, " rows"), e.read(o.Y), want)
	}
}

func convSiLU(e *env) {
	const C = 37
	// width 4 is the model's (a kernel may have a path of its own for it)
	for _, K := range []int{4, 3} {
		w, state := e.random(C*K, 0.5), e.random((K-1)*C, 1)
		o := &backend.ConvSiLU{Weight: e.buf(w), State: e.buf(state), Chans: C, K: K}
		// 100 and 67 rows span several of a GPU's row blocks
		for _, L := range []int{5, 1, 2, 100, 67} {
			x := e.random(L*C, 1)
			o.X, o.Out, o.Rows = e.buf(x), e.poisoned(L*C), L
			e.run(o)
			want := ConvSiLU(x, state, w, L, C, K)
			e.check("ConvSiLU", fmt.Sprint("width ", K, ", ", L, " rows: out"), e.read(o.Out), want)
			e.check("ConvSiLU", fmt.Sprint("width ", K, ", ", L, " rows: state"), e.read(o.State), wide(state))
		}
	}
}

func deltaRule(e *env) {
	const Hk, Dk, Hv, Dv = 2, 24, 4, 20
	aLog := make([]float32, Hv)
	for i := range aLog {
		aLog[i] = float32(math.Log(1 + 15*e.rng.Float64()))
	}
	dtBias, state := e.random(Hv, 0.5), e.random(Hv*Dv*Dk, 0.1)
	o := &backend.DeltaRule{ALog: e.buf(aLog), DtBias: e.buf(dtBias), State: e.buf(state),
		KeyHeads: Hk, KeyDim: Dk, ValueHeads: Hv, ValueDim: Dv}
	for _, rows := range []int{5, 1, 33} {
		qkv, bb, aa := e.random(rows*(2*Hk*Dk+Hv*Dv), 1), e.random(rows*Hv, 2), e.random(rows*Hv, 2)
		o.QKV, o.B, o.A, o.Out, o.Rows = e.buf(qkv), e.buf(bb), e.buf(aa), e.poisoned(rows*Hv*Dv), rows
		e.run(o)
		want := DeltaRule(qkv, bb, aa, aLog, dtBias, state, rows, Hk, Dk, Hv, Dv)
		e.check("DeltaRule", fmt.Sprint(rows, " rows: out"), e.read(o.Out), want)
		got := e.read(o.State)
		e.check("DeltaRule", fmt.Sprint(rows, " rows: state"), got, wide(state))
		copy(state, got) // carry on from the backend's state
	}
}

func gatedRMSNorm(e *env) {
	const rows, heads, dim = 3, 5, 19
	x, z, w := e.random(rows*heads*dim, 2), e.random(rows*heads*dim, 3), e.random(dim, 1)
	o := &backend.GatedRMSNorm{X: e.buf(x), Z: e.buf(z), Weight: e.buf(w), Out: e.poisoned(rows * heads * dim),
		Rows: rows, Heads: heads, Dim: dim, Eps: 1e-6}
	e.run(o)
	e.check("GatedRMSNorm", "out", e.read(o.Out), GatedRMSNorm(x, z, w, rows, heads, dim, 1e-6))
}

// qkPrep at position pos: the queries, and the cache rows the op writes
// (poisoned before; the rows around them must keep their values).
func qkPrep(e *env, pos int) {
	const rows, QH, KVH, D, rot = 3, 6, 2, 40, 24
	const theta = 1e7
	kvW := KVH * D
	capacity := pos + rows + 2
	qg, k, v := e.random(rows*QH*2*D, 2), e.random(rows*kvW, 2), e.random(rows*kvW, 1)
	qn, kn := e.random(D, 1), e.random(D, 1)
	kc, vc := make([]float32, capacity*kvW), make([]float32, capacity*kvW)
	for _, c := range [][]float32{kc, vc} {
		copy(c[(pos-2)*kvW:], e.random(2*kvW, 1))
		copy(c[pos*kvW:], nans(rows*kvW))
		copy(c[(pos+rows)*kvW:], e.random(2*kvW, 1))
	}
	o := &backend.QKPrep{QG: e.buf(qg), K: e.buf(k), V: e.buf(v), QNorm: e.buf(qn), KNorm: e.buf(kn),
		Q: e.poisoned(rows * QH * D), KCache: e.buf(kc), VCache: e.buf(vc), Pos: e.ints(int32(pos)), Rows: rows,
		QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: theta, Eps: 1e-6}
	e.run(o)
	q, keys := QKPrep(qg, k, v, qn, kn, kc, vc, pos, rows, QH, KVH, D, rot, theta, 1e-6)
	e.check("QKPrep", "queries", e.read(o.Q), q)
	gotK, gotV := e.read(o.KCache), e.read(o.VCache)
	lo, hi := (pos-2)*kvW, (pos+rows+2)*kvW
	e.check("QKPrep", "keys", gotK[pos*kvW:(pos+rows)*kvW], keys)
	e.check("QKPrep", "cache rows around the written ones", gotK[lo:pos*kvW], wide(kc[lo:pos*kvW]))
	e.check("QKPrep", "values", gotV[lo:hi], wide(vc[lo:hi]))
	e.check("QKPrep", "cache rows after the written ones", gotK[(pos+rows)*kvW:hi], wide(kc[(pos+rows)*kvW:hi]))
}

// qkPrepTyped is qkPrep with KV caches of type t: the queries under the
// op's bar for t, the rows written rounded once, the others kept.
func qkPrepTyped(e *env, pos int, t backend.DType) {
	const rows, QH, KVH, D, rot = 3, 6, 2, 40, 24
	const theta = 1e7
	kvW := KVH * D
	capacity := pos + rows + 2
	qg, k, v := e.random(rows*QH*2*D, 2), e.random(rows*kvW, 2), e.random(rows*kvW, 1)
	qn, kn := e.random(D, 1), e.random(D, 1)
	kc, vc := make([]float32, capacity*kvW), make([]float32, capacity*kvW)
	for _, c := range [][]float32{kc, vc} {
		copy(c[(pos-2)*kvW:], e.random(2*kvW, 1))
		copy(c[pos*kvW:], nans(rows*kvW))
		copy(c[(pos+rows)*kvW:], e.random(2*kvW, 1))
		for i := range c {
			c[i] = backend.Round(t, c[i])
		}
	}
	o := &backend.QKPrep{QG: e.buf(qg), K: e.buf(k), V: e.buf(v), QNorm: e.buf(qn), KNorm: e.buf(kn),
		Q: e.poisoned(rows * QH * D), KCache: e.typed(t, kc), VCache: e.typed(t, vc), Pos: e.ints(int32(pos)), Rows: rows,
		QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: theta, Eps: 1e-6}
	e.run(o)
	around := slices.Clone(vc)
	q, keys := QKPrep(qg, k, v, qn, kn, kc, vc, pos, rows, QH, KVH, D, rot, theta, 1e-6)
	e.checkTyped("QKPrep", t, "queries", e.read(o.Q), q)
	gotK, gotV := e.read(o.KCache), e.read(o.VCache)
	lo, hi := (pos-2)*kvW, (pos+rows+2)*kvW
	e.checkRounded("QKPrep", t, "keys", gotK[pos*kvW:(pos+rows)*kvW], keys)
	e.checkRounded("QKPrep", t, "values", gotV[pos*kvW:(pos+rows)*kvW], wide(v))
	e.check("QKPrep", "cache rows before the written ones", gotK[lo:pos*kvW], wide(kc[lo:pos*kvW]))
	e.check("QKPrep", "cache rows after the written ones", gotK[(pos+rows)*kvW:hi], wide(kc[(pos+rows)*kvW:hi]))
	e.check("QKPrep", "value rows around the written ones", append(gotV[lo:pos*kvW:pos*kvW], gotV[(pos+rows)*kvW:hi]...),
		wide(append(around[lo:pos*kvW:pos*kvW], around[(pos+rows)*kvW:hi]...)))
}

// attentionTyped is attention over KV caches of type t, against the
// reference over the values they hold.
func attentionTyped(e *env, t backend.DType) {
	for _, c := range []struct{ rows, pos, QH, KVH, D int }{{3, 70, 6, 2, 40}, {1, 130, 8, 1, 72}, {5, 0, 3, 3, 9}, {2, 9, 4, 2, 256}} {
		kvW := c.KVH * c.D
		n := c.pos + c.rows
		q, qg := e.random(c.rows*c.QH*c.D, 1), e.random(c.rows*c.QH*2*c.D, 2)
		kc, vc := append(e.random(n*kvW, 3), nans(3*kvW)...), append(e.random(n*kvW, 1), nans(3*kvW)...)
		for i := range kc {
			kc[i], vc[i] = backend.Round(t, kc[i]), backend.Round(t, vc[i])
		}
		o := &backend.Attention{Q: e.buf(q), QG: e.buf(qg), KCache: e.typed(t, kc), VCache: e.typed(t, vc),
			Out: e.poisoned(c.rows * c.QH * c.D), Pos: e.ints(int32(c.pos)), Rows: c.rows,
			QHeads: c.QH, KVHeads: c.KVH, HeadDim: c.D}
		e.run(o)
		e.checkTyped("Attention", t, fmt.Sprintf("%+v", c), e.read(o.Out), Attention(q, qg, kc, vc, c.pos, c.rows, c.QH, c.KVH, c.D))
	}
}

// attention: the cache rows past the last position are NaN, so reading them
// shows.
func attention(e *env) {
	for _, c := range []struct{ rows, pos, QH, KVH, D int }{{3, 70, 6, 2, 40}, {1, 130, 8, 1, 72}, {5, 0, 3, 3, 9}} {
		kvW := c.KVH * c.D
		n := c.pos + c.rows
		q, qg := e.random(c.rows*c.QH*c.D, 1), e.random(c.rows*c.QH*2*c.D, 2)
		kc, vc := append(e.random(n*kvW, 3), nans(3*kvW)...), append(e.random(n*kvW, 1), nans(3*kvW)...)
		o := &backend.Attention{Q: e.buf(q), QG: e.buf(qg), KCache: e.buf(kc), VCache: e.buf(vc),
			Out: e.poisoned(c.rows * c.QH * c.D), Pos: e.ints(int32(c.pos)), Rows: c.rows,
			QHeads: c.QH, KVHeads: c.KVH, HeadDim: c.D}
		e.run(o)
		e.check("Attention", fmt.Sprintf("%+v", c), e.read(o.Out), Attention(q, qg, kc, vc, c.pos, c.rows, c.QH, c.KVH, c.D))
	}
}

func route(e *env) {
	const rows, E, C, topK = 5, 13, 192, 3
	for _, normalize := range []bool{true, false} {
		router, ref := e.matrix(1, E, C, 8)
		x := e.random(rows*C, 1)
		idxBuf, err := backend.AllocInts(e.be, slices.Repeat([]int32{-1}, rows*topK))
		e.fatal(err)
		o := &backend.Route{X: e.buf(x), Router: router, Idx: idxBuf, Weights: e.poisoned(rows * topK),
			Rows: rows, TopK: topK, Normalize: normalize}
		e.run(o)
		idx, wts := Route(ref, E, C, x, rows, topK, normalize)
		if got := e.readInts(o.Idx); !slices.Equal(got, idx) {
			e.t.Errorf("Route (normalize %v): experts %v, want %v", normalize, got, idx)
		}
		e.check("Route", fmt.Sprint("weights, normalize ", normalize), e.read(o.Weights), wts)
	}
}

func experts(e *env) {
	const E, dim, inter, sharedInter, topK = 7, 192, 128, 192, 3
	gate, gRef := e.matrix(E, inter, dim, 4)
	up, uRef := e.matrix(E, inter, dim, 4)
	down, dRef := e.matrix(E, dim, inter, 4)
	sGate, sgRef := e.matrix(1, sharedInter, dim, 4)
	sUp, suRef := e.matrix(1, sharedInter, dim, 4)
	sDown, sdRef := e.matrix(1, dim, sharedInter, 4)
	seg, segRef := e.matrix(1, 1, dim, 8)
	for _, rows := range []int{1, 4} {
		x := e.random(rows*dim, 1)
		var idx []int32
		wts := e.random(rows*topK, 1)
		for range rows {
			for _, ex := range e.rng.Perm(E)[:topK] {
				idx = append(idx, int32(ex))
			}
		}
		o := &backend.Experts{X: e.buf(x), Idx: e.ints(idx...), Weights: e.buf(wts), Gate: gate, Up: up, Down: down,
			SharedGate: sGate, SharedUp: sUp, SharedDown: sDown, SharedExpertGate: seg,
			Out: e.poisoned(rows * dim), Rows: rows, TopK: topK, Inter: inter, SharedInter: sharedInter}
		e.run(o)
		want := make([]float64, rows*dim)
		for r := range rows {
			xr := x[r*dim : (r+1)*dim]
			for k := range topK {
				ex := int(idx[r*topK+k])
				y := SwiGLU(gRef[ex*inter*dim:][:inter*dim], uRef[ex*inter*dim:][:inter*dim], dRef[ex*dim*inter:][:dim*inter], inter, dim, xr)
				for i, v := range y {
					want[r*dim+i] += float64(wts[r*topK+k]) * v
				}
			}
			s := sigmoid(Linear(segRef, 1, dim, xr, 1)[0])
			for i, v := range SwiGLU(sgRef, suRef, sdRef, sharedInter, dim, xr) {
				want[r*dim+i] += s * v
			}
		}
		e.check("Experts", fmt.Sprint(rows, " rows"), e.read(o.Out), want)
	}
}

func advance(e *env) {
	pos := e.ints(5)
	e.run(&backend.Advance{Pos: pos, By: 3}, &backend.Advance{Pos: pos, By: 1})
	if got := e.readInts(pos); got[0] != 9 {
		e.t.Errorf("position 5 advanced by 3 and 1: %d", got[0])
	}
}
