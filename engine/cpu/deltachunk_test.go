package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
)

// mulIntoPlain is mulInto by its definition, in float64.
func mulIntoPlain(c []float32, ldc int, a strided, b []float32, ldb, m, n, k int, s rowScales) {
	for i := range m {
		cs, rs := s.at(i)
		for j := range n {
			var acc float64
			for p := range k {
				acc += float64(a.x[i*a.row+p*a.col]) * float64(b[p*ldb+j])
			}
			v := float64(rs) * acc
			if s.keep {
				v += float64(cs) * float64(c[i*ldc+j])
			}
			c[i*ldc+j] = float32(v)
		}
	}
}

// TestMulIntoMatchesPlain: whole tiles and ragged edges, a read row-wise
// and transposed, k = 0, both ways of treating C. C starts as NaN where it
// is not read, and NaN fills the gaps between its rows, so a stray read or
// write shows.
func TestMulIntoMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ m, n, k int }{{4, 16, 128}, {8, 32, 1}, {9, 35, 17}, {3, 5, 2}, {4, 16, 0}, {128, 128, 64}} {
		for _, transposed := range []bool{false, true} {
			for _, keep := range []bool{false, true} {
				name := fmt.Sprintf("%dx%dx%d/transposed=%v/keep=%v", c.m, c.n, c.k, transposed, keep)
				ldc, ldb := c.n+3, c.n+1
				a := strided{randomVec(rng, c.m*c.k+1), c.k, 1}
				if transposed {
					a = strided{a.x, 1, c.m}
				}
				b := randomVec(rng, c.k*ldb+1)
				got := poison(c.m * ldc)
				s := rowScales{keep: keep, c: randomVec(rng, c.m), rAll: 0.5 + rng.Float32()}
				if keep {
					for i := range c.m {
						copy(got[i*ldc:][:c.n], randomVec(rng, c.n))
					}
				}
				want := append([]float32(nil), got...)
				mulInto(got, ldc, a, b, ldb, c.m, c.n, c.k, s)
				mulIntoPlain(want, ldc, a, b, ldb, c.m, c.n, c.k, s)
				for i := range c.m {
					for j := range ldc {
						g, w := got[i*ldc+j], want[i*ldc+j]
						if j >= c.n {
							if !math.IsNaN(float64(g)) {
								t.Fatalf("%s: wrote %v between rows at (%d, %d)", name, g, i, j)
							}
							continue
						}
						if !(math.Abs(float64(g-w)) <= 1e-5*(1+math.Abs(float64(w)))*math.Sqrt(float64(c.k+1))) {
							t.Fatalf("%s: C[%d][%d] = %v, want %v", name, i, j, g, w)
						}
					}
				}
			}
		}
	}
}

// deltaInputs are the inputs of one DeltaRule op.
type deltaInputs struct {
	hk, dk, hv, dv, rows             int
	qkv, bb, aa, aLog, dtBias, state []float32
}

// randomDeltaInputs draws fresh inputs; slow gives gates near 1, so the
// state remembers across many tokens (the regime of a trained model), and
// otherwise the gates are anywhere in (0.1, 0.8).
func randomDeltaInputs(rng *rand.Rand, hk, dk, hv, dv, rows int, slow bool) deltaInputs {
	in := deltaInputs{hk: hk, dk: dk, hv: hv, dv: dv, rows: rows,
		qkv: randomVec(rng, rows*(2*hk*dk+hv*dv)), bb: randomVec(rng, rows*hv), aa: randomVec(rng, rows*hv),
		aLog: randomVec(rng, hv), dtBias: randomVec(rng, hv), state: randomVec(rng, hv*dv*dk)}
	if slow {
		for i := range in.aLog {
			in.aLog[i] -= 4
		}
	}
	return in
}

// run applies one DeltaRule op on be to a copy of the inputs' state and
// returns the outputs and the new state.
func (in deltaInputs) run(t testing.TB, be *Backend) (out, state []float32) {
	buf := func(x []float32) backend.Buffer {
		m := be.Alloc(len(x), false)
		be.Write(m, x)
		return m
	}
	o := &backend.DeltaRule{QKV: buf(in.qkv), B: buf(in.bb), A: buf(in.aa), ALog: buf(in.aLog),
		DtBias: buf(in.dtBias), State: buf(in.state), Out: buf(poison(in.rows * in.hv * in.dv)), Rows: in.rows,
		KeyHeads: in.hk, KeyDim: in.dk, ValueHeads: in.hv, ValueDim: in.dv}
	if err := be.Run(o); err != nil {
		t.Fatal(err)
	}
	return F(o.Out), F(o.State)
}

