// Package driver is petal's CUDA device layer: the NVIDIA driver API
// (libcuda) loaded at run time through purego, with no cgo and no CUDA
// toolkit. It covers what a backend needs: a context, streams, plain device
// allocations (never managed memory), pinned host staging, events for
// timing, modules loaded from PTX (compiled by the driver) or cubin, kernel
// launch, and CUDA graph capture and replay.
//
// The driver's current context is a property of the OS thread, so every
// method that needs it locks the calling goroutine to its thread and makes
// the context current for the duration of the call; methods may be called
// from any goroutine. Errors are *Error values carrying the CUDA error's
// name and a label saying what the call was for.
//
// Only Linux has CUDA: elsewhere Open returns ErrUnsupportedOS.
package driver

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// MinComputeMajor is the oldest GPU generation petal's kernels are built for
// (sm_90, Hopper).
const MinComputeMajor = 9

// Device describes a GPU.
type Device struct {
	Ordinal      int
	Name         string
	Major, Minor int   // compute capability
	SMs          int   // multiprocessors
	Memory       int64 // bytes of device memory
	L2           int   // bytes of L2 cache
	SharedOptIn  int   // most shared memory a block may opt in to, bytes
	DriverAPI    int   // the driver's CUDA version, e.g. 13000
	MemoryPools  bool  // stream-ordered allocation from memory pools (cuMemAllocAsync)
	handle       int32 // CUdevice
	sharedPerSM  int
	threadsPerSM int
}

func (d Device) String() string {
	return fmt.Sprintf("GPU %d: %s (compute capability %d.%d, %d multiprocessors, %.1f GiB)",
		d.Ordinal, d.Name, d.Major, d.Minor, d.SMs, float64(d.Memory)/(1<<30))
}

// Device attributes (CUdevice_attribute).
const (
	attrMultiprocessors  = 16
	attrL2Bytes          = 38
	attrThreadsPerSM     = 39
	attrComputeMajor     = 75
	attrComputeMinor     = 76
	attrSharedPerSM      = 81
	attrSharedOptInBlock = 97
	attrMemoryPools      = 115 // CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
)

// Devices lists the GPUs the driver sees.
func Devices() ([]Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	var n int32
	if err := check("cuDeviceGetCount", "", lib.cuDeviceGetCount(&n)); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, ErrNoDevice
	}
	devs := make([]Device, n)
	for i := range devs {
		d, err := describe(i)
		if err != nil {
			return nil, err
		}
		devs[i] = d
	}
	return devs, nil
}

func describe(ordinal int) (Device, error) {
	d := Device{Ordinal: ordinal}
	if err := check("cuDeviceGet", "", lib.cuDeviceGet(&d.handle, int32(ordinal))); err != nil {
		return d, err
	}
	var name [256]byte
	if err := check("cuDeviceGetName", "", lib.cuDeviceGetName(&name[0], int32(len(name)), d.handle)); err != nil {
		return d, err
	}
	d.Name = cString(&name[0])
	var pools int
	for _, a := range []struct {
		attr int32
		v    *int
	}{
		{attrComputeMajor, &d.Major}, {attrComputeMinor, &d.Minor}, {attrMultiprocessors, &d.SMs},
		{attrL2Bytes, &d.L2}, {attrSharedOptInBlock, &d.SharedOptIn}, {attrSharedPerSM, &d.sharedPerSM},
		{attrThreadsPerSM, &d.threadsPerSM}, {attrMemoryPools, &pools},
	} {
		var v int32
		if err := check("cuDeviceGetAttribute", fmt.Sprintf("attribute %d", a.attr), lib.cuDeviceGetAttribute(&v, a.attr, d.handle)); err != nil {
			return d, err
		}
		*a.v = int(v)
	}
	d.MemoryPools = pools != 0
	var mem uint64
	if err := check("cuDeviceTotalMem", "", lib.cuDeviceTotalMem(&mem, d.handle)); err != nil {
		return d, err
	}
	d.Memory = int64(mem)
	var ver int32
	if err := check("cuDriverGetVersion", "", lib.cuDriverGetVersion(&ver)); err != nil {
		return d, err
	}
	d.DriverAPI = int(ver)
	return d, nil
}

