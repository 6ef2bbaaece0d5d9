package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

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
			switch {
			case s.keep && s.src != nil:
				v += float64(cs) * float64(s.src[i*s.lds+j])
			case s.keep:
				v += float64(cs) * float64(c[i*ldc+j])
			}
			c[i*ldc+j] = float32(v)
		}
	}
}

// TestMulIntoMatchesPlain: whole tiles and ragged edges, partial row
// blocks, A read row-wise and transposed, k = 0, and each way of treating
// C: overwritten, kept, or replaced by a separate base. C starts as NaN
// where it is not read, and NaN fills the gaps between its rows and the
// rows after it, so a stray write shows.
func TestMulIntoMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	shapes := []struct{ m, n, k int }{{4, 16, 128}, {8, 32, 1}, {9, 35, 17}, {3, 5, 2}, {4, 16, 0}, {2, 48, 7}, {7, 33, 5}, {1, 16, 9}, {128, 128, 64}}
	for _, c := range shapes {
		for _, transposed := range []bool{false, true} {
			for _, base := range []string{"none", "C", "src"} {
				name := fmt.Sprintf("%dx%dx%d/transposed=%v/base=%s", c.m, c.n, c.k, transposed, base)
				ldc, ldb, lds := c.n+3, c.n+1, c.n+5
				a := strided{randomVec(rng, c.m*c.k+1), c.k, 1}
				if transposed {
					a = strided{a.x, 1, c.m}
				}
				b := randomVec(rng, c.k*ldb+1)
				got := poison((c.m + tileRows) * ldc)
				s := rowScales{keep: base != "none", c: randomVec(rng, c.m), rAll: 0.5 + rng.Float32()}
				switch base {
				case "C":
					for i := range c.m {
						copy(got[i*ldc:][:c.n], randomVec(rng, c.n))
					}
				case "src":
					s.src, s.lds = randomVec(rng, c.m*lds), lds
				}
				want := append([]float32(nil), got...)
				mulInto(got, ldc, a, b, ldb, c.m, c.n, c.k, s)
				mulIntoPlain(want, ldc, a, b, ldb, c.m, c.n, c.k, s)
				for i := range c.m + tileRows {
					for j := range ldc {
						g, w := got[i*ldc+j], want[i*ldc+j]
						if i >= c.m || j >= c.n {
							if !math.IsNaN(float64(g)) {
								t.Fatalf("%s: wrote %v outside C at (%d, %d)", name, g, i, j)
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

// TestTransposeMatchesPlain: whole 8x8 blocks, ragged edges, shapes with
// no whole block, and rows longer than the matrix on both sides.
func TestTransposeMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, c := range [][4]int{{128, 128, 0, 0}, {8, 8, 0, 0}, {17, 24, 3, 0}, {5, 128, 0, 11}, {64, 3, 2, 2}, {1, 1, 0, 0}} {
		rows, cols := c[0], c[1]
		ldd, lds := rows+c[2], cols+c[3]
		src := randomVec(rng, rows*lds)
		dst := poison(cols*ldd + 8)
		transpose(dst, ldd, src, lds, rows, cols)
		for i, x := range dst {
			r, c := i%ldd, i/ldd
			if r >= rows || c >= cols {
				if !math.IsNaN(float64(x)) {
					t.Fatalf("%v: wrote %v outside dst at %d", c, x, i)
				}
			} else if want := src[r*lds+c]; x != want {
				t.Fatalf("%v: dst[%d][%d] = %v, want %v", c, c, r, x, want)
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
	o := in.op(be)
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
		for _, chunk := range []int{16, 64, 32, 128, 5} {
			if chunk != 16 && sh.dk == 128 && testing.Short() {
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

// TestDeltaChunkedAllocations: once its scratch has grown, a chunked op
// allocates nothing.
func TestDeltaChunkedAllocations(t *testing.T) {
	in := randomDeltaInputs(rand.New(rand.NewPCG(15, 16)), 2, 64, 4, 64, 70, false)
	be := newChunked(t, 0)
	o := in.op(be)
	run := func() {
		if err := be.Run(o); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(10, run); n > 0 {
		t.Errorf("%.0f allocations per op", n)
	}
}

// TestDeltaAutoChoice: "auto" keeps decode and short ops sequential and
// takes the chunked form from autoChunkMinRows tokens where it has the
// assembly; the other forms do what they say.
func TestDeltaAutoChoice(t *testing.T) {
	for _, c := range []struct {
		form string
		rows int
		want bool
	}{
		{"auto", 1, false}, {"auto", autoChunkMinRows - 1, false}, {"auto", autoChunkMinRows, tileAsm},
		{"sequential", 1024, false}, {"", 1024, false}, {"chunked", 1, true},
	} {
		be, err := NewWithOptions(Options{DeltaRule: c.form})
		if err != nil {
			t.Fatal(err)
		}
		if got := be.useChunkedDelta(c.rows); got != c.want {
			t.Errorf("%q with %d rows: chunked %v, want %v", c.form, c.rows, got, c.want)
		}
	}
}

func TestNewWithOptionsRejects(t *testing.T) {
	for _, o := range []Options{{DeltaRule: "blocked"}, {DeltaChunk: -1}, {DeltaChunk: maxDeltaChunk + 1}} {
		if _, err := NewWithOptions(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// deltaFormsBenched are the forms BenchmarkDeltaForms and
// TestDeltaFormsTiming compare.
var deltaFormsBenched = []struct {
	name string
	Options
}{
	{"sequential", Options{DeltaRule: "sequential"}},
	{"chunked16", Options{DeltaRule: "chunked", DeltaChunk: 16}},
	{"chunked32", Options{DeltaRule: "chunked", DeltaChunk: 32}},
	{"chunked64", Options{DeltaRule: "chunked", DeltaChunk: 64}},
	{"chunked128", Options{DeltaRule: "chunked", DeltaChunk: 128}},
	{"auto", Options{DeltaRule: "auto"}},
}

// benchedShapes are the oracle model's delta rule (4 key heads, 8 value
// heads) and the 35B model's (16 and 32), 128x128 states.
var benchedShapes = []struct {
	name   string
	hk, hv int
}{{"oracle", 4, 8}, {"35B", 16, 32}}

// BenchmarkDeltaForms times one DeltaRule op in each form, for each shape
// and token count:
//
//	go test -run X -bench DeltaForms ./engine/cpu/
//
// TestDeltaFormsTiming interleaves the same runs.
func BenchmarkDeltaForms(b *testing.B) {
	for _, sh := range benchedShapes {
		for _, rows := range []int{1, 64, 256, 1024} {
			in := randomDeltaInputs(rand.New(rand.NewPCG(1, 5)), sh.hk, 128, sh.hv, 128, rows, true)
			for _, f := range deltaFormsBenched {
				b.Run(fmt.Sprintf("%s/L=%d/%s", sh.name, rows, f.name), func(b *testing.B) {
					be, err := NewWithOptions(f.Options)
					if err != nil {
						b.Fatal(err)
					}
					o := in.op(be)
					if err := be.Run(o); err != nil { // the scratch grows here, not in the loop
						b.Fatal(err)
					}
					b.ResetTimer()
					for range b.N {
						if err := be.Run(o); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/token")
				})
			}
		}
	}
}

// TestDeltaFormsTiming prints the best and median time per token of each
// form over rounds in which every form of a shape and token count takes
// its turn, so load from elsewhere on the machine falls on all of them
// alike. It runs only when PETAL_DELTA_TIMING gives the number of rounds:
//
//	PETAL_DELTA_TIMING=9 go test -run DeltaFormsTiming -v ./engine/cpu/
func TestDeltaFormsTiming(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("PETAL_DELTA_TIMING"))
	if rounds < 1 {
		t.Skip("set PETAL_DELTA_TIMING to a number of rounds")
	}
	type cell struct {
		ns   []float64 // per token, one per round
		reps int
	}
	for _, sh := range benchedShapes {
		for _, rows := range []int{1, 8, 16, 32, 64, 128, 256, 1024} {
			in := randomDeltaInputs(rand.New(rand.NewPCG(1, 5)), sh.hk, 128, sh.hv, 128, rows, true)
			bes := make([]*Backend, len(deltaFormsBenched))
			for i, f := range deltaFormsBenched {
				var err error
				if bes[i], err = NewWithOptions(f.Options); err != nil {
					t.Fatal(err)
				}
			}
			o := in.op(bes[0]) // CPU buffers serve any CPU backend
			cells := make([]cell, len(bes))
			for r := range rounds {
				for i, be := range bes {
					c := &cells[i]
					if r == 0 { // warm up, and take enough runs for 20ms
						start := time.Now()
						be.Run(o)
						c.reps = max(1, int(20*time.Millisecond/max(time.Since(start), time.Microsecond)))
					}
					start := time.Now()
					for range c.reps {
						be.Run(o)
					}
					c.ns = append(c.ns, float64(time.Since(start).Nanoseconds())/float64(c.reps*rows))
				}
			}
			line := fmt.Sprintf("%-6s L=%-4d ns/token best (median):", sh.name, rows)
			for i, f := range deltaFormsBenched {
				ns := slices.Sorted(slices.Values(cells[i].ns))
				line += fmt.Sprintf("  %s %.0f (%.0f)", f.name, ns[0], ns[len(ns)/2])
			}
			t.Log(line)
		}
	}
}

// op is a DeltaRule op on the inputs, with buffers from be.
func (in deltaInputs) op(be *Backend) *backend.DeltaRule {
	buf := func(x []float32) backend.Buffer {
		return mustBuf(be, x)
	}
	return &backend.DeltaRule{QKV: buf(in.qkv), B: buf(in.bb), A: buf(in.aa), ALog: buf(in.aLog),
		DtBias: buf(in.dtBias), State: buf(in.state), Out: buf(poison(in.rows * in.hv * in.dv)),
		Rows: in.rows, KeyHeads: in.hk, KeyDim: in.dk, ValueHeads: in.hv, ValueDim: in.dv}
}
