//go:build darwin

package device

import (
	"fmt"
	"unsafe"
)

// Arg is a buffer bound at an offset.
type Arg struct {
	Buf *Buffer
	Off uint64
}

// Encoder records the dispatches of one command buffer into a concurrent
// compute encoder: dispatches may overlap unless a Barrier separates them,
// which the caller places where an op reads what an earlier one wrote.
// The first error sticks and is returned by Run or Submit.
type Encoder struct {
	enc  id
	err  error
	bufs [MaxBuffers]id
	offs [MaxBuffers]uint64
}

// Dispatch runs pipeline p on groups threadgroups of threads threads, with
// args bound at indices 0..len(args)-1 in one setBuffers:offsets:withRange:
// call and params (a parameter struct's bytes, from Params) at index
// len(args).
func (e *Encoder) Dispatch(p *Pipeline, groups, threads Size, args []Arg, params []byte) {
	if e.err != nil {
		return
	}
	switch {
	case len(args)+1 > MaxBuffers:
		e.err = fmt.Errorf("metal: %s binds %d buffers and its parameters, more than Metal's %d", p.Name, len(args), MaxBuffers)
	case !groups.valid() || !threads.valid():
		e.err = fmt.Errorf("metal: %s dispatched on %v threadgroups of %v threads", p.Name, groups, threads)
	case uint64(threads.threads()) > p.MaxThreads:
		e.err = fmt.Errorf("metal: %s takes at most %d threads per threadgroup, dispatched with %d", p.Name, p.MaxThreads, threads.threads())
	}
	if e.err != nil {
		return
	}
	for i, a := range args {
		if a.Buf == nil || a.Buf.obj == 0 || a.Off >= a.Buf.size {
			e.err = fmt.Errorf("metal: %s argument %d: no buffer, or offset %d past its end", p.Name, i, a.Off)
			return
		}
		e.bufs[i], e.offs[i] = a.Buf.obj, a.Off
	}
	msg.SetPipeline.call(e.enc, msg.SetPipeline.sel, p.obj)
	if len(args) > 0 {
		msg.SetBuffers.call(e.enc, msg.SetBuffers.sel, &e.bufs[0], &e.offs[0], nsRange{0, uint64(len(args))})
	}
	if len(params) > 0 {
		msg.SetBytes.call(e.enc, msg.SetBytes.sel, unsafe.Pointer(unsafe.SliceData(params)), uint64(len(params)), uint64(len(args)))
	}
	msg.Dispatch.call(e.enc, msg.Dispatch.sel, groups.mtl(), threads.mtl())
}

// Barrier makes the dispatches after it wait for the buffer writes of
// those before it.
func (e *Encoder) Barrier() {
	if e.err == nil {
		const scopeBuffers = 1 // MTLBarrierScopeBuffers
		msg.MemoryBarrier.call(e.enc, msg.MemoryBarrier.sel, scopeBuffers)
	}
}

// Params is the bytes of a parameter struct, for Dispatch.
func Params[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// Pending is a committed command buffer.
type Pending struct {
	cb id
}

// Submit encodes one command buffer with encode and commits it without
// waiting; Wait waits for it. Two Pending buffers in flight let the CPU
// prepare one step while the GPU runs the other.
func (d *Device) Submit(encode func(*Encoder)) (*Pending, error) {
	var p Pending
	err := withPool(func() error {
		cb := msg.CommandBuffer.call(d.queue, msg.CommandBuffer.sel) // autoreleased
		if cb == 0 {
			return fmt.Errorf("metal: the queue made no command buffer")
		}
		const concurrent = 1 // MTLDispatchTypeConcurrent
		e := &Encoder{enc: msg.ComputeEncoder.call(cb, msg.ComputeEncoder.sel, concurrent)}
		if e.enc == 0 {
			return fmt.Errorf("metal: the command buffer made no compute encoder")
		}
		encode(e)
		msg.EndEncoding.call(e.enc, msg.EndEncoding.sel)
		if e.err != nil {
			return e.err // never committed: the pool frees it
		}
		p.cb = msg.Retain.call(cb, msg.Retain.sel)
		msg.Commit.call(cb, msg.Commit.sel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Wait blocks until the command buffer has run (waitUntilCompleted: no
// completion-handler block) and returns its GPU time in seconds, or the
// error Metal reports for it.
func (p *Pending) Wait() (seconds float64, err error) {
	if p.cb == 0 {
		return 0, fmt.Errorf("metal: command buffer waited for twice")
	}
	err = withPool(func() error {
		defer release(&p.cb)
		msg.WaitUntilCompleted.call(p.cb, msg.WaitUntilCompleted.sel)
		const completed = 4 // MTLCommandBufferStatusCompleted
		if st := msg.Status.call(p.cb, msg.Status.sel); st != completed {
			return fmt.Errorf("metal: command buffer ended with status %d: %s", st, errorText(msg.Error.call(p.cb, msg.Error.sel)))
		}
		seconds = msg.GPUEndTime.call(p.cb, msg.GPUEndTime.sel) - msg.GPUStartTime.call(p.cb, msg.GPUStartTime.sel)
		return nil
	})
	return seconds, err
}

// Run encodes, commits and waits for one command buffer.
func (d *Device) Run(encode func(*Encoder)) (seconds float64, err error) {
	p, err := d.Submit(encode)
	if err != nil {
		return 0, err
	}
	return p.Wait()
}
