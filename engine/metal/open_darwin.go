//go:build darwin

package metal

import (
	"fmt"

	"petal/engine/metal/device"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// Open opens the system default Metal device and makes a backend on it.
// Where there is none the error wraps device.ErrUnsupported.
func Open(o Options) (*Backend, error) {
	dev, err := device.Open()
	if err != nil {
		return nil, err
	}
	b, err := New(&deviceDispatcher{dev: dev, libs: map[string]*device.Library{}}, o)
	if err != nil {
		dev.Close()
		return nil, err
	}
	return b, nil
}

// compileOptions are the settings every library is compiled with, both
// read back by device.Compile: MSL 3.1, and safe math (the kernels rely on
// fma kept and nothing reassociated: rowmath.h's exp_acc, rope.h); the
// tensor-operation family (kernels.NeedsMSL4) MSL 4.0.
var compileOptions = device.CompileOptions{Language: device.MSL31, Math: device.MathSafe}

func compileOptionsFor(family string) device.CompileOptions {
	o := compileOptions
	if kernels.NeedsMSL4(family) {
		o.Language = device.MSL40
	}
	return o
}

// deviceDispatcher is the dispatch.Dispatcher of a Metal device: buffers
// in shared storage (the CPU copies into and out of them once the GPU is
// done with the work before), a library per kernel family compiled from
// the embedded MSL on first use, a command buffer per Submit with a
// concurrent compute encoder, waited for with waitUntilCompleted.
type deviceDispatcher struct {
	dev     *device.Device
	libs    map[string]*device.Library
	pending []*device.Pending
}

type deviceMem struct {
	b *device.Buffer
	n int64
	// view: a no-copy view of a memory map (MapHost), read-only, released
	// with its mappedViews, never by Free
	view bool
}

func (m *deviceMem) Size() int64 { return m.n }

func (d *deviceDispatcher) Device() string {
	metal4 := ""
	if d.dev.Info.Metal4 {
		metal4 = ", Metal 4"
	}
	return fmt.Sprintf("%s (Apple GPU family %d%s)", d.dev.Info.Name, d.dev.Info.AppleFamily, metal4)
}

func (d *deviceDispatcher) Alloc(n int64) (dispatch.Mem, error) {
	if n < 1 {
		return nil, fmt.Errorf("metal: an allocation of %d bytes", n)
	}
	b, err := d.dev.NewBuffer(uint64(n))
	if err != nil {
		return nil, err
	}
	clear(b.Bytes())
	return &deviceMem{b: b, n: n}, nil
}

func (d *deviceDispatcher) Free(m dispatch.Mem) {
	if dm, ok := m.(*deviceMem); ok && dm.b != nil && !dm.view {
		dm.b.Release()
		dm.b = nil
	}
}

// bytesAt is n bytes of a's allocation from a's offset, as the CPU sees
// them, to be written where write is set (never a view of a memory map).
func bytesAt(a dispatch.Arg, n int64, write bool) ([]byte, error) {
	dm, ok := a.Mem.(*deviceMem)
	switch {
	case !ok || dm == nil:
		return nil, fmt.Errorf("metal: a buffer that is not this device's")
	case dm.b == nil:
		return nil, fmt.Errorf("metal: a freed buffer")
	case write && dm.view:
		return nil, fmt.Errorf("metal: a write into a read-only view of the checkpoint's memory map")
	case a.Off < 0 || a.Off+n > dm.n:
		return nil, fmt.Errorf("metal: bytes [%d, %d) of a %d-byte buffer", a.Off, a.Off+n, dm.n)
	}
	return dm.b.Bytes()[a.Off : a.Off+n], nil
}

// The host's copies wait for the GPU first: the memory is shared, and the
// work before a copy may read or write it.

func (d *deviceDispatcher) Upload(dst dispatch.Arg, src []byte) error {
	if err := d.Wait(); err != nil {
		return err
	}
	b, err := bytesAt(dst, int64(len(src)), true)
	if err != nil {
		return err
	}
	copy(b, src)
	return nil
}

func (d *deviceDispatcher) Download(dst []byte, src dispatch.Arg) error {
	if err := d.Wait(); err != nil {
		return err
	}
	b, err := bytesAt(src, int64(len(dst)), false)
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

func (d *deviceDispatcher) Copy(dst, src dispatch.Arg, n int64) error {
	if err := d.Wait(); err != nil {
		return err
	}
	to, err := bytesAt(dst, n, true)
	if err != nil {
		return err
	}
	from, err := bytesAt(src, n, false)
	if err != nil {
		return err
	}
	copy(to, from)
	return nil
}

var _ dispatch.HostMapper = (*deviceDispatcher)(nil)

// MapHost wraps a memory map as no-copy buffers in shared storage, views
// of 16 KiB pages under the device's maxBufferLength (device.WrapMapped):
// the GPU reads the weights where the page cache holds them.
func (d *deviceDispatcher) MapHost(region []byte, span int64) (dispatch.Mapped, error) {
	if span < 1 {
		return nil, fmt.Errorf("metal: wrapping a memory map for tensors of %d bytes", span)
	}
	m, err := d.dev.WrapMapped(region, uint64(span))
	if err != nil {
		return nil, err
	}
	v := &mappedViews{m: m}
	for _, b := range m.Buffers {
		v.views = append(v.views, &deviceMem{b: b, n: int64(b.Len()), view: true})
	}
	return v, nil
}

// mappedViews is a memory map wrapped by MapHost.
type mappedViews struct {
	m     *device.Mapped
	views []*deviceMem // m.Buffers, as this dispatcher's memory
}

func (v *mappedViews) Locate(off, n int64) (dispatch.Arg, error) {
	if off < 0 || n < 1 {
		return dispatch.Arg{}, fmt.Errorf("metal: bytes [%d, %d) of a memory map", off, off+n)
	}
	k, within, err := v.m.Plan.Locate(uint64(off), uint64(n))
	if err != nil {
		return dispatch.Arg{}, err
	}
	if k >= len(v.views) || v.views[k].b == nil {
		return dispatch.Arg{}, fmt.Errorf("metal: a memory map whose views were released")
	}
	return dispatch.Arg{Mem: v.views[k], Off: int64(within)}, nil
}

func (v *mappedViews) Views() int { return len(v.views) }

// Release releases the views; a dispatch still binding one is refused
// (Submit's check of freed buffers).
func (v *mappedViews) Release() {
	for _, dm := range v.views {
		dm.b = nil
	}
	v.m.Release()
}

type pipeline struct{ p *device.Pipeline }

func (p pipeline) Name() string { return p.p.Name }

// library is family's library, compiled on first use.
func (d *deviceDispatcher) library(family string) (*device.Library, error) {
	if lib, ok := d.libs[family]; ok {
		return lib, nil
	}
	src, err := kernels.Source(family)
	if err != nil {
		return nil, err
	}
	lib, err := d.dev.Compile(src, compileOptionsFor(family))
	if err != nil {
		return nil, fmt.Errorf("metal: %s.metal: %w", family, err)
	}
	d.libs[family] = lib
	return lib, nil
}

var _ dispatch.TensorOps = (*deviceDispatcher)(nil)

// TensorOps is nil where the device takes gemm=tensor: in
// MTLGPUFamilyMetal4 and an Apple10 GPU (device.TensorOps), and its
// compiler builds gemm_tensor.metal at MSL 4.0 with a pipeline for each of
// its kernels, done here, at open, so that a refusal falls back to
// gemm=simd rather than failing the first prefill.
func (d *deviceDispatcher) TensorOps() error {
	if err := device.TensorOps(d.dev.Info.AppleFamily, d.dev.Info.Metal4); err != nil {
		return fmt.Errorf("%s: %w", d.Device(), err)
	}
	lib, err := d.library(kernels.TensorFamily)
	if err != nil {
		return err
	}
	for _, e := range []string{"gemm_tensor_dense_f32", "gemm_tensor_dense_bf16", "gemm_tensor_gateup", "gemm_tensor_down"} {
		if _, err := lib.Pipeline(e); err != nil {
			return fmt.Errorf("metal: %s.metal: %w", kernels.TensorFamily, err)
		}
	}
	return nil
}

func (d *deviceDispatcher) Kernel(family, entry string) (dispatch.Kernel, error) {
	lib, err := d.library(family)
	if err != nil {
		return nil, err
	}
	p, err := lib.Pipeline(entry)
	if err != nil {
		return nil, err
	}
	return pipeline{p}, nil
}

// Submit checks every command, then encodes them into one command buffer
// and commits it.
func (d *deviceDispatcher) Submit(cmds []dispatch.Command) error {
	for i := range cmds {
		c := &cmds[i]
		if c.Barrier {
			continue
		}
		if err := c.Check(); err != nil {
			return err
		}
		if _, ok := c.Kernel.(pipeline); !ok {
			return fmt.Errorf("metal: kernel %s was not prepared by this device", c.Kernel.Name())
		}
		for _, a := range c.Buffers {
			if dm, ok := a.Mem.(*deviceMem); !ok || dm.b == nil {
				return fmt.Errorf("metal: %s: a buffer that is not this device's, or a freed one", c.Kernel.Name())
			}
		}
	}
	size := func(s dispatch.Size) device.Size { return device.Size{X: s.X, Y: s.Y, Z: s.Z} }
	var args []device.Arg
	p, err := d.dev.Submit(func(e *device.Encoder) {
		for i := range cmds {
			c := &cmds[i]
			if c.Barrier {
				e.Barrier()
				continue
			}
			args = args[:0]
			for _, a := range c.Buffers {
				args = append(args, device.Arg{Buf: a.Mem.(*deviceMem).b, Off: uint64(a.Off)})
			}
			e.Dispatch(c.Kernel.(pipeline).p, size(c.Groups), size(c.Threads), args, c.Params)
		}
	})
	if err != nil {
		return err
	}
	d.pending = append(d.pending, p)
	return nil
}

func (d *deviceDispatcher) Wait() error {
	var first error
	for _, p := range d.pending {
		if _, err := p.Wait(); err != nil && first == nil {
			first = err
		}
	}
	d.pending = d.pending[:0]
	return first
}

func (d *deviceDispatcher) Close() error {
	err := d.Wait()
	for _, l := range d.libs {
		l.Release()
	}
	d.libs = nil
	d.dev.Close()
	return err
}