// Context is the primary context of one GPU, the one every library in the
// process shares.
type Context struct {
	dev Device
	// mu is held for reading by every call into the driver and for
	// writing by Close: a call racing the release (a collected program's
	// graph being destroyed from a cleanup goroutine) either finishes
	// first or finds the context closed, never runs on a released one.
	mu sync.RWMutex
	h  uintptr // CUcontext; 0 once closed
}

// Open makes a context on GPU ordinal. It fails with ErrUnsupportedOS,
// ErrNoDriver or ErrNoDevice where there is no CUDA, and with ErrGPUTooOld
// (naming the GPU found) for a GPU older than sm_90.
func Open(ordinal int) (*Context, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= len(devs) {
		return nil, fmt.Errorf("cuda: GPU %d asked for, but the driver sees %d (0 to %d)", ordinal, len(devs), len(devs)-1)
	}
	d := devs[ordinal]
	if d.Major < MinComputeMajor {
		return nil, fmt.Errorf("%w: found %s; the kernels need compute capability %d.0 (Hopper) or newer",
			ErrGPUTooOld, d, MinComputeMajor)
	}
	c := &Context{dev: d}
	if err := check("cuDevicePrimaryCtxRetain", d.Name, lib.cuDevicePrimaryCtxRetain(&c.h, d.handle)); err != nil {
		return nil, err
	}
	return c, nil
}

// Device describes the context's GPU.
func (c *Context) Device() Device { return c.dev }

// Close releases the context; everything made in it must be freed first.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return nil
	}
	c.h = 0
	return check("cuDevicePrimaryCtxRelease", c.dev.Name, lib.cuDevicePrimaryCtxRelease(c.dev.handle))
}

// enter locks the goroutine to its OS thread and makes c current there;
// every successful enter is paired with leave.
// A closed context gives ErrClosed.
func (c *Context) enter() error {
	c.mu.RLock()
	if c.h == 0 {
		c.mu.RUnlock()
		return ErrClosed
	}
	runtime.LockOSThread()
	if err := check("cuCtxSetCurrent", c.dev.Name, lib.cuCtxSetCurrent(c.h)); err != nil {
		runtime.UnlockOSThread()
		c.mu.RUnlock()
		return err
	}
	return nil
}

func (c *Context) leave() {
	runtime.UnlockOSThread()
	c.mu.RUnlock()
}

// do runs one driver call with c current.
func (c *Context) do(call, label string, f func() uintptr) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	return check(call, label, f())
}

// Sync waits for all work on the GPU; errors from earlier asynchronous work
// (a kernel's bad address) surface here.
func (c *Context) Sync() error {
	return c.do("cuCtxSynchronize", c.dev.Name, lib.cuCtxSynchronize)
}

// MemInfo returns the free and total device memory in bytes.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = c.do("cuMemGetInfo", c.dev.Name, func() uintptr { return lib.cuMemGetInfo(&f, &t) })
	return int64(f), int64(t), err
}

// Ptr is a device address.
type Ptr uint64

// Add returns p advanced by n bytes.
func (p Ptr) Add(n int64) Ptr { return p + Ptr(n) }

// Alloc allocates size bytes of plain device memory (never managed memory);
// label names the buffer in errors, an out-of-memory one with the free and
// total memory.
func (c *Context) Alloc(size int64, label string) (Ptr, error) {
	if size <= 0 {
		return 0, fmt.Errorf("cuda: %s: cannot allocate %d bytes", label, size)
	}
	var p uint64
	err := c.do("cuMemAlloc", label, func() uintptr { return lib.cuMemAlloc(&p, uint64(size)) })
	if err != nil {
		if free, total, ierr := c.MemInfo(); ierr == nil {
			return 0, fmt.Errorf("%w (asked for %d MiB; %d of %d MiB free)", err, size>>20, free>>20, total>>20)
		}
		return 0, err
	}
	return Ptr(p), nil
}

