//go:build linux

package cudarun

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"petal/engine/cuda/cudatest"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// The device vectors of these tests (cudatest.Buf: a poisoned guard past
// the end, read back checked).
type devBuf = cudatest.Buf

const guardElems = cudatest.GuardElems

func newBuf(t testing.TB, c *driver.Context, s *driver.Stream, n int, label string) devBuf {
	t.Helper()
	return cudatest.NewBuf(t, c, s, n, label)
}

func upBuf[T any](t testing.TB, c *driver.Context, s *driver.Stream, v []T, label string) devBuf {
	t.Helper()
	return cudatest.UpBuf(t, c, s, v, label)
}

// gpu returns the test GPU's context, or skips the test where this machine
// has no CUDA; PETAL_CUDA_REQUIRE=1 turns that skip into a failure.

// freshRNG is a generator seeded from the clock, logged so that a failure
// can be reproduced with PETAL_CUDA_SEED.

// gpu is the test GPU's context, or a skip where there is none.
func gpu(t testing.TB) *driver.Context {
	t.Helper()
	return cudatest.GPU(t, "the Metal kernels' PTX is not run")
}

// freshRNG is a clock-seeded generator (PETAL_CUDA_SEED reproduces a run).
func freshRNG(t testing.TB) *rand.Rand { return cudatest.FreshRNG(t) }

func randomVector(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func newStream(t testing.TB, c *driver.Context) *driver.Stream {
	t.Helper()
	s, err := c.NewStream("metal-ptx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// module loads family.metal's PTX.
func module(t testing.TB, c *driver.Context, family string) *driver.Module {
	t.Helper()
	ptx, err := PTX(family)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.LoadModule(ptx, family+".metal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// launched records the entry points the tests have run, for
// TestEveryEntryPointRuns.
var launched sync.Map

func function(t testing.TB, m *driver.Module, name string) *driver.Function {
	t.Helper()
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// launch runs entry name of m on a one-dimensional grid; args end with the
// parameter struct (withParams).
func launch(t testing.TB, s *driver.Stream, m *driver.Module, name string, grid, block int, args *driver.Args) {
	t.Helper()
	if err := s.Launch(function(t, m, name), driver.D1(grid), driver.D1(block), 0, args); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	launched.Store(name, true)
}

// withParams appends a params.h struct, passed by value as metal2cu's
// entries take it (their last argument). driver.Args gives each argument
// an 8-byte slot and points the driver at it; the driver copies the
// kernel's parameter size from there, so a struct of more than 8 bytes
// takes consecutive slots, which lie back to back in Args. It must be the
// last argument.
func withParams[T any](a *driver.Args, p T) *driver.Args {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p))
	padded := make([]byte, (len(b)+7)/8*8)
	copy(padded, b)
	for i := 0; i < len(padded); i += 8 {
		a.I64(int64(binary.LittleEndian.Uint64(padded[i:])))
	}
	return a
}

func bytesOf[T any](s []T) []byte { return cudatest.BytesOf(s) }

const (
	nanBits     = cudatest.NaNBits
	bf16NaNPair = 0x7fc07fc0
)

// devBuf is a device vector of n 4-byte elements and a guard past its end
// that a kernel must leave poisoned.

// newBuf allocates n elements and the guard, all poisoned with NaN.

// upBuf allocates a vector holding v (whose size is a multiple of 4 bytes).

// words reads the elements, failing if a guard element was written.

// floats reads the buffer as float32, failing on a written guard or a NaN
// inside (an element the kernel did not write, or a wrong one).

// qmat is a quantised matrix on the device: codes, MLX's bf16 scales and
// biases, and (4-bit) the interleaved scale/bias words the _sb entries
// read: one u32 per group, scale in the low half, bias in the high.
type qmat struct {
	words, scales, biases, sb devBuf
}

func uploadQ(t testing.TB, c *driver.Context, s *driver.Stream, m *quant.Matrix, label string) qmat {
	t.Helper()
	q := qmat{words: upBuf(t, c, s, m.Words, label+" words"), scales: upBuf(t, c, s, m.Scales, label+" scales"),
		biases: upBuf(t, c, s, m.Biases, label+" biases")}
	sb := make([]uint32, len(m.Scales))
	for i := range sb {
		sb[i] = uint32(m.Scales[i]) | uint32(m.Biases[i])<<16
	}
	q.sb = upBuf(t, c, s, sb, label+" scale/bias")
	return q
}

// maxRelErr is max|got - want| / max|want|.
func maxRelErr(got []float32, want []float64) float64 {
	var e, m float64
	for i := range want {
		e = max(e, math.Abs(float64(got[i])-want[i]))
		m = max(m, math.Abs(want[i]))
	}
	if m == 0 {
		return e
	}
	return e / m
}

func relL2(got []float32, want []float64) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i]) - want[i]
		d += e * e
		n += want[i] * want[i]
	}
	return math.Sqrt(d / n)
}

func widen64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// maxTeam is the largest power of two at most 32 and at most groups: the
// team sizes the Metal mat-vec kernels accept.
func maxTeam(groups int) int {
	t := 1
	for t*2 <= min(32, groups) {
		t *= 2
	}
	return t
}

// teams are the team sizes a test runs: 1, 4 and the largest allowed.
func teams(groups int) []int {
	out := []int{1}
	for _, t := range []int{min(4, maxTeam(groups)), maxTeam(groups)} {
		if t != out[len(out)-1] {
			out = append(out, t)
		}
	}
	return out
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
