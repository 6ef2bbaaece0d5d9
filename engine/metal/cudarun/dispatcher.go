package cudarun

import (
	"encoding/binary"
	"fmt"

	"petal/engine/cuda/driver"
	"petal/engine/metal/dispatch"
)

// Dispatcher runs engine/metal's lowering on an NVIDIA GPU: the
// dispatch.Dispatcher of the Metal kernels' PTX (this package's) over the
// CUDA driver. It is a test vehicle, so that the Metal backend's code (its
// kernels, parameter structs, grids) runs and is checked before a Mac sees
// it; it is not a backend anyone chooses (petal's NVIDIA backend is
// engine/cuda). A command buffer is a run of launches on one stream, which
// orders them completely: a barrier is then nothing to do, so what this
// cannot show is a barrier missing on Metal (the unit tests of
// engine/metal check where they are placed).
type Dispatcher struct {
	ctx  *driver.Context
	s    *driver.Stream
	mods map[string]*driver.Module
	fns  map[string]*cudaKernel
}

// NewDispatcher opens GPU ordinal; where the machine has no usable GPU the
// error says why (driver.Unavailable tells that case apart).
func NewDispatcher(ordinal int) (*Dispatcher, error) {
	ctx, err := driver.Open(ordinal)
	if err != nil {
		return nil, err
	}
	s, err := ctx.NewStream("metal kernels through the CUDA dialect")
	if err != nil {
		return nil, err
	}
	return &Dispatcher{ctx: ctx, s: s, mods: map[string]*driver.Module{}, fns: map[string]*cudaKernel{}}, nil
}

func (d *Dispatcher) Device() string {
	return d.ctx.Device().String() + " (the Metal kernels compiled as CUDA)"
}

var _ dispatch.TensorOps = (*Dispatcher)(nil)

// TensorOps is nil: the dialect emulates Metal 4's tensor operations
// (kernels/cuda/MetalPerformancePrimitives), correctly if slowly, so that
// gemm=tensor's lowering and kernels run here; this says nothing of a Mac's.
func (d *Dispatcher) TensorOps() error { return nil }

type mem struct {
	p driver.Ptr
	n int64
}

func (m *mem) Size() int64 { return m.n }

func (d *Dispatcher) Alloc(n int64) (dispatch.Mem, error) {
	if n < 1 {
		return nil, fmt.Errorf("cudarun: an allocation of %d bytes", n)
	}
	words := (n + 3) / 4
	p, err := d.ctx.Alloc(4*words, "a Metal buffer")
	if err != nil {
		return nil, err
	}
	if err := d.s.Fill32(p, 0, words); err != nil {
		d.ctx.Free(p)
		return nil, err
	}
	return &mem{p, n}, nil
}

func (d *Dispatcher) Free(m dispatch.Mem) {
	if c, ok := m.(*mem); ok && c.p != 0 {
		d.ctx.Free(c.p)
		c.p = 0
	}
}

// ptr is the device address of a, n bytes from it checked to lie inside.
func ptr(a dispatch.Arg, n int64) (driver.Ptr, error) {
	c, ok := a.Mem.(*mem)
	switch {
	case !ok || c == nil:
		return 0, fmt.Errorf("cudarun: a buffer that is not this dispatcher's")
	case c.p == 0:
		return 0, fmt.Errorf("cudarun: a freed buffer")
	case a.Off < 0 || a.Off+n > c.n:
		return 0, fmt.Errorf("cudarun: bytes [%d, %d) of a %d-byte buffer", a.Off, a.Off+n, c.n)
	}
	return c.p.Add(a.Off), nil
}

func (d *Dispatcher) Upload(dst dispatch.Arg, src []byte) error {
	p, err := ptr(dst, int64(len(src)))
	if err != nil {
		return err
	}
	return d.s.CopyToDevice(p, src)
}

func (d *Dispatcher) Download(dst []byte, src dispatch.Arg) error {
	p, err := ptr(src, int64(len(dst)))
	if err != nil {
		return err
	}
	if err := d.s.CopyToHost(dst, p); err != nil {
		return err
	}
	return d.s.Sync()
}

func (d *Dispatcher) Copy(dst, src dispatch.Arg, n int64) error {
	dp, err := ptr(dst, n)
	if err != nil {
		return err
	}
	sp, err := ptr(src, n)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.s.Copy(dp, sp, n)
}

type cudaKernel struct {
	fn   *driver.Function
	name string
}

func (f *cudaKernel) Name() string { return f.name }

// Kernel loads family's PTX on first use and finds the entry point.
func (d *Dispatcher) Kernel(family, entry string) (dispatch.Kernel, error) {
	key := family + "." + entry
	if f, ok := d.fns[key]; ok {
		return f, nil
	}
	m, ok := d.mods[family]
	if !ok {
		ptx, err := PTX(family)
		if err != nil {
			return nil, err
		}
		if m, err = d.ctx.LoadModule(ptx, family+".metal"); err != nil {
			return nil, err
		}
		d.mods[family] = m
	}
	fn, err := m.Function(entry)
	if err != nil {
		return nil, fmt.Errorf("cudarun: %s.metal has no entry point %s: %w", family, entry, err)
	}
	f := &cudaKernel{fn, entry}
	d.fns[key] = f
	return f, nil
}

// Submit launches the dispatches in order on the stream (barriers are the
// stream's own order).
func (d *Dispatcher) Submit(cmds []dispatch.Command) error {
	var a driver.Args
	for i := range cmds {
		c := &cmds[i]
		if c.Barrier {
			continue
		}
		if err := c.Check(); err != nil {
			return err
		}
		f, ok := c.Kernel.(*cudaKernel)
		if !ok {
			return fmt.Errorf("cudarun: kernel %s was not prepared by this dispatcher", c.Kernel.Name())
		}
		a.Reset()
		for j, b := range c.Buffers {
			p, err := ptr(b, 0)
			if err != nil {
				return fmt.Errorf("cudarun: %s buffer %d: %w", f.name, j, err)
			}
			a.Ptr(p)
		}
		// The parameter struct is passed by value as the last argument
		// (metal2cu): the driver copies the kernel's parameter size from
		// the first slot, and the slots lie back to back, so a struct of
		// more than 8 bytes takes consecutive ones.
		padded := make([]byte, (len(c.Params)+7)/8*8)
		copy(padded, c.Params)
		for k := 0; k < len(padded); k += 8 {
			a.I64(int64(binary.LittleEndian.Uint64(padded[k:])))
		}
		grid := driver.Dim3{X: c.Groups.X, Y: c.Groups.Y, Z: c.Groups.Z}
		block := driver.Dim3{X: c.Threads.X, Y: c.Threads.Y, Z: c.Threads.Z}
		if err := d.s.Launch(f.fn, grid, block, 0, &a); err != nil {
			return err
		}
	}
	return nil
}

func (d *Dispatcher) Wait() error { return d.s.Sync() }

// Close waits for the GPU, unloads the kernels and releases the context;
// the allocations must have been freed.
func (d *Dispatcher) Close() error {
	err := d.s.Sync()
	for _, m := range d.mods {
		if e := m.Close(); err == nil {
			err = e
		}
	}
	if e := d.s.Close(); err == nil {
		err = e
	}
	if e := d.ctx.Close(); err == nil {
		err = e
	}
	return err
}
