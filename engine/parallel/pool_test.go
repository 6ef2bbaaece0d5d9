package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// coverage records how often each index was visited.
type coverage struct {
	hits  []atomic.Int32
	calls atomic.Int32
	fn    func(lo, hi int)
}

func newCoverage(n int) *coverage {
	c := &coverage{hits: make([]atomic.Int32, n)}
	c.fn = c.visit
	return c
}

func (c *coverage) visit(lo, hi int) {
	c.calls.Add(1)
	for i := lo; i < hi; i++ {
		c.hits[i].Add(1)
	}
}

func (c *coverage) check(t *testing.T, what string) {
	t.Helper()
	for i := range c.hits {
		if got := c.hits[i].Load(); got != 1 {
			t.Errorf("%s: index %d visited %d times, want 1", what, i, got)
			return
		}
	}
}

func TestForCoversEveryIndexOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 64, 65, 1000, 12345} {
		for _, grain := range []int{0, 1, 3, 16, 5000} {
			c := newCoverage(n)
			For(n, grain, c.fn)
			c.check(t, "For")
			if n <= max(grain, 1) && c.calls.Load() != 1 {
				t.Errorf("n %d grain %d: %d calls, want 1 inline call", n, grain, c.calls.Load())
			}
		}
	}
}

func TestForEmptyRangeCallsNothing(t *testing.T) {
	called := false
	For(0, 1, func(lo, hi int) { called = true })
	For(-3, 1, func(lo, hi int) { called = true })
	if called {
		t.Fatal("fn was called for an empty range")
	}
}

func TestForRespectsGrain(t *testing.T) {
	const n, grain = 1000, 100
	var mu sync.Mutex
	var sizes []int
	For(n, grain, func(lo, hi int) {
		mu.Lock()
		sizes = append(sizes, hi-lo)
		mu.Unlock()
	})
	total := 0
	for i, s := range sizes {
		total += s
		// Only the last chunk of the range may be short; it is the one that
		// ends at n, which need not be the last to finish.
		if s < grain && s != n%grain {
			t.Errorf("chunk %d has %d indices, below the grain %d", i, s, grain)
		}
	}
	if total != n {
		t.Fatalf("chunks cover %d indices, want %d", total, n)
	}
}

func TestForUsesSeveralWorkers(t *testing.T) {
	if Workers() < 2 {
		t.Skip("GOMAXPROCS is 1: nothing runs in parallel")
	}
	// Each range waits until another range has started: it can only finish
	// if two goroutines run ranges at the same time.
	var started atomic.Int32
	For(2, 1, func(lo, hi int) {
		started.Add(1)
		for started.Load() < 2 {
			runtime.Gosched()
		}
	})
}

func TestNestedForRunsInline(t *testing.T) {
	const outer, inner = 64, 100
	cs := make([]*coverage, outer)
	for i := range cs {
		cs[i] = newCoverage(inner)
	}
	For(outer, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			For(inner, 1, cs[i].fn)
		}
	})
	for i, c := range cs {
		c.check(t, "nested For")
		if c.calls.Load() != 1 {
			t.Errorf("inner loop %d was split into %d calls; a nested For must run inline", i, c.calls.Load())
		}
	}
}

func TestConcurrentCallersAllFinish(t *testing.T) {
	var wg sync.WaitGroup
	cs := make([]*coverage, 8)
	for i := range cs {
		cs[i] = newCoverage(5000)
		wg.Add(1)
		go func(c *coverage) {
			defer wg.Done()
			for range 20 {
				c.hits = make([]atomic.Int32, len(c.hits))
				For(len(c.hits), 10, c.fn)
				c.check(t, "concurrent For")
			}
		}(cs[i])
	}
	wg.Wait()
}

func TestForReraisesPanic(t *testing.T) {
	defer func() {
		if r := recover(); r != "boom" {
			t.Fatalf("recovered %v, want the panic from fn", r)
		}
		// The pool must be usable again afterwards.
		c := newCoverage(1000)
		For(1000, 1, c.fn)
		c.check(t, "For after a panic")
	}()
	For(1000, 1, func(lo, hi int) {
		if lo <= 500 && 500 < hi {
			panic("boom")
		}
	})
	t.Fatal("For returned normally although fn panicked")
}

func TestForDoesNotAllocate(t *testing.T) {
	c := newCoverage(4096)
	For(4096, 16, c.fn) // start the pool outside the measurement
	allocs := testing.AllocsPerRun(200, func() { For(4096, 16, c.fn) })
	if allocs != 0 {
		t.Fatalf("For allocates %v times per call, want 0", allocs)
	}
}

var sink atomic.Int64

type sumTask struct {
	data []uint64
	fn   func(lo, hi int)
}

func (s *sumTask) sum(lo, hi int) {
	var acc uint64
	for _, v := range s.data[lo:hi] {
		acc += v
	}
	sink.Add(int64(acc))
}

// BenchmarkForOverhead is the cost of one parallel call with almost no work,
// what a decode step pays per kernel on top of the work itself.
func BenchmarkForOverhead(b *testing.B) {
	s := &sumTask{data: make([]uint64, 256)}
	s.fn = s.sum
	b.ReportAllocs()
	for b.Loop() {
		For(len(s.data), 1, s.fn)
	}
}
