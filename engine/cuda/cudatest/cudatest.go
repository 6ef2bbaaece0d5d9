// Package cudatest holds what the GPU tests of engine/cuda and of the Metal
// kernels run as CUDA (engine/metal/cudarun) share: device vectors with a
// poisoned guard past their end, read back with checks that nothing was
// left unwritten or written out of bounds.
package cudatest

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

const (
	// NaNBits poisons every element before a kernel runs.
	NaNBits = 0x7fc00000
	// GuardElems is the number of poisoned elements past each vector's end
	// that a kernel must leave as they are.
	GuardElems = 64
)

// Buf is a test's device vector of N 4-byte elements at P, with GuardElems
// poisoned elements past its end.
type Buf struct {
	P driver.Ptr
	N int
}

// NewBuf allocates n elements (and the guard) and poisons them all; the
// memory is freed when the test ends.
func NewBuf(t testing.TB, c *driver.Context, s *driver.Stream, n int, label string) Buf {
	t.Helper()
	p, err := c.Alloc(int64(4*(n+GuardElems)), label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(p) })
	b := Buf{p, n}
	b.Poison(t, s)
	return b
}

// UpBuf allocates a vector holding v, padded with zero bytes to whole
// 4-byte elements (its guard poisoned).
func UpBuf[T any](t testing.TB, c *driver.Context, s *driver.Stream, v []T, label string) Buf {
	t.Helper()
	raw := BytesOf(v)
	if len(raw)%4 != 0 {
		raw = append(append([]byte(nil), raw...), make([]byte, 4-len(raw)%4)...)
	}
	b := NewBuf(t, c, s, len(raw)/4, label)
	if err := s.CopyToDevice(b.P, raw); err != nil {
		t.Fatal(err)
	}
	return b
}

// Poison fills the vector and its guard with NaN.
func (b Buf) Poison(t testing.TB, s *driver.Stream) {
	t.Helper()
	if err := s.Fill32(b.P, NaNBits, int64(b.N+GuardElems)); err != nil {
		t.Fatal(err)
	}
}

// Set writes v, which must have N elements.
func (b Buf) Set(t testing.TB, s *driver.Stream, v []float32) {
	t.Helper()
	if len(v) != b.N {
		t.Fatalf("setting %d elements of a buffer of %d", len(v), b.N)
	}
	if err := s.CopyToDevice(b.P, BytesOf(v)); err != nil {
		t.Fatal(err)
	}
}

// Words reads the vector's raw elements, failing if a guard was written.
func (b Buf) Words(t testing.TB, s *driver.Stream, what string) []uint32 {
	t.Helper()
	v := make([]uint32, b.N+GuardElems)
	if err := s.CopyToHost(BytesOf(v), b.P); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := b.N; i < len(v); i++ {
		if v[i] != NaNBits {
			t.Fatalf("%s[%d], past its %d elements, was written: %#x", what, i, b.N, v[i])
		}
	}
	return v[:b.N]
}

// Floats reads the vector as float32, failing on a written guard or on a
// NaN inside (an element the kernel did not write, or a wrong one).
func (b Buf) Floats(t testing.TB, s *driver.Stream, what string) []float32 {
	t.Helper()
	w := b.Words(t, s, what)
	f := make([]float32, len(w))
	for i, x := range w {
		f[i] = math.Float32frombits(x)
		if f[i] != f[i] {
			t.Fatalf("%s[%d] is NaN (not written?)", what, i)
		}
	}
	return f
}

// Ints reads the vector as int32, failing on a written guard or an
// element left poisoned.
func (b Buf) Ints(t testing.TB, s *driver.Stream, what string) []int32 {
	t.Helper()
	w := b.Words(t, s, what)
	v := make([]int32, len(w))
	for i, x := range w {
		if x == NaNBits {
			t.Fatalf("%s[%d] was not written", what, i)
		}
		v[i] = int32(x)
	}
	return v
}

// BytesOf is the bytes of s, shared with it.
func BytesOf[T any](s []T) []byte { return backend.BytesOf(s) }

var (
	gpuOnce sync.Once
	gpuCtx  *driver.Context
	gpuErr  error
)

// GPU returns the test GPU's context (GPU 0, opened once per test binary),
// or skips the test, saying what is not run, where this machine has no CUDA
// (CI); PETAL_CUDA_REQUIRE=1 turns that skip into a failure.
func GPU(t testing.TB, notRun string) *driver.Context {
	t.Helper()
	gpuOnce.Do(func() { gpuCtx, gpuErr = driver.Open(0) })
	if gpuErr != nil {
		if driver.Unavailable(gpuErr) && os.Getenv("PETAL_CUDA_REQUIRE") == "" {
			t.Skipf("no CUDA GPU here: %s (%v)", notRun, gpuErr)
		}
		t.Fatal(gpuErr)
	}
	return gpuCtx
}

// FreshRNG is a generator seeded from the clock, the seed logged so that a
// failure can be reproduced with PETAL_CUDA_SEED=SEED.
func FreshRNG(t testing.TB) *rand.Rand {
	t.Helper()
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

// Opened reports whether a test of this binary opened the GPU.
func Opened() bool { return gpuCtx != nil }
