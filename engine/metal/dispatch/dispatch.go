// Package dispatch is the small interface the Metal backend (engine/metal)
// lowers its programs to: device memory, copies between it and the host,
// and command buffers of kernel dispatches and barriers. The backend's
// lowering is written once against it; engine/metal implements it over a
// real Metal device on macOS, and engine/metal/cudarun over the CUDA driver
// running the same kernels compiled as CUDA, so that the lowering (its
// kernels, parameter structs, grids and barriers) can run on an NVIDIA GPU
// before any Mac sees it.
package dispatch

import "fmt"

// MaxBuffers is the most buffers one dispatch may bind, its parameter
// struct included: Metal's 31 argument-table entries.
const MaxBuffers = 31

// Mem is one allocation of a Dispatcher.
type Mem interface {
	// Size is the allocation's length in bytes.
	Size() int64
}

// Arg is a position in an allocation: Off bytes into Mem.
type Arg struct {
	Mem Mem
	Off int64
}

// Add is the position n bytes after a.
func (a Arg) Add(n int64) Arg { return Arg{a.Mem, a.Off + n} }

// Size is a grid (in threadgroups) or a threadgroup (in threads).
type Size struct{ X, Y, Z int }

// D1 is a one-dimensional size.
func D1(x int) Size { return Size{x, 1, 1} }

// D2 is a two-dimensional size.
func D2(x, y int) Size { return Size{x, y, 1} }

func (s Size) String() string { return fmt.Sprintf("%dx%dx%d", s.X, s.Y, s.Z) }

// Threads is the number of threads (or threadgroups) s holds.
func (s Size) Threads() int { return s.X * s.Y * s.Z }

// Kernel is an entry point a Dispatcher has prepared (a Metal pipeline, a
// CUDA function).
type Kernel interface {
	// Name is the entry point's name, as in its .metal source.
	Name() string
}

// Command is one entry of a command buffer: a dispatch, or (Barrier set) a
// barrier after which dispatches see every buffer write of those before it.
// Dispatches between barriers may run concurrently.
type Command struct {
	Barrier bool

	Kernel Kernel
	// Buffers are bound at indices 0..len-1, Params (a params.h struct's
	// bytes; none for an entry without one) at index len(Buffers).
	Buffers []Arg
	Params  []byte
	Groups  Size // threadgroups in the grid
	Threads Size // threads per threadgroup
}

// Check reports what is wrong with a dispatch before a device sees it.
func (c *Command) Check() error {
	if c.Barrier {
		return nil
	}
	name := "a dispatch"
	if c.Kernel != nil {
		name = c.Kernel.Name()
	}
	n := len(c.Buffers)
	if len(c.Params) > 0 {
		n++
	}
	switch {
	case c.Kernel == nil:
		return fmt.Errorf("metal: a dispatch without a kernel")
	case n > MaxBuffers:
		return fmt.Errorf("metal: %s binds %d buffers with its parameters, more than Metal's %d", name, n, MaxBuffers)
	case c.Groups.X < 1 || c.Groups.Y < 1 || c.Groups.Z < 1 || c.Threads.X < 1 || c.Threads.Y < 1 || c.Threads.Z < 1:
		return fmt.Errorf("metal: %s dispatched on %v threadgroups of %v threads", name, c.Groups, c.Threads)
	case c.Threads.Threads() > 1024:
		return fmt.Errorf("metal: %s dispatched with %d threads per threadgroup, more than 1024", name, c.Threads.Threads())
	}
	for i, a := range c.Buffers {
		if a.Mem == nil || a.Off < 0 || a.Off >= a.Mem.Size() {
			return fmt.Errorf("metal: %s buffer %d: no allocation, or offset %d outside it", name, i, a.Off)
		}
	}
	return nil
}

// Dispatcher is a device the Metal backend runs on. Its calls are ordered
// as one stream: an Upload, a Download or a Copy sees the effect of every
// command buffer submitted before it.
type Dispatcher interface {
	// Device describes the device (for messages and petal doctor).
	Device() string
	// Alloc returns a zeroed allocation of n bytes (n >= 1).
	Alloc(n int64) (Mem, error)
	// Free releases an allocation.
	Free(m Mem)
	// Upload copies src to dst, Download dst from src; both wait for the
	// work before them.
	Upload(dst Arg, src []byte) error
	Download(dst []byte, src Arg) error
	// Copy copies n bytes between two allocations on the device.
	Copy(dst, src Arg, n int64) error
	// Kernel prepares entry point entry of kernel family (the stem of its
	// .metal file, as engine/metal/kernels names it).
	Kernel(family, entry string) (Kernel, error)
	// Submit issues cmds as one command buffer, in order, and may return
	// before they have run.
	Submit(cmds []Command) error
	// Wait waits for every command buffer submitted and returns the first
	// error of one that had not reported it yet.
	Wait() error
	// Close waits for the device and releases what the dispatcher holds.
	Close() error
}

// HostMapper is a Dispatcher that can also wrap host memory as device
// buffers without copying it (Metal's no-copy buffers over a memory-mapped
// checkpoint, which Apple silicon's GPU reads where it lies). A dispatcher
// without it gets every weight copied.
type HostMapper interface {
	// MapHost wraps region, which starts on a page and stays mapped until
	// the result is released, as read-only buffers: views under the
	// device's longest buffer, overlapping so that every range of up to
	// span bytes lies wholly inside one of them.
	MapHost(region []byte, span int64) (Mapped, error)
}

// Mapped is host memory a HostMapper wrapped.
type Mapped interface {
	// Locate is the position, in the view that wholly holds them, of bytes
	// [off, off+n) of the region. A kernel may only read there: the
	// buffers are never the destination of an Upload or a Copy, nor bound
	// where a kernel writes.
	Locate(off, n int64) (Arg, error)
	// Views is the number of buffers the region was wrapped in.
	Views() int
	// Release releases the buffers; the caller waits first for the work
	// that reads them. The region may be unmapped afterwards, and a
	// dispatch binding them fails.
	Release()
}

// TensorOps is a Dispatcher that can run kernels on Metal 4's tensor
// operations (gemm_tensor.metal's matmul2d): on a Mac, a device in
// MTLGPUFamilyMetal4 with the M5's neural accelerators (Apple10) whose
// compiler builds the library at MSL 4.0; through the CUDA dialect, its
// emulation. A dispatcher without it has none.
type TensorOps interface {
	// TensorOps reports nil where the tensor-operation kernels can run,
	// else why not (for the message of the fallback to simdgroup matrices).
	TensorOps() error
}