// relErr is max|got-want| / max|want|: the error relative to the size of
// the tensor, which stays meaningful where single elements are near zero.
// NaN anywhere gives +Inf.
func relErr(got, want []float32) float64 {
	var d, m float64
	for i, w := range want {
		g := float64(got[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			return math.Inf(1)
		}
		d = max(d, math.Abs(g-float64(w)))
		m = max(m, math.Abs(float64(w)))
	}
	return d / m
}

func newChunked(t testing.TB, chunk int) *Backend {
	be, err := NewWithOptions(Options{DeltaRule: "chunked", DeltaChunk: chunk})
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestDeltaChunkedMatchesSequential: the chunked form against the token by
// token one on fresh random inputs with a random initial state, for token
// counts below, at and past the block length, blocks of several lengths,
// grouped value heads and sizes on and off the tile edges.
func TestDeltaChunkedMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	shapes := []struct{ hk, dk, hv, dv int }{{2, 16, 4, 16}, {4, 128, 8, 128}, {1, 24, 3, 40}, {1, 5, 2, 3}}
	for _, sh := range shapes {
		for _, chunk := range []int{64, 32, 128, 5} {
			if chunk != 64 && sh.dk == 128 && testing.Short() {
				continue
			}
			for _, rows := range []int{1, 5, 63, 64, 65, 200} {
				for _, slow := range []bool{false, true} {
					name := fmt.Sprintf("%+v/C=%d/T=%d/slow=%v", sh, chunk, rows, slow)
					in := randomDeltaInputs(rng, sh.hk, sh.dk, sh.hv, sh.dv, rows, slow)
					wantOut, wantState := in.run(t, New())
					gotOut, gotState := in.run(t, newChunked(t, chunk))
					eo, es := relErr(gotOut, wantOut), relErr(gotState, wantState)
					if !(eo <= 1e-5 && es <= 1e-5) {
						t.Errorf("%s: relative error %.2g in the outputs, %.2g in the state; want <= 1e-5", name, eo, es)
					}
				}
			}
		}
	}
}

// TestDeltaChunkedCarriesState: an op split into several calls gives what
// one call gives, so the state leaves a call in the layout it came in.
func TestDeltaChunkedCarriesState(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	in := randomDeltaInputs(rng, 2, 32, 4, 48, 150, true)
	wantOut, wantState := in.run(t, New())
	be := newChunked(t, 32)
	width := 2*in.hk*in.dk + in.hv*in.dv
	state := in.state
	var gotOut []float32
	for _, part := range [][2]int{{0, 70}, {70, 71}, {71, 150}} {
		p := in
		p.rows = part[1] - part[0]
		p.qkv = in.qkv[part[0]*width : part[1]*width]
		p.bb, p.aa = in.bb[part[0]*in.hv:part[1]*in.hv], in.aa[part[0]*in.hv:part[1]*in.hv]
		p.state = state
		out, s := p.run(t, be)
		gotOut, state = append(gotOut, out...), s
	}
	if e := relErr(gotOut, wantOut); !(e <= 1e-5) {
		t.Errorf("outputs: relative error %.2g", e)
	}
	if e := relErr(state, wantState); !(e <= 1e-5) {
		t.Errorf("state: relative error %.2g", e)
	}
}

func TestNewWithOptionsRejects(t *testing.T) {
	for _, o := range []Options{{DeltaRule: "blocked"}, {DeltaChunk: -1}, {DeltaChunk: maxDeltaChunk + 1}} {
		if _, err := NewWithOptions(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// deltaFormsBenched are the forms BenchmarkDeltaForms compares.
var deltaFormsBenched = []struct {
	name string
	Options
}{
	{"sequential", Options{DeltaRule: "sequential"}},
	{"chunked", Options{DeltaRule: "chunked"}},
	{"chunked32", Options{DeltaRule: "chunked", DeltaChunk: 32}},
	{"chunked128", Options{DeltaRule: "chunked", DeltaChunk: 128}},
	{"auto", Options{DeltaRule: "auto"}},
}

// BenchmarkDeltaForms times one DeltaRule op in both forms, side by side
// for each shape and token count: the oracle model's (4 key heads, 8 value
// heads) and the 35B model's (16 and 32), 128x128 states. Run it several
// times and keep the best of each, e.g.
//
//	go test -run X -bench DeltaForms -count 5 ./engine/cpu/
func BenchmarkDeltaForms(b *testing.B) {
	shapes := []struct {
		name   string
		hk, hv int
	}{{"oracle", 4, 8}, {"35B", 16, 32}}
	for _, sh := range shapes {
		for _, rows := range []int{1, 64, 256, 1024} {
			in := randomDeltaInputs(rand.New(rand.NewPCG(1, 5)), sh.hk, 128, sh.hv, 128, rows, true)
			for _, o := range deltaFormsBenched {
				b.Run(fmt.Sprintf("%s/L=%d/%s", sh.name, rows, o.name), func(b *testing.B) {
					be, err := NewWithOptions(o.Options)
					if err != nil {
						b.Fatal(err)
					}
					benchmarkDeltaOp(b, be, in)
				})
			}
		}
	}
}

// benchmarkDeltaOp runs the op on its own state again and again: the gates
// keep the state bounded, and the work does not depend on the values.
func benchmarkDeltaOp(b *testing.B, be *Backend, in deltaInputs) {
	buf := func(x []float32) backend.Buffer {
		m := be.Alloc(len(x), false)
		be.Write(m, x)
		return m
	}
	o := &backend.DeltaRule{QKV: buf(in.qkv), B: buf(in.bb), A: buf(in.aa), ALog: buf(in.aLog),
		DtBias: buf(in.dtBias), State: buf(in.state), Out: buf(make([]float32, in.rows*in.hv*in.dv)),
		Rows: in.rows, KeyHeads: in.hk, KeyDim: in.dk, ValueHeads: in.hv, ValueDim: in.dv}
	if err := be.Run(o); err != nil { // the scratch grows here, not in the loop
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := be.Run(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*in.rows), "ns/token")
}
