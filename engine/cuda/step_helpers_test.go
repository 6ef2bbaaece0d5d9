package cuda

import (
	"math"
	"testing"

	"petal/engine/cuda/cudatest"
	"petal/engine/cuda/driver"
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