// KeepPoolMemory makes the device's default memory pool (Stream.Alloc's)
// keep up to keep bytes of the memory freed to it mapped, rather than hand
// it back to the driver at each synchronisation, and, where reserve > 0,
// maps that many bytes into it now (allocated and freed at once), so that
// later allocations up to that size take none of the driver's mapping
// time.
func (c *Context) KeepPoolMemory(s *Stream, keep, reserve int64) error {
	pool, err := c.defaultPool()
	if err != nil {
		return err
	}
	threshold := uint64(max(keep, 0))
	if err := c.do("cuMemPoolSetAttribute", "release threshold", func() uintptr {
		return lib.cuMemPoolSetAttribute(pool, 4 /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */, unsafe.Pointer(&threshold))
	}); err != nil {
		return err
	}
	if reserve <= 0 {
		return nil
	}
	p, err := s.Alloc(reserve, "the memory pool's reserve")
	if err != nil {
		return err
	}
	if err := s.Free(p); err != nil {
		return err
	}
	return s.Sync()
}

// TrimPool hands the default memory pool's unused memory back to the
// driver (after everything freed to it has been synchronised).
func (c *Context) TrimPool() error {
	pool, err := c.defaultPool()
	if err != nil {
		return err
	}
	return c.do("cuMemPoolTrimTo", "", func() uintptr { return lib.cuMemPoolTrimTo(pool, 0) })
}

func (c *Context) defaultPool() (uintptr, error) {
	var pool uintptr
	err := c.do("cuDeviceGetDefaultMemPool", c.dev.Name, func() uintptr { return lib.cuDeviceGetDefaultMemPool(&pool, c.dev.handle) })
	return pool, err
}

// Free releases an allocation made by Alloc.
func (c *Context) Free(p Ptr) error {
	return c.do("cuMemFree", "", func() uintptr { return lib.cuMemFree(uint64(p)) })
}

// HostBuffer is page-locked (pinned) host memory: copies between it and the
// device run at full bus speed and truly asynchronously.
type HostBuffer struct {
	c     *Context
	p     unsafe.Pointer
	Bytes []byte
}

// AllocHost allocates n bytes of pinned host memory.
func (c *Context) AllocHost(n int64, label string) (*HostBuffer, error) {
	var p unsafe.Pointer
	if err := c.do("cuMemHostAlloc", label, func() uintptr { return lib.cuMemHostAlloc(&p, uint64(n), 0) }); err != nil {
		return nil, err
	}
	return &HostBuffer{c: c, p: p, Bytes: unsafe.Slice((*byte)(p), n)}, nil
}

// Free releases the buffer; its Bytes must not be used afterwards.
func (h *HostBuffer) Free() error {
	if h.p == nil {
		return nil
	}
	p := h.p
	h.p, h.Bytes = nil, nil
	return h.c.do("cuMemFreeHost", "", func() uintptr { return lib.cuMemFreeHost(p) })
}

// RegisterHost page-locks existing host memory (a memory-mapped checkpoint,
// read-only) so the device can copy from it directly; UnregisterHost undoes
// it. b must stay mapped until then, and must not be Go heap memory (the
// garbage collector would not know the driver still uses it).
func (c *Context) RegisterHost(b []byte, readOnly bool) error {
	var flags uint32
	if readOnly {
		flags = 0x08 // CU_MEMHOSTREGISTER_READ_ONLY
	}
	return c.do("cuMemHostRegister", "", func() uintptr {
		return lib.cuMemHostRegister(unsafe.Pointer(unsafe.SliceData(b)), uint64(len(b)), flags)
	})
}

// UnregisterHost undoes RegisterHost.
func (c *Context) UnregisterHost(b []byte) error {
	return c.do("cuMemHostUnregister", "", func() uintptr { return lib.cuMemHostUnregister(unsafe.Pointer(unsafe.SliceData(b))) })
}
