package driver

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// lib holds the libcuda entry points, bound once by load. Every call returns
// a CUresult (an int enum; only the low 32 bits of the return register are
// meaningful). The names are the ABI symbols: the _v2 ones where cuda.h maps
// a call to them.
var lib struct {
	cuInit                                      func(flags uint32) uintptr
	cuDriverGetVersion                          func(v *int32) uintptr
	cuDeviceGetCount                            func(n *int32) uintptr
	cuDeviceGet                                 func(dev *int32, ordinal int32) uintptr
	cuDeviceGetName                             func(name *byte, n int32, dev int32) uintptr
	cuDeviceGetAttribute                        func(v *int32, attr int32, dev int32) uintptr
	cuDeviceTotalMem                            func(bytes *uint64, dev int32) uintptr
	cuDevicePrimaryCtxRetain                    func(ctx *uintptr, dev int32) uintptr
	cuDevicePrimaryCtxRelease                   func(dev int32) uintptr
	cuCtxSetCurrent                             func(ctx uintptr) uintptr
	cuCtxSynchronize                            func() uintptr
	cuGetErrorName                              func(code int32, s **byte) uintptr
	cuGetErrorString                            func(code int32, s **byte) uintptr
	cuMemAlloc                                  func(p *uint64, size uint64) uintptr
	cuMemFree                                   func(p uint64) uintptr
	cuMemAllocAsync                             func(p *uint64, size uint64, s uintptr) uintptr
	cuMemFreeAsync                              func(p uint64, s uintptr) uintptr
	cuDeviceGetDefaultMemPool                   func(pool *uintptr, dev int32) uintptr
	cuMemPoolSetAttribute                       func(pool uintptr, attr int32, v unsafe.Pointer) uintptr
	cuMemPoolTrimTo                             func(pool uintptr, keep uint64) uintptr
	cuMemGetInfo                                func(free, total *uint64) uintptr
	cuMemHostAlloc                              func(p *unsafe.Pointer, size uint64, flags uint32) uintptr
	cuMemFreeHost                               func(p unsafe.Pointer) uintptr
	cuMemHostRegister                           func(p unsafe.Pointer, size uint64, flags uint32) uintptr
	cuMemHostUnregister                         func(p unsafe.Pointer) uintptr
	cuMemcpyHtoDAsync                           func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) uintptr
	cuMemcpyDtoHAsync                           func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) uintptr
	cuMemcpyDtoDAsync                           func(dst, src uint64, n uint64, s uintptr) uintptr
	cuMemsetD32Async                            func(dst uint64, v uint32, n uint64, s uintptr) uintptr
	cuStreamCreate                              func(s *uintptr, flags uint32) uintptr
	cuStreamDestroy                             func(s uintptr) uintptr
	cuStreamSynchronize                         func(s uintptr) uintptr
	cuStreamWaitEvent                           func(s uintptr, e uintptr, flags uint32) uintptr
	cuStreamBeginCapture                        func(s uintptr, mode int32) uintptr
	cuStreamEndCapture                          func(s uintptr, g *uintptr) uintptr
	cuGraphInstantiateWithFlags                 func(exec *uintptr, g uintptr, flags uint64) uintptr
	cuGraphLaunch                               func(exec uintptr, s uintptr) uintptr
	cuGraphExecDestroy                          func(exec uintptr) uintptr
	cuGraphDestroy                              func(g uintptr) uintptr
	cuEventCreate                               func(e *uintptr, flags uint32) uintptr
	cuEventDestroy                              func(e uintptr) uintptr
	cuEventRecord                               func(e uintptr, s uintptr) uintptr
	cuEventSynchronize                          func(e uintptr) uintptr
	cuEventQuery                                func(e uintptr) uintptr
	cuEventElapsedTime                          func(ms *float32, start, end uintptr) uintptr
	cuModuleLoadDataEx                          func(m *uintptr, image unsafe.Pointer, nopt uint32, opts *int32, vals *uintptr) uintptr
	cuModuleUnload                              func(m uintptr) uintptr
	cuModuleGetFunction                         func(f *uintptr, m uintptr, name string) uintptr
	cuModuleGetGlobal                           func(p *Ptr, bytes *uint64, m uintptr, name string) uintptr
	cuFuncGetAttribute                          func(v *int32, attr int32, f uintptr) uintptr
	cuFuncSetAttribute                          func(f uintptr, attr int32, v int32) uintptr
	cuOccupancyMaxActiveBlocksPerMultiprocessor func(n *int32, f uintptr, block int32, shared uint64) uintptr
	cuOccupancyMaxActiveClusters                func(n *int32, f uintptr, cfg unsafe.Pointer) uintptr
	cuLaunchKernel                              func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params *unsafe.Pointer, extra unsafe.Pointer) uintptr
	cuLaunchKernelEx                            func(cfg unsafe.Pointer, f uintptr, params *unsafe.Pointer, extra unsafe.Pointer) uintptr
}

