package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
)

// TestDeltaRuleMatchesPlain runs chunks one after another through the op:
// grouped value heads, sizes on and off the vector width, the state
// carried over.
func TestDeltaRuleMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, c := range []struct{ hk, dk, hv, dv int }{{2, 128, 4, 100}, {1, 2048, 2, 3}, {1, 5, 3, 7}} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			b := New()
			buf := func(x []float32) backend.Buffer {
				return mustBuf(b, x)
			}
			aLog, dtBias := randomVec(rng, c.hv), randomVec(rng, c.hv)
			state := randomVec(rng, c.hv*c.dv*c.dk)
			o := &backend.DeltaRule{ALog: buf(aLog), DtBias: buf(dtBias), State: buf(state),
				KeyHeads: c.hk, KeyDim: c.dk, ValueHeads: c.hv, ValueDim: c.dv}
			for _, rows := range []int{1, 5, 2} {
				qkv := randomVec(rng, rows*(2*c.hk*c.dk+c.hv*c.dv))
				bb, aa := randomVec(rng, rows*c.hv), randomVec(rng, rows*c.hv)
				o.Rows, o.QKV, o.B, o.A, o.Out = rows, buf(qkv), buf(bb), buf(aa), buf(poison(rows*c.hv*c.dv))
				if err := b.Run(o); err != nil {
					t.Fatal(err)
				}
				want := backendtest.DeltaRule(qkv, bb, aa, aLog, dtBias, state, rows, c.hk, c.dk, c.hv, c.dv)
				for i, w := range want {
					if got := F(o.Out)[i]; !(math.Abs(float64(got)-w) <= 1e-4*(1+math.Abs(w))) {
						t.Fatalf("%d rows: out[%d] = %v, plain form %v", rows, i, got, w)
					}
				}
				for i, w := range state {
					if got := F(o.State)[i]; !(math.Abs(float64(got-w)) <= 1e-4*(1+math.Abs(float64(w)))) {
						t.Fatalf("%d rows: state[%d] = %v, plain form %v", rows, i, got, w)
					}
				}
			}
		})
	}
}

// BenchmarkDeltaRule: one 256-token chunk of the oracle model's delta rule
// (4 key heads, 8 value heads, 128x128 states).
func BenchmarkDeltaRule(b *testing.B) {
	const rows, hk, hv, d = 256, 4, 8, 128
	rng := rand.New(rand.NewPCG(1, 5))
	be := New()
	buf := func(x []float32) backend.Buffer {
		return mustBuf(be, x)
	}
	o := &backend.DeltaRule{QKV: buf(randomVec(rng, rows*(2*hk*d+hv*d))), B: buf(randomVec(rng, rows*hv)),
		A: buf(randomVec(rng, rows*hv)), ALog: buf(randomVec(rng, hv)), DtBias: buf(randomVec(rng, hv)),
		State: buf(randomVec(rng, hv*d*d)), Out: buf(make([]float32, rows*hv*d)), Rows: rows,
		KeyHeads: hk, KeyDim: d, ValueHeads: hv, ValueDim: d}
	for range b.N {
		if err := be.Run(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "tok/s")
}
