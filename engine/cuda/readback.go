package cuda

import (
	"sort"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// A read waits only for the last queued work that writes its buffer.
//
// The decode loop queues step n+1 before it reads the id step n chose. A
// copy queued on the backend's stream would wait for step n+1 as well, and
// the GPU would then idle while the host took the id and queued step n+2:
// 0.43 ms a token on the H200 (docs/bench/cuda/2026-12-01-ktrace1, a trace
// of every kernel of the replayed graphs). So the backend keeps the work
// queued since it last waited for everything, with the bytes each piece
// writes, and a read waits on a second stream for the end of the last piece
// that writes its buffer, then copies through pinned memory.

// span is the bytes [lo, hi) of an allocation.
type span struct {
	m      *memory
	lo, hi int64
}

func spanOf(buf backend.Buffer) span {
	m, _ := buf.Mem.(*memory)
	size := int64(buf.Type.Size())
	return span{m: m, lo: int64(buf.Offset) * size, hi: int64(buf.Offset+buf.Len) * size}
}

func (s span) overlaps(o span) bool { return s.m == o.m && s.lo < o.hi && o.lo < s.hi }

// spans are the distinct bytes some buffers cover, touching ranges merged.
func spans(bufs []backend.Buffer) []span {
	var out []span
	for _, b := range bufs {
		if s := spanOf(b); s.m != nil && s.hi > s.lo {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].m != out[j].m {
			return out[i].m.p < out[j].m.p
		}
		return out[i].lo < out[j].lo
	})
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && merged[n-1].m == s.m && s.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// writes are the bytes the ops of a program may write.
func writes(ops []backend.Op) []span {
	var all []backend.Buffer
	for _, op := range ops {
		_, w := op.Access()
		all = append(all, w...)
	}
	return spans(all)
}

// pending is a piece of queued work: a program's run, a copy, a write.
type pending struct {
	writes []span
	// marked is the program whose end marker (program.done) was recorded
	// right after this piece, kept alive while a read may wait for it; nil:
	// no marker, and a read of what the piece writes waits for everything.
	marked *program
}

// marker is the event recorded after the piece, or nil.
func (p pending) marker() *driver.Event {
	if p.marked == nil {
		return nil
	}
	return p.marked.done
}

// maxPending bounds the list; past it the oldest piece is forgotten, and a
// read that finds no writer then waits for the oldest piece kept.
const maxPending = 64

// readStageBytes is the pinned staging of the reads that take the side
// stream (the decode loop's are 8 bytes, or 84 with log-probabilities);
// longer reads queue on the backend's stream.
const readStageBytes = 1 << 20

type readback struct {
	side  *driver.Stream
	stage *driver.HostBuffer
	queue []pending
	older bool // work queued before queue[0] may still be running
}

// queued notes work just queued on the backend's stream.
func (r *readback) queued(w []span, marked *program) {
	if len(r.queue) == maxPending {
		n := copy(r.queue, r.queue[1:])
		r.queue[n] = pending{}
		r.queue, r.older = r.queue[:n], true
	}
	r.queue = append(r.queue, pending{writes: w, marked: marked})
}

// settled notes that everything queued has finished.
func (r *readback) settled() {
	clear(r.queue) // lets the programs go
	r.queue, r.older = r.queue[:0], false
}

// after is the event a read of s must wait for, whether the read can take
// the side stream at all (not when the piece to wait for has no event), and
// how many pieces of the queue are done once it has waited.
func (r *readback) after(s span) (ev *driver.Event, ok bool, done int) {
	for i := len(r.queue) - 1; i >= 0; i-- {
		for _, w := range r.queue[i].writes {
			if w.overlaps(s) {
				if i == len(r.queue)-1 {
					return nil, false, 0 // the last piece: the stream's own order waits no longer
				}
				ev := r.queue[i].marker()
				return ev, ev != nil, i + 1
			}
		}
	}
	if r.older && len(r.queue) > 0 {
		ev := r.queue[0].marker()
		return ev, ev != nil, 1
	}
	return nil, true, 0 // nothing queued writes it
}

// readBytes copies the bytes of src (at device address p) into dst.
func (b *Backend) readBytes(dst []byte, src backend.Buffer, p driver.Ptr) error {
	r := &b.rb
	if r.side != nil && len(dst) <= len(r.stage.Bytes) {
		if ev, ok, done := r.after(spanOf(src)); ok {
			if ev != nil {
				if err := r.side.WaitEvent(ev); err != nil {
					return b.surfaced(err)
				}
			}
			if err := r.side.CopyToHost(r.stage.Bytes[:len(dst)], p); err != nil {
				return b.surfaced(err)
			}
			if err := r.side.Sync(); err != nil {
				return b.surfaced(err)
			}
			copy(dst, r.stage.Bytes)
			if done > 0 {
				n := copy(r.queue, r.queue[done:])
				clear(r.queue[n:])
				r.queue, r.older = r.queue[:n], false
			}
			return nil
		}
	}
	if err := b.s.CopyToHost(dst, p); err != nil { // into pageable memory: waits for the stream
		return b.surfaced(err)
	}
	r.settled()
	return nil
}
