package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"
)

// Stream is an ordered queue of device work.
type Stream struct {
	c     *Context
	h     uintptr
	label string
	// programmatic launches kernels with programmatic stream
	// serialization (SetProgrammatic); cfg and attrs are the launch
	// configuration of cuLaunchKernelEx (that and a cluster's shape),
	// kept here so a launch allocates nothing.
	programmatic bool
	cfg          launchConfig
	attrs        [2]launchAttribute
}

// launchConfig is CUlaunchConfig (cuda.h, CUDA 12): 56 bytes.
type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	shared                 uint32
	_                      uint32
	stream                 uintptr
	attrs                  *launchAttribute
	numAttrs               uint32
	_                      uint32
}

// launchAttribute is CUlaunchAttribute: the id, padding to 8 bytes and a
// 64-byte value union; 72 bytes.
type launchAttribute struct {
	id    uint32
	_     uint32
	value [64]byte
}

// attrProgrammaticStreamSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; attrClusterDimension
// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, whose value is three unsigned ints.
const (
	attrClusterDimension                = 4
	attrProgrammaticStreamSerialization = 6
)

// MaxClusterBlocks is the most blocks of a thread-block cluster that every
// GPU of compute capability 9.0 runs (the portable size).
const MaxClusterBlocks = 8

// SetProgrammatic chooses how s launches kernels from now on: on, with
// programmatic stream serialization (programmatic dependent launch, also
// when captured into a graph), so that a kernel may be launched before
// the one before it has finished, and must itself wait for it
// (griddepcontrol.wait, which every petal kernel runs first); off, the
// plain launch.
func (s *Stream) SetProgrammatic(on bool) { s.programmatic = on }

