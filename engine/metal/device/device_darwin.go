//go:build darwin

package device

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// The libraries, C functions and classes load binds, once per process.
var (
	loadOnce sync.Once
	loadErr  error

	createSystemDefaultDevice func() id
	poolPush                  func() uintptr
	poolPop                   func(uintptr)

	classNSString       id
	classCompileOptions id
	classNSError        id
)

func load() error {
	loadOnce.Do(func() { loadErr = bind() })
	return loadErr
}

func bind() error {
	const mode = purego.RTLD_NOW | purego.RTLD_GLOBAL
	// A command-line process gets no default device unless Core Graphics is
	// loaded (Apple's MTLCreateSystemDefaultDevice documentation).
	for _, fw := range []string{"Foundation", "CoreGraphics"} {
		if _, err := purego.Dlopen("/System/Library/Frameworks/"+fw+".framework/"+fw, mode); err != nil {
			return fmt.Errorf("%w: cannot open %s.framework: %v", ErrUnsupported, fw, err)
		}
	}
	mtl, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", mode)
	if err != nil {
		return fmt.Errorf("%w: cannot open Metal.framework: %v", ErrUnsupported, err)
	}
	libobjc, err := purego.Dlopen("/usr/lib/libobjc.A.dylib", mode)
	if err != nil {
		return fmt.Errorf("%w: cannot open libobjc: %v", ErrUnsupported, err)
	}
	for _, f := range []struct {
		lib  uintptr
		name string
		fn   any
	}{
		{mtl, "MTLCreateSystemDefaultDevice", &createSystemDefaultDevice},
		{libobjc, "objc_autoreleasePoolPush", &poolPush},
		{libobjc, "objc_autoreleasePoolPop", &poolPop},
	} {
		addr, err := purego.Dlsym(f.lib, f.name)
		if err != nil || addr == 0 {
			return fmt.Errorf("%w: no %s: %v", ErrUnsupported, f.name, err)
		}
		purego.RegisterFunc(f.fn, addr)
	}
	msgSend, err := purego.Dlsym(libobjc, "objc_msgSend")
	if err != nil {
		return fmt.Errorf("%w: no objc_msgSend: %v", ErrUnsupported, err)
	}
	names, msgs := messageTable()
	for i, name := range names {
		msgs[i].bind(sel(objc.RegisterName(name)), msgSend)
	}
	classNSString = id(objc.GetClass("NSString"))
	classCompileOptions = id(objc.GetClass("MTLCompileOptions"))
	classNSError = id(objc.GetClass("NSError"))
	if classNSString == 0 || classCompileOptions == 0 || classNSError == 0 {
		return fmt.Errorf("%w: the NSString, MTLCompileOptions or NSError class is missing", ErrUnsupported)
	}
	return nil
}

// withPool runs fn inside an autorelease pool on one OS thread: a pool
// belongs to the thread that pushed it, so the goroutine stays locked to
// its thread until the pool is popped, also when fn panics.
func withPool(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := poolPush()
	defer poolPop(p)
	return fn()
}

// Info describes the device, as read from Metal.
type Info struct {
	Name                 string
	MaxBufferLength      uint64 // the largest buffer, hence a no-copy view
	UnifiedMemory        bool
	WorkingSet           uint64 // recommendedMaxWorkingSetSize
	MaxThreadgroupMemory uint64
	AppleFamily          int // the highest MTLGPUFamilyApple<N> supported (7 is M1, 10 the M5), 0 if none
	// Metal4: supportsFamily:MTLGPUFamilyMetal4 (macOS 26 and a GPU that
	// has it): MSL 4.0 and its tensors (TensorOps).
	Metal4 bool
}

// Device is the system default Metal device and its command queue.
type Device struct {
	Info  Info
	dev   id
	queue id
}

