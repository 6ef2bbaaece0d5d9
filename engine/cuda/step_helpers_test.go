package cuda

import (
	"math"
	"testing"

	"petal/engine/cuda/driver"
)

// devBuf is a test's device vector of 4-byte elements with guard elements
// past its end that a kernel must leave poisoned.
type devBuf struct {
	p driver.Ptr
	n int
}

const guardElems = 64

// newBuf allocates n elements (and the guard) and poisons them all.
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

// upBuf allocates a vector holding v (its guard poisoned).
func upBuf[T any](t testing.TB, c *driver.Context, s *driver.Stream, v []T, label string) devBuf {
	t.Helper()
	n := len(bytesOf(v)) / 4
	b := newBuf(t, c, s, n, label)
	if err := s.CopyToDevice(b.p, bytesOf(v)); err != nil {
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

// words reads the buffer's raw elements, failing if a guard was written.
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

// floats reads the buffer as float32, failing on a written guard or on a
// NaN inside (an element the kernel did not write, or a wrong one).
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

func newTestStream(t testing.TB, c *driver.Context) *driver.Stream {
	t.Helper()
	s, err := c.NewStream("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func loadModule(t testing.TB, load func(*driver.Context) (*driver.Module, error), c *driver.Context) *driver.Module {
	t.Helper()
	m, err := load(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
