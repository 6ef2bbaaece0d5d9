//go:build linux

package cudarun

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

var (
	gpuOnce sync.Once
	gpuCtx  *driver.Context
	gpuErr  error
)

// gpu returns the test GPU's context, or skips the test where this machine
// has no CUDA; PETAL_CUDA_REQUIRE=1 turns that skip into a failure.
func gpu(t testing.TB) *driver.Context {
	t.Helper()
	gpuOnce.Do(func() { gpuCtx, gpuErr = driver.Open(0) })
	if gpuErr != nil {
		if driver.Unavailable(gpuErr) && os.Getenv("PETAL_CUDA_REQUIRE") == "" {
			t.Skipf("no CUDA GPU here: the Metal kernels' PTX is not run (%v)", gpuErr)
		}
		t.Fatal(gpuErr)
	}
	return gpuCtx
}

// freshRNG is a generator seeded from the clock, logged so that a failure
// can be reproduced with PETAL_CUDA_SEED.
func freshRNG(t testing.TB) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PETAL_CUDA_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PETAL_CUDA_SEED=%q is not an unsigned integer", s)
		}
		seed = v
	}
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

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

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

const (
	nanBits     = 0x7fc00000
	bf16NaNPair = 0x7fc07fc0
	guardElems  = 64
)

// devBuf is a device vector of n 4-byte elements and a guard past its end
// that a kernel must leave poisoned.
type devBuf struct {
	p driver.Ptr
	n int
}

// newBuf allocates n elements and the guard, all poisoned with NaN.
func newBuf(t testing.TB, c *driver.Context, s *driver.Stream, n int, label string) devBuf {
	t.Helper()
	p, err := c.Alloc(int64(4*(n+guardElems)), label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(p) })
	b := devBuf{p, n}
	b.poison(t, s)
	return b
}

// upBuf allocates a vector holding v (whose size is a multiple of 4 bytes).
func upBuf[T any](t testing.TB, c *driver.Context, s *driver.Stream, v []T, label string) devBuf {
	t.Helper()
	raw := bytesOf(v)
	if len(raw)%4 != 0 {
		raw = append(append([]byte(nil), raw...), make([]byte, 4-len(raw)%4)...)
	}
	b := newBuf(t, c, s, len(raw)/4, label)
	if err := s.CopyToDevice(b.p, raw); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b devBuf) poison(t testing.TB, s *driver.Stream) {
	t.Helper()
	if err := s.Fill32(b.p, nanBits, int64(b.n+guardElems)); err != nil {
		t.Fatal(err)
	}
}

func (b devBuf) set(t testing.TB, s *driver.Stream, v []float32) {
	t.Helper()
	if len(v) != b.n {
		t.Fatalf("setting %d elements of a buffer of %d", len(v), b.n)
	}
	if err := s.CopyToDevice(b.p, bytesOf(v)); err != nil {
		t.Fatal(err)
	}
}

// words reads the elements, failing if a guard element was written.
func (b devBuf) words(t testing.TB, s *driver.Stream, what string) []uint32 {
	t.Helper()
	v := make([]uint32, b.n+guardElems)
	if err := s.CopyToHost(bytesOf(v), b.p); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := b.n; i < len(v); i++ {
		if v[i] != nanBits {
			t.Fatalf("%s[%d], past its %d elements, was written: %#x", what, i, b.n, v[i])
		}
	}
	return v[:b.n]
}

// floats reads the buffer as float32, failing on a written guard or a NaN
// inside (an element the kernel did not write, or a wrong one).
func (b devBuf) floats(t testing.TB, s *driver.Stream, what string) []float32 {
	t.Helper()
	w := b.words(t, s, what)
	f := make([]float32, len(w))
	for i, x := range w {
		f[i] = math.Float32frombits(x)
		if f[i] != f[i] {
			t.Fatalf("%s[%d] is NaN (not written?)", what, i)
		}
	}
	return f
}

func (b devBuf) ints(t testing.TB, s *driver.Stream, what string) []int32 {
	t.Helper()
	w := b.words(t, s, what)
	v := make([]int32, len(w))
	for i, x := range w {
		if x == nanBits {
			t.Fatalf("%s[%d] was not written", what, i)
		}
		v[i] = int32(x)
	}
	return v
}

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
