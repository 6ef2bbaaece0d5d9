package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
)

// convPlain is ConvSiLU channel by channel, as backend.ConvSiLU states it,
// in float32 with the sums in the kernel's order, so the kernel can be held
// to the same bits (backendtest.ConvSiLU is the float64 reference).
func convPlain(x, state, w []float32, L, C, K int) (out, newState []float32) {
	at := func(r, c int) float32 {
		if r < K-1 {
			return state[r*C+c]
		}
		return x[(r-(K-1))*C+c]
	}
	out, newState = make([]float32, L*C), make([]float32, (K-1)*C)
	for c := range C {
		for r := range L {
			var s float32
			for j := range K {
				s += w[c*K+j] * at(r+j, c)
			}
			out[r*C+c] = silu(s)
		}
		for j := range K - 1 {
			newState[j*C+c] = at(L+j, c)
		}
	}
	return out, newState
}

// TestConvMatchesPlain runs chunks one after another (the state carrying
// over, chunks shorter than the state included) and wants the plain
// form's outputs and state bit for bit: the sums are taken in the same order.
func TestConvMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, shape := range [][2]int{{4, 600}, {4, 5}, {2, 300}, {5, 33}} {
		K, C := shape[0], shape[1]
		t.Run(fmt.Sprintf("K%d_C%d", K, C), func(t *testing.T) {
			b := New()
			w := randomVec(rng, C*K)
			state := randomVec(rng, (K-1)*C)
			o := &backend.ConvSiLU{Chans: C, K: K, Weight: mustBuf(b, w), State: mustBuf(b, state)}
			for _, L := range []int{1, 2, 7, 1, 40} {
				x := randomVec(rng, L*C)
				o.Rows, o.X, o.Out = L, mustBuf(b, x), mustBuf(b, poison(L*C))
				if err := b.Run(o); err != nil {
					t.Fatal(err)
				}
				var wantOut []float32
				wantOut, state = convPlain(x, state, w, L, C, K)
				sameBits(t, fmt.Sprintf("%d rows: out", L), F(o.Out), wantOut)
				sameBits(t, fmt.Sprintf("%d rows: state", L), F(o.State), state)
			}
		})
	}
}

func poison(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// BenchmarkConvSiLU: one 256-token chunk of the oracle model's conv
// (2048 channels, 4 taps).
func BenchmarkConvSiLU(b *testing.B) {
	const L, C, K = 256, 2048, 4
	rng := rand.New(rand.NewPCG(1, 3))
	be := New()
	buf := func(x []float32) backend.Buffer {
		return mustBuf(be, x)
	}
	o := &backend.ConvSiLU{X: buf(randomVec(rng, L*C)), State: buf(randomVec(rng, (K-1)*C)),
		Weight: buf(randomVec(rng, C*K)), Out: buf(make([]float32, L*C)), Rows: L, Chans: C, K: K}
	b.SetBytes(2 * L * C * 4)
	for range b.N {
		if err := be.Run(o); err != nil {
			b.Fatal(err)
		}
	}
}

// mustBuf is a new float32 buffer of be holding x.
func mustBuf(be *Backend, x []float32) backend.Buffer {
	b, err := backend.AllocFloats(be, backend.F32, x)
	if err != nil {
		panic(err)
	}
	return b
}

// mustInts is a new i32 buffer of be holding x.
func mustInts(be *Backend, x ...int32) backend.Buffer {
	b, err := backend.AllocInts(be, x)
	if err != nil {
		panic(err)
	}
	return b
}