// Open opens the system default device and makes a command queue.
func Open() (*Device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	d := &Device{}
	err := withPool(func() error {
		d.dev = createSystemDefaultDevice()
		if d.dev == 0 {
			return fmt.Errorf("%w: MTLCreateSystemDefaultDevice returned no device", ErrUnsupported)
		}
		d.queue = msg.NewCommandQueue.call(d.dev, msg.NewCommandQueue.sel)
		if d.queue == 0 {
			return fmt.Errorf("metal: the device made no command queue")
		}
		d.Info = Info{
			Name:                 goString(msg.Name.call(d.dev, msg.Name.sel)),
			MaxBufferLength:      msg.MaxBufferLength.call(d.dev, msg.MaxBufferLength.sel),
			UnifiedMemory:        msg.HasUnifiedMemory.call(d.dev, msg.HasUnifiedMemory.sel),
			WorkingSet:           msg.RecommendedWorkingSet.call(d.dev, msg.RecommendedWorkingSet.sel),
			MaxThreadgroupMemory: msg.MaxThreadgroupMemory.call(d.dev, msg.MaxThreadgroupMemory.sel),
		}
		for n := 1; n <= 12; n++ { // MTLGPUFamilyApple1 is 1001
			if msg.SupportsFamily.call(d.dev, msg.SupportsFamily.sel, int64(1000+n)) {
				d.Info.AppleFamily = n
			}
		}
		// An older macOS knows no such family and answers no.
		d.Info.Metal4 = msg.SupportsFamily.call(d.dev, msg.SupportsFamily.sel, familyMetal4)
		return nil
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the queue and the device.
func (d *Device) Close() {
	release(&d.queue)
	release(&d.dev)
}

func release(o *id) {
	if *o != 0 {
		msg.Release.call(*o, msg.Release.sel)
		*o = 0
	}
}

// Buffer is device memory in shared storage: its contents are the same
// bytes for the CPU and the GPU.
type Buffer struct {
	obj  id
	ptr  unsafe.Pointer
	size uint64
}

// Resource options: shared storage (0 << 4), default CPU cache mode and
// hazard tracking.
const storageShared = 0

// NewBuffer allocates size bytes in shared storage.
func (d *Device) NewBuffer(size uint64) (*Buffer, error) {
	if size == 0 || size > d.Info.MaxBufferLength {
		return nil, fmt.Errorf("metal: a buffer of %d bytes (the device allows 1 to %d)", size, d.Info.MaxBufferLength)
	}
	obj := msg.NewBuffer.call(d.dev, msg.NewBuffer.sel, size, storageShared)
	if obj == 0 {
		return nil, fmt.Errorf("metal: the device could not allocate %d bytes", size)
	}
	return &Buffer{obj: obj, ptr: msg.Contents.call(obj, msg.Contents.sel), size: size}, nil
}

// Bytes is the buffer's contents.
func (b *Buffer) Bytes() []byte { return unsafe.Slice((*byte)(b.ptr), b.size) }

// Len is the buffer's length in bytes.
func (b *Buffer) Len() uint64 { return b.size }

// Release frees the buffer (a no-copy view leaves its memory alone).
func (b *Buffer) Release() { release(&b.obj) }

// Mapped is a memory-mapped region wrapped as no-copy buffers.
type Mapped struct {
	Plan    ViewPlan
	Buffers []*Buffer
}

// WrapMapped wraps region, which must start on a 16 KiB page (as an mmap
// call returns it), without copying: one no-copy buffer per view of
// PlanViews, span the largest tensor in it. The region must stay mapped
// until the buffers are released; they have no deallocator (a hand-built
// block would be needed for one).
func (d *Device) WrapMapped(region []byte, span uint64) (*Mapped, error) {
	return d.wrapMapped(region, d.Info.MaxBufferLength, span)
}

func (d *Device) wrapMapped(region []byte, maxLen, span uint64) (*Mapped, error) {
	if len(region) == 0 {
		return nil, fmt.Errorf("metal: cannot wrap an empty mapping")
	}
	base := unsafe.Pointer(unsafe.SliceData(region))
	if uintptr(base)%PageSize != 0 {
		return nil, fmt.Errorf("metal: a mapping at %p does not start on a 16 KiB page", base)
	}
	plan, err := PlanViews(uint64(len(region)), maxLen, span)
	if err != nil {
		return nil, err
	}
	m := &Mapped{Plan: plan}
	for _, v := range plan.Views {
		p := unsafe.Add(base, v.Offset)
		obj := msg.NewBufferNoCopy.call(d.dev, msg.NewBufferNoCopy.sel, p, v.Length, storageShared, 0)
		if obj == 0 {
			m.Release()
			return nil, fmt.Errorf("metal: the device refused a no-copy view of %d bytes at offset %d", v.Length, v.Offset)
		}
		m.Buffers = append(m.Buffers, &Buffer{obj: obj, ptr: p, size: v.Length})
	}
	return m, nil
}

// Locate returns the buffer holding bytes [off, off+n) of the region and
// the offset to bind it at.
func (m *Mapped) Locate(off, n uint64) (*Buffer, uint64, error) {
	k, within, err := m.Plan.Locate(off, n)
	if err != nil {
		return nil, 0, err
	}
	return m.Buffers[k], within, nil
}

// Release releases every view.
func (m *Mapped) Release() {
	for _, b := range m.Buffers {
		b.Release()
	}
	m.Buffers = nil
}

// nsString makes an NSString (+1, the caller releases it) from s.
func nsString(s string) id {
	const utf8 = 4 // NSUTF8StringEncoding
	obj := msg.Alloc.call(classNSString, msg.Alloc.sel)
	return msg.InitWithBytes.call(obj, msg.InitWithBytes.sel, unsafe.Pointer(unsafe.StringData(s)), uint64(len(s)), utf8)
}

// goString copies an NSString.
func goString(s id) string {
	if s == 0 {
		return ""
	}
	p := msg.UTF8String.call(s, msg.UTF8String.sel)
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// errorText is an NSError's localizedDescription.
func errorText(e id) string {
	if e == 0 {
		return "no error object"
	}
	return goString(msg.LocalizedDescription.call(e, msg.LocalizedDescription.sel))
}