// NewStream makes a stream that does not synchronise with the legacy
// default stream; label names it in errors.
func (c *Context) NewStream(label string) (*Stream, error) {
	s := &Stream{c: c, label: label}
	if err := c.do("cuStreamCreate", label, func() uintptr { return lib.cuStreamCreate(&s.h, 1) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Close destroys the stream (its queued work still completes).
func (s *Stream) Close() error {
	if s.h == 0 {
		return nil
	}
	h := s.h
	s.h = 0
	return s.c.do("cuStreamDestroy", s.label, func() uintptr { return lib.cuStreamDestroy(h) })
}

// Sync waits for the stream's work; errors of earlier asynchronous work
// surface here.
func (s *Stream) Sync() error {
	return s.c.do("cuStreamSynchronize", s.label, func() uintptr { return lib.cuStreamSynchronize(s.h) })
}

// CopyToDevice copies len(src) bytes to dst. From pageable memory the call
// returns once src has been staged by the driver, so src may be reused; from
// pinned memory (HostBuffer) it is asynchronous and src must stay unchanged
// until the stream passes this point.
func (s *Stream) CopyToDevice(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return s.c.do("cuMemcpyHtoDAsync", s.label, func() uintptr {
		return lib.cuMemcpyHtoDAsync(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), s.h)
	})
}

// CopyToHost copies len(dst) bytes from src. Into pageable memory it returns
// when the copy is done; into pinned memory it is asynchronous (Sync first).
func (s *Stream) CopyToHost(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return s.c.do("cuMemcpyDtoHAsync", s.label, func() uintptr {
		return lib.cuMemcpyDtoHAsync(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uint64(len(dst)), s.h)
	})
}

// Copy copies n bytes between device buffers.
func (s *Stream) Copy(dst, src Ptr, n int64) error {
	return s.c.do("cuMemcpyDtoDAsync", s.label, func() uintptr { return lib.cuMemcpyDtoDAsync(uint64(dst), uint64(src), uint64(n), s.h) })
}

// Fill32 sets n 32-bit words at dst to v (a float's bits, say NaN to poison
// an output).
func (s *Stream) Fill32(dst Ptr, v uint32, n int64) error {
	return s.c.do("cuMemsetD32Async", s.label, func() uintptr { return lib.cuMemsetD32Async(uint64(dst), v, uint64(n), s.h) })
}

// Alloc is a stream-ordered allocation of size bytes from the device's
// default memory pool (cuMemAllocAsync): usable by work queued on s after
// this call, and by other streams only once they wait for s. With the
// pool keeping what is freed (Context.KeepPoolMemory), an allocation that
// fits memory freed before takes no new mapping from the driver.
func (s *Stream) Alloc(size int64, label string) (Ptr, error) {
	if size <= 0 {
		return 0, fmt.Errorf("cuda: %s: cannot allocate %d bytes", label, size)
	}
	var p uint64
	err := s.c.do("cuMemAllocAsync", label, func() uintptr { return lib.cuMemAllocAsync(&p, uint64(size), s.h) })
	if err != nil {
		if free, total, ierr := s.c.MemInfo(); ierr == nil {
			return 0, fmt.Errorf("%w (asked for %d MiB; %d of %d MiB free)", err, size>>20, free>>20, total>>20)
		}
		return 0, err
	}
	return Ptr(p), nil
}

// Free returns an allocation of Alloc to the pool once the work queued on
// s before it is done; work on other streams that uses it must be waited
// for first.
func (s *Stream) Free(p Ptr) error {
	return s.c.do("cuMemFreeAsync", s.label, func() uintptr { return lib.cuMemFreeAsync(uint64(p), s.h) })
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// D1 is a one-dimensional shape.
func D1(x int) Dim3 { return Dim3{x, 1, 1} }

// Launch queues f on the stream with the given grid, block, dynamic shared
// memory and arguments. The driver copies the arguments before returning,
// so args may be reused at once.
func (s *Stream) Launch(f *Function, grid, block Dim3, shared int, args *Args) error {
	return s.launch(f, grid, block, Dim3{}, shared, args)
}

// LaunchCluster is Launch with the blocks in thread-block clusters of
// cluster blocks (compute capability 9.0; the grid a multiple of the
// cluster in each dimension, at most MaxClusterBlocks a cluster): a
// cluster's blocks run at once on one GPU processing cluster, and may read
// and write each other's shared memory and meet at a cluster barrier.
func (s *Stream) LaunchCluster(f *Function, grid, block, cluster Dim3, shared int, args *Args) error {
	n := cluster.X * cluster.Y * cluster.Z
	if cluster.X < 1 || cluster.Y < 1 || cluster.Z < 1 || n > MaxClusterBlocks ||
		grid.X%cluster.X != 0 || grid.Y%cluster.Y != 0 || grid.Z%cluster.Z != 0 {
		return fmt.Errorf("cuda: %s: clusters of %v blocks for a grid of %v (want 1 to %d blocks a cluster, dividing the grid)",
			f.Name, cluster, grid, MaxClusterBlocks)
	}
	return s.launch(f, grid, block, cluster, shared, args)
}

// launch queues f, in clusters of cluster blocks where cluster.X > 0.
func (s *Stream) launch(f *Function, grid, block, cluster Dim3, shared int, args *Args) error {
	for _, v := range []int{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z} {
		if v < 1 {
			return fmt.Errorf("cuda: %s: launch with grid %v and block %v", f.Name, grid, block)
		}
	}
	if err := s.c.enter(); err != nil {
		return err
	}
	defer s.c.leave()
	var params *unsafe.Pointer
	var pin runtime.Pinner
	if args != nil && args.n > 0 {
		// kernelParams is an array of pointers to the values: Go memory
		// holding Go pointers, so it is pinned for the call.
		pin.Pin(args)
		for i := range args.n {
			args.ptrs[i] = unsafe.Pointer(&args.vals[i])
		}
		if args.blob != nil {
			pin.Pin(&args.blob[0])
			args.ptrs[args.blobAt] = unsafe.Pointer(&args.blob[0])
		}
		params = &args.ptrs[0]
	}
	n := 0
	if s.programmatic {
		s.attrs[n] = launchAttribute{id: attrProgrammaticStreamSerialization}
		s.attrs[n].value[0] = 1 // programmaticStreamSerializationAllowed
		n++
	}
	if cluster.X > 0 {
		s.attrs[n] = launchAttribute{id: attrClusterDimension}
		binary.LittleEndian.PutUint32(s.attrs[n].value[0:], uint32(cluster.X))
		binary.LittleEndian.PutUint32(s.attrs[n].value[4:], uint32(cluster.Y))
		binary.LittleEndian.PutUint32(s.attrs[n].value[8:], uint32(cluster.Z))
		n++
	}
	if n > 0 {
		s.cfg = launchConfig{gridX: uint32(grid.X), gridY: uint32(grid.Y), gridZ: uint32(grid.Z),
			blockX: uint32(block.X), blockY: uint32(block.Y), blockZ: uint32(block.Z), shared: uint32(shared),
			stream: s.h, attrs: &s.attrs[0], numAttrs: uint32(n)}
		pin.Pin(s) // the configuration holds a Go pointer, to s.attrs
		r := lib.cuLaunchKernelEx(unsafe.Pointer(&s.cfg), f.h, params, nil)
		pin.Unpin()
		return check("cuLaunchKernelEx", f.Name, r)
	}
	r := lib.cuLaunchKernel(f.h, uint32(grid.X), uint32(grid.Y), uint32(grid.Z),
		uint32(block.X), uint32(block.Y), uint32(block.Z), uint32(shared), s.h, params, nil)
	pin.Unpin()
	return check("cuLaunchKernel", f.Name, r)
}

// maxArgs is the most kernel arguments Args holds.
const maxArgs = 24

// Args are a kernel's arguments, in order. Each takes an 8-byte slot; a
// 4-byte argument sits in the slot's low half, which is where the kernel
// reads it on the little-endian machines CUDA runs on.
type Args struct {
	vals [maxArgs]uint64
	ptrs [maxArgs]unsafe.Pointer
	n    int
	// blob is the one argument passed by value as a struct (Struct), at
	// slot blobAt.
	blob   []byte
	blobAt int
}

// Reset empties a for reuse.
func (a *Args) Reset() *Args { a.n, a.blob = 0, nil; return a }

// Struct appends a struct passed by value: its bytes as the kernel lays
// them out (one such argument a launch).
func (a *Args) Struct(b []byte) *Args {
	if a.blob != nil {
		panic("cuda: more than one struct argument")
	}
	if len(b) == 0 {
		panic("cuda: an empty struct argument")
	}
	a.blob, a.blobAt = slices.Clone(b), a.n
	return a.add(0)
}

func (a *Args) add(v uint64) *Args {
	if a.n == maxArgs {
		panic("cuda: more than 24 kernel arguments")
	}
	a.vals[a.n] = v
	a.n++
	return a
}

// Ptr appends a device pointer.
func (a *Args) Ptr(p Ptr) *Args { return a.add(uint64(p)) }

// I32 appends an int.
func (a *Args) I32(v int32) *Args { return a.add(uint64(uint32(v))) }

// U32 appends an unsigned int.
func (a *Args) U32(v uint32) *Args { return a.add(uint64(v)) }

// I64 appends a long long.
func (a *Args) I64(v int64) *Args { return a.add(uint64(v)) }

// F32 appends a float.
func (a *Args) F32(v float32) *Args { return a.add(uint64(*(*uint32)(unsafe.Pointer(&v)))) }

// Event marks a point in a stream; two of them time the work between.
type Event struct {
	c *Context
	h uintptr
}

// NewEvent makes an event that records time.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	if err := c.do("cuEventCreate", "", func() uintptr { return lib.cuEventCreate(&e.h, 0) }); err != nil {
		return nil, err
	}
	return e, nil
}

// NewMarker makes an event that records no time, only a point in a stream
// (cheaper to record and to wait for).
func (c *Context) NewMarker() (*Event, error) {
	e := &Event{c: c}
	const disableTiming = 0x2 // CU_EVENT_DISABLE_TIMING
	if err := c.do("cuEventCreate", "", func() uintptr { return lib.cuEventCreate(&e.h, disableTiming) }); err != nil {
		return nil, err
	}
	return e, nil
}

// WaitEvent makes the stream's later work wait until e's stream has
// reached e (its latest Record when WaitEvent is called).
func (s *Stream) WaitEvent(e *Event) error {
	return s.c.do("cuStreamWaitEvent", s.label, func() uintptr { return lib.cuStreamWaitEvent(s.h, e.h, 0) })
}

// Record marks the stream's current point.
func (e *Event) Record(s *Stream) error {
	return e.c.do("cuEventRecord", s.label, func() uintptr { return lib.cuEventRecord(e.h, s.h) })
}

// Sync waits until the stream reaches the event.
func (e *Event) Sync() error {
	return e.c.do("cuEventSynchronize", "", func() uintptr { return lib.cuEventSynchronize(e.h) })
}

// Done reports whether the stream has passed the event's latest Record.
func (e *Event) Done() (bool, error) {
	var r uintptr
	if err := e.c.do("cuEventQuery", "", func() uintptr { r = lib.cuEventQuery(e.h); return 0 }); err != nil {
		return false, err
	}
	const notReady = 600 // CUDA_ERROR_NOT_READY
	if r == notReady {
		return false, nil
	}
	return r == 0, check("cuEventQuery", "", r)
}

// Close destroys the event.
func (e *Event) Close() error {
	if e.h == 0 {
		return nil
	}
	h := e.h
	e.h = 0
	return e.c.do("cuEventDestroy", "", func() uintptr { return lib.cuEventDestroy(h) })
}

// Elapsed is the device time between two recorded events (resolution about
// half a microsecond); end must have completed (Sync it).
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms float32
	if err := start.c.do("cuEventElapsedTime", "", func() uintptr { return lib.cuEventElapsedTime(&ms, start.h, end.h) }); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * 1e6), nil
}

