package driver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Module is loaded device code.
type Module struct {
	c     *Context
	h     uintptr
	label string
}

// JIT options (CUjit_option) for the compiler's logs.
const (
	jitInfoLog         = 3
	jitInfoLogSize     = 4
	jitErrorLog        = 5
	jitErrorLogSize    = 6
	jitLogBufferLength = 16 << 10
)

// LoadModule loads PTX text (compiled for this GPU by the driver, whose
// cache keeps the result) or a cubin. A PTX the driver rejects gives an
// error with the compiler's log.
func (c *Context) LoadModule(image []byte, label string) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: %s: empty module image", label)
	}
	if image[len(image)-1] != 0 && !bytes.HasPrefix(image, []byte("\x7fELF")) {
		image = append(image[:len(image):len(image)], 0) // PTX text must end in NUL
	}
	errLog, infoLog := make([]byte, jitLogBufferLength), make([]byte, jitLogBufferLength)
	opts := []int32{jitErrorLog, jitErrorLogSize, jitInfoLog, jitInfoLogSize}
	// The values are void*: a log's address (pinned, so it stays valid as an
	// integer) and its size.
	vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), uintptr(len(errLog)),
		uintptr(unsafe.Pointer(&infoLog[0])), uintptr(len(infoLog))}
	m := &Module{c: c, label: label}
	var pin runtime.Pinner
	pin.Pin(&errLog[0])
	pin.Pin(&infoLog[0])
	err := c.do("cuModuleLoadDataEx", label, func() uintptr {
		return lib.cuModuleLoadDataEx(&m.h, unsafe.Pointer(&image[0]), uint32(len(opts)), &opts[0], &vals[0])
	})
	pin.Unpin()
	if err != nil {
		log := strings.TrimSpace(cString(&errLog[0]) + "\n" + cString(&infoLog[0]))
		if log != "" {
			return nil, fmt.Errorf("%w\n%s", err, log)
		}
		return nil, err
	}
	return m, nil
}

// Close unloads the module; its functions become invalid.
func (m *Module) Close() error {
	if m.h == 0 {
		return nil
	}
	h := m.h
	m.h = 0
	return m.c.do("cuModuleUnload", m.label, func() uintptr { return lib.cuModuleUnload(h) })
}

// Function is a kernel entry point of a module.
type Function struct {
	c    *Context
	h    uintptr
	Name string
}

// Function finds the kernel called name (an extern "C" name).
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{c: m.c, Name: name}
	if err := m.c.do("cuModuleGetFunction", m.label+"."+name, func() uintptr { return lib.cuModuleGetFunction(&f.h, m.h, name) }); err != nil {
		return nil, err
	}
	return f, nil
}

// Global is the device address and size of the module's global variable
// called name (an extern "C" name).
func (m *Module) Global(name string) (Ptr, int64, error) {
	var p Ptr
	var n uint64
	if err := m.c.do("cuModuleGetGlobal", m.label+"."+name, func() uintptr { return lib.cuModuleGetGlobal(&p, &n, m.h, name) }); err != nil {
		return 0, 0, err
	}
	return p, int64(n), nil
}

// FuncInfo is what the compiler made of a kernel.
type FuncInfo struct {
	Registers   int // per thread
	LocalBytes  int // per thread stack and spills; 0 in a healthy kernel
	StaticShare int // static shared memory, bytes
	MaxThreads  int // most threads a block may have
	PTXVersion  int // e.g. 80
	SASSVersion int // the binary's architecture, e.g. 90
}

// Function attributes (CUfunction_attribute).
const (
	funcMaxThreads       = 0
	funcSharedBytes      = 1
	funcLocalBytes       = 3
	funcRegisters        = 4
	funcPTXVersion       = 5
	funcBinaryVersion    = 6
	funcMaxDynamicShared = 8
	funcSharedCarveout   = 9 // CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
)

// Info reads the kernel's resource use.
func (f *Function) Info() (FuncInfo, error) {
	var fi FuncInfo
	for _, a := range []struct {
		attr int32
		v    *int
	}{
		{funcRegisters, &fi.Registers}, {funcLocalBytes, &fi.LocalBytes}, {funcSharedBytes, &fi.StaticShare},
		{funcMaxThreads, &fi.MaxThreads}, {funcPTXVersion, &fi.PTXVersion}, {funcBinaryVersion, &fi.SASSVersion},
	} {
		var v int32
		if err := f.c.do("cuFuncGetAttribute", f.Name, func() uintptr { return lib.cuFuncGetAttribute(&v, a.attr, f.h) }); err != nil {
			return fi, err
		}
		*a.v = int(v)
	}
	return fi, nil
}

// SetMaxDynamicShared lets launches of f ask for up to n bytes of dynamic
// shared memory (above 48 KiB a kernel must opt in).
func (f *Function) SetMaxDynamicShared(n int) error {
	return f.c.do("cuFuncSetAttribute", f.Name, func() uintptr { return lib.cuFuncSetAttribute(f.h, funcMaxDynamicShared, int32(n)) })
}

// PreferMaxShared asks that a multiprocessor running the kernel be set up
// with as much shared memory as it can have (a carveout of 100 %), so that
// the blocks of another kernel that need more than this one's can be
// placed beside its blocks, not only once they leave.
func (f *Function) PreferMaxShared() error {
	return f.c.do("cuFuncSetAttribute", f.Name, func() uintptr { return lib.cuFuncSetAttribute(f.h, funcSharedCarveout, 100) })
}

// BlocksPerSM is how many blocks of the given size and dynamic shared
// memory fit on one multiprocessor at once.
func (f *Function) BlocksPerSM(block, shared int) (int, error) {
	var n int32
	err := f.c.do("cuOccupancyMaxActiveBlocksPerMultiprocessor", f.Name, func() uintptr {
		return lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f.h, int32(block), uint64(shared))
	})
	return int(n), err
}

// MaxActiveClusters is how many clusters of cluster blocks of block
// threads and shared bytes of dynamic shared memory the GPU holds at once
// (a grid of more runs them in waves).
func (f *Function) MaxActiveClusters(block, cluster, shared int) (int, error) {
	cfg := launchConfig{gridX: uint32(cluster), gridY: 1, gridZ: 1, blockX: uint32(block), blockY: 1, blockZ: 1, shared: uint32(shared)}
	attr := launchAttribute{id: attrClusterDimension}
	binary.LittleEndian.PutUint32(attr.value[0:], uint32(cluster))
	binary.LittleEndian.PutUint32(attr.value[4:], 1)
	binary.LittleEndian.PutUint32(attr.value[8:], 1)
	cfg.attrs, cfg.numAttrs = &attr, 1
	var n int32
	var pin runtime.Pinner
	pin.Pin(&attr) // the configuration holds a Go pointer to it
	defer pin.Unpin()
	err := f.c.do("cuOccupancyMaxActiveClusters", f.Name, func() uintptr {
		return lib.cuOccupancyMaxActiveClusters(&n, f.h, unsafe.Pointer(&cfg))
	})
	return int(n), err
}