// symbols lists each entry point with the ABI names to try, newest first.
func symbols() []symbol {
	l := &lib
	return []symbol{
		{&l.cuInit, []string{"cuInit"}},
		{&l.cuDriverGetVersion, []string{"cuDriverGetVersion"}},
		{&l.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&l.cuDeviceGet, []string{"cuDeviceGet"}},
		{&l.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&l.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&l.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&l.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&l.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2"}},
		{&l.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&l.cuCtxSynchronize, []string{"cuCtxSynchronize"}},
		{&l.cuGetErrorName, []string{"cuGetErrorName"}},
		{&l.cuGetErrorString, []string{"cuGetErrorString"}},
		{&l.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&l.cuMemFree, []string{"cuMemFree_v2"}},
		{&l.cuMemAllocAsync, []string{"cuMemAllocAsync"}},
		{&l.cuMemFreeAsync, []string{"cuMemFreeAsync"}},
		{&l.cuDeviceGetDefaultMemPool, []string{"cuDeviceGetDefaultMemPool"}},
		{&l.cuMemPoolSetAttribute, []string{"cuMemPoolSetAttribute"}},
		{&l.cuMemPoolTrimTo, []string{"cuMemPoolTrimTo"}},
		{&l.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&l.cuMemHostAlloc, []string{"cuMemHostAlloc"}},
		{&l.cuMemFreeHost, []string{"cuMemFreeHost"}},
		{&l.cuMemHostRegister, []string{"cuMemHostRegister_v2"}},
		{&l.cuMemHostUnregister, []string{"cuMemHostUnregister"}},
		{&l.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}},
		{&l.cuMemcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}},
		{&l.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}},
		{&l.cuMemsetD32Async, []string{"cuMemsetD32Async"}},
		{&l.cuStreamCreate, []string{"cuStreamCreate"}},
		{&l.cuStreamDestroy, []string{"cuStreamDestroy_v2"}},
		{&l.cuStreamSynchronize, []string{"cuStreamSynchronize"}},
		{&l.cuStreamWaitEvent, []string{"cuStreamWaitEvent"}},
		{&l.cuStreamBeginCapture, []string{"cuStreamBeginCapture_v2"}},
		{&l.cuStreamEndCapture, []string{"cuStreamEndCapture"}},
		{&l.cuGraphInstantiateWithFlags, []string{"cuGraphInstantiateWithFlags"}},
		{&l.cuGraphLaunch, []string{"cuGraphLaunch"}},
		{&l.cuGraphExecDestroy, []string{"cuGraphExecDestroy"}},
		{&l.cuGraphDestroy, []string{"cuGraphDestroy"}},
		{&l.cuEventCreate, []string{"cuEventCreate"}},
		{&l.cuEventDestroy, []string{"cuEventDestroy_v2"}},
		{&l.cuEventRecord, []string{"cuEventRecord"}},
		{&l.cuEventSynchronize, []string{"cuEventSynchronize"}},
		{&l.cuEventQuery, []string{"cuEventQuery"}},
		{&l.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{&l.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}},
		{&l.cuModuleUnload, []string{"cuModuleUnload"}},
		{&l.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&l.cuModuleGetGlobal, []string{"cuModuleGetGlobal_v2"}},
		{&l.cuFuncGetAttribute, []string{"cuFuncGetAttribute"}},
		{&l.cuFuncSetAttribute, []string{"cuFuncSetAttribute"}},
		{&l.cuOccupancyMaxActiveBlocksPerMultiprocessor, []string{"cuOccupancyMaxActiveBlocksPerMultiprocessor"}},
		{&l.cuOccupancyMaxActiveClusters, []string{"cuOccupancyMaxActiveClusters"}},
		{&l.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&l.cuLaunchKernelEx, []string{"cuLaunchKernelEx"}},
	}
}