// Graph is captured stream work, not yet runnable.
type Graph struct {
	c *Context
	h uintptr
}

// BeginCapture starts recording the stream's work into a graph instead of
// running it. Relaxed mode: the capture does not forbid other threads'
// driver calls, since Go moves goroutines between threads.
func (s *Stream) BeginCapture() error {
	return s.c.do("cuStreamBeginCapture", s.label, func() uintptr { return lib.cuStreamBeginCapture(s.h, 2) })
}

// EndCapture stops recording and returns the graph of what was queued.
func (s *Stream) EndCapture() (*Graph, error) {
	g := &Graph{c: s.c}
	if err := s.c.do("cuStreamEndCapture", s.label, func() uintptr { return lib.cuStreamEndCapture(s.h, &g.h) }); err != nil {
		return nil, err
	}
	return g, nil
}

// Instantiate makes a runnable graph; the Graph itself may then be closed.
func (g *Graph) Instantiate() (*GraphExec, error) {
	x := &GraphExec{c: g.c}
	if err := g.c.do("cuGraphInstantiateWithFlags", "", func() uintptr { return lib.cuGraphInstantiateWithFlags(&x.h, g.h, 0) }); err != nil {
		return nil, err
	}
	return x, nil
}

// Close destroys the graph.
func (g *Graph) Close() error {
	if g.h == 0 {
		return nil
	}
	h := g.h
	g.h = 0
	return g.c.do("cuGraphDestroy", "", func() uintptr { return lib.cuGraphDestroy(h) })
}

// GraphExec is an instantiated graph: the captured work, replayable.
type GraphExec struct {
	c *Context
	h uintptr
}

// Launch replays the graph on s.
func (x *GraphExec) Launch(s *Stream) error {
	return x.c.do("cuGraphLaunch", s.label, func() uintptr { return lib.cuGraphLaunch(x.h, s.h) })
}

// Close destroys the runnable graph. After its context's Close it does
// nothing: releasing the context destroyed the graph with it.
func (x *GraphExec) Close() error {
	if x.h == 0 {
		return nil
	}
	h := x.h
	x.h = 0
	err := x.c.do("cuGraphExecDestroy", "", func() uintptr { return lib.cuGraphExecDestroy(h) })
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
