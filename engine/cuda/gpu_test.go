package cuda

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"petal/engine/cuda/cudatest"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// gpu returns the test GPU's context, or skips the test where this machine
// has no CUDA (CI); PETAL_CUDA_REQUIRE=1 turns that skip into a failure.

// freshRNG is a generator seeded from the clock, logged so a failure can be
// reproduced with PETAL_CUDA_SEED.

// gpu is the test GPU's context, or a skip where there is none.
func gpu(t testing.TB) *driver.Context {
	t.Helper()
	return cudatest.GPU(t, "skipping")
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

// reference is W·x in float64 from the dequantised rows, with Σ|w·x| per
// row: the scale a float32 sum's rounding error is measured against.
func reference(m *quant.Matrix, x []float32) (y, absSum []float64) {
	rows := m.Rows * m.Experts
	y, absSum = make([]float64, rows), make([]float64, rows)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, m.Cols)
			for r := w; r < rows; r += workers {
				m.DequantizeRow(r, row)
				var s, a float64
				for c, v := range row {
					p := float64(v) * float64(x[c])
					s += p
					a += math.Abs(p)
				}
				y[r], absSum[r] = s, a
			}
		}()
	}
	wg.Wait()
	return y, absSum
}

// deviceVectors holds a test's x and y on the device; y has guard elements
// past the end that must stay poisoned.
type deviceVectors struct {
	c     *driver.Context
	x, y  driver.Ptr
	rows  int
	guard int
}

const nanBits = cudatest.NaNBits

func newDeviceVectors(t testing.TB, c *driver.Context, s *driver.Stream, x []float32, rows int) *deviceVectors {
	t.Helper()
	v := &deviceVectors{c: c, rows: rows, guard: 64}
	var err error
	if v.x, err = c.Alloc(int64(4*len(x)), "x"); err != nil {
		t.Fatal(err)
	}
	if v.y, err = c.Alloc(int64(4*(rows+v.guard)), "y"); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToDevice(v.x, bytesOf(x)); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *deviceVectors) Poison(t testing.TB, s *driver.Stream) {
	t.Helper()
	if err := s.Fill32(v.y, nanBits, int64(v.rows+v.guard)); err != nil {
		t.Fatal(err)
	}
}

// read returns y[:rows], failing if a guard element was written.
func (v *deviceVectors) read(t testing.TB, s *driver.Stream) []float32 {
	t.Helper()
	y := make([]float32, v.rows+v.guard)
	if err := s.CopyToHost(bytesOf(y), v.y); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := v.rows; i < len(y); i++ {
		if math.Float32bits(y[i]) != nanBits {
			t.Fatalf("y[%d], past the %d rows, was written: %v", i, v.rows, y[i])
		}
	}
	return y[:v.rows]
}

func (v *deviceVectors) free() {
	v.c.Free(v.x)
	v.c.Free(v.y)
}
