// Package parallel runs loops over index ranges on a pool of worker
// goroutines started once, for the CPU kernels. A decode step calls For
// hundreds of times, so a call starts no goroutine and allocates nothing.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// chunksPerWorker is how many chunks each participant gets on average: more
// than one so a core slowed by something else does not hold up the call.
const chunksPerWorker = 4

// pool is the process-wide set of helpers. The goroutine calling For takes
// part too, so there are Workers()-1 helpers.
type pool struct {
	busy    sync.Mutex // held by the goroutine driving a For
	wake    []chan struct{}
	pending sync.WaitGroup

	// The loop being run; written by the driver before it wakes helpers.
	fn    func(lo, hi int)
	n     int
	chunk int
	next  atomic.Int64

	panicMu  sync.Mutex
	panicVal any
}

var (
	startOnce sync.Once
	shared    pool
)

func start() {
	helpers := runtime.GOMAXPROCS(0) - 1
	shared.wake = make([]chan struct{}, helpers)
	for i := range shared.wake {
		ch := make(chan struct{})
		shared.wake[i] = ch
		go shared.serve(ch)
	}
}

// Workers is the number of goroutines that share a For: GOMAXPROCS as it
// was at the first call.
func Workers() int {
	startOnce.Do(start)
	return len(shared.wake) + 1
}

// For calls fn on disjoint ranges [lo, hi) that together cover [0, n), in
// parallel, and returns when all calls have returned. grain is the smallest
// range worth handing to another core; n <= grain runs inline.
//
// A call made while the pool is busy (from inside fn, or from a second
// goroutine at the same time) runs inline on its caller, so nesting never
// deadlocks. A panic in fn is re-raised in the caller after all ranges stop.
//
// fn should be a func value made once and reused (a method value stored in a
// struct, say): a closure built at each call escapes and costs an allocation.
func For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	startOnce.Do(start)
	p := &shared
	if n <= grain || len(p.wake) == 0 || !p.busy.TryLock() {
		fn(0, n)
		return
	}
	workers := len(p.wake) + 1
	chunk := max(grain, (n+workers*chunksPerWorker-1)/(workers*chunksPerWorker))
	chunks := (n + chunk - 1) / chunk
	helpers := min(len(p.wake), chunks-1)

	p.fn, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	p.pending.Add(helpers)
	for _, ch := range p.wake[:helpers] {
		ch <- struct{}{}
	}
	p.run()
	p.pending.Wait()

	p.fn = nil
	pv := p.panicVal
	p.panicVal = nil
	p.busy.Unlock()
	if pv != nil {
		panic(pv)
	}
}

// serve is a helper's life: wait for a loop, take chunks until none is left.
func (p *pool) serve(wake chan struct{}) {
	for range wake {
		p.run()
		p.pending.Done()
	}
}

// run takes chunks of the current loop until they are all handed out.
func (p *pool) run() {
	defer func() {
		if r := recover(); r != nil {
			p.panicMu.Lock()
			if p.panicVal == nil {
				p.panicVal = r
			}
			p.panicMu.Unlock()
			// Stop the others early: nothing more will be handed out.
			p.next.Store(int64(p.n))
		}
	}()
	for {
		lo := int(p.next.Add(int64(p.chunk))) - p.chunk
		if lo >= p.n {
			return
		}
		p.fn(lo, min(lo+p.chunk, p.n))
	}
}