// symbol is one entry point: a pointer to its function variable and the
// names it may have in the library.
type symbol struct {
	fn    any
	names []string
}

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens libcuda, binds every entry point and initialises the driver,
// once per process.
func load() error {
	loadOnce.Do(func() {
		if loadErr = openLibrary(symbols()); loadErr != nil {
			return
		}
		if r := lib.cuInit(0); r != 0 {
			e := newError("cuInit", "", r)
			if e.Code == errNoDevice {
				loadErr = fmt.Errorf("%w (%v)", ErrNoDevice, e)
				return
			}
			loadErr = e
		}
	})
	return loadErr
}

// Errors a caller can test for with errors.Is; a GPU test skips on the
// first three.
var (
	// ErrUnsupportedOS: this build has no CUDA support (not Linux).
	ErrUnsupportedOS = errors.New("cuda: CUDA is only available on Linux")
	// ErrClosed: a call on a context after its Close.
	ErrClosed = errors.New("cuda: the context is closed")
	// ErrNoDriver: libcuda (the NVIDIA driver's library) cannot be loaded.
	ErrNoDriver = errors.New("cuda: the NVIDIA driver library libcuda.so.1 could not be loaded (is an NVIDIA driver installed?)")
	// ErrNoDevice: the driver is there but sees no GPU.
	ErrNoDevice = errors.New("cuda: no NVIDIA GPU found")
	// ErrGPUTooOld: the GPU is older than the kernels need.
	ErrGPUTooOld = errors.New("cuda: the GPU is older than petal's CUDA kernels need")
)

// Unavailable reports whether err says that this machine has no usable CUDA
// at all (no Linux, no driver, no GPU), as opposed to a failure on a GPU.
func Unavailable(err error) bool {
	return errors.Is(err, ErrUnsupportedOS) || errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice)
}

const errNoDevice = 100 // CUDA_ERROR_NO_DEVICE

// Error is a failed driver call: which call, what it was doing (the label:
// a buffer's or kernel's name), and the CUDA error's name and description.
type Error struct {
	Call  string // the driver entry point, e.g. "cuMemAlloc"
	Label string // what the call was for; may be empty
	Code  int    // the CUresult
	Name  string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc  string // the driver's description
}

func (e *Error) Error() string {
	s := "cuda: "
	if e.Label != "" {
		s += e.Label + ": "
	}
	s += fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
	if e.Desc != "" {
		s += ": " + e.Desc
	}
	return s
}

// newError describes a non-zero CUresult r returned by call.
func newError(call, label string, r uintptr) *Error {
	code := int32(uint32(r))
	e := &Error{Call: call, Label: label, Code: int(code), Name: fmt.Sprintf("CUDA error %d", code)}
	if lib.cuGetErrorName != nil {
		var p *byte
		if lib.cuGetErrorName(code, &p) == 0 && p != nil {
			e.Name = cString(p)
		}
		p = nil
		if lib.cuGetErrorString(code, &p) == 0 && p != nil {
			e.Desc = cString(p)
		}
	}
	return e
}

// check turns a CUresult into nil or an *Error.
func check(call, label string, r uintptr) error {
	if uint32(r) == 0 {
		return nil
	}
	return newError(call, label, r)
}

// cString copies the NUL-terminated string at p (the driver's own memory).
func cString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}
