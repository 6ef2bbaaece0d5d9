package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"
)

var (
	errQueueFull = errors.New("the queue is full")
	errDraining  = errors.New("the server is shutting down")
)

// queue lets one request run at a time and at most limit wait behind it,
// first come first served (blocked channel senders are woken in order).
type queue struct {
	admitted chan struct{} // one slot per request running or waiting
	running  chan struct{} // the right to run
	draining chan struct{} // closed when the server stops taking requests
	stopOnce sync.Once

	mu      sync.Mutex
	waiting int
	meanRun time.Duration // moving average of a run, for Retry-After
	onDepth func(waiting int)
}

func newQueue(limit int, onDepth func(int)) *queue {
	return &queue{
		admitted: make(chan struct{}, limit+1),
		running:  make(chan struct{}, 1),
		draining: make(chan struct{}),
		onDepth:  onDepth,
	}
}

// enter waits for the request's turn; done must be called when it is over.
// It fails at once when the queue is full or the server is draining, and
// with ctx's error when the client goes away while waiting.
func (q *queue) enter(ctx context.Context) (done func(), err error) {
	select {
	case <-q.draining:
		return nil, errDraining
	default:
	}
	select {
	case q.admitted <- struct{}{}:
	default:
		return nil, errQueueFull
	}
	q.addWaiting(1)
	select {
	case q.running <- struct{}{}:
	case <-ctx.Done():
		q.addWaiting(-1)
		<-q.admitted
		return nil, ctx.Err()
	case <-q.draining:
		q.addWaiting(-1)
		<-q.admitted
		return nil, errDraining
	}
	q.addWaiting(-1)
	start := time.Now()
	return func() {
		q.mu.Lock()
		q.meanRun = (3*q.meanRun + time.Since(start)) / 4
		q.mu.Unlock()
		<-q.running
		<-q.admitted
	}, nil
}

func (q *queue) addWaiting(n int) {
	q.mu.Lock()
	q.waiting += n
	w := q.waiting
	q.mu.Unlock()
	if q.onDepth != nil {
		q.onDepth(w)
	}
}

// drain refuses new requests and sends the waiting ones away; the running
// one finishes.
func (q *queue) drain() { q.stopOnce.Do(func() { close(q.draining) }) }

// retryAfter is a client's wait, in whole seconds, before a full queue has
// room: about one run.
func (q *queue) retryAfter() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(1, int((q.meanRun+time.Second-1)/time.Second))
}
