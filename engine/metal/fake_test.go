package metal

import (
	"fmt"
	"slices"
	"unsafe"

	"petal/engine/metal/device"
	"petal/engine/metal/dispatch"
)

// recorder is a dispatcher over host memory that runs no kernel: it keeps
// the bytes uploaded and copied, and records the command buffers
// submitted, so that the tests can check what the lowering launches (the
// entry points, their buffers, parameters, grids and barriers), not what
// the kernels compute.
type recorder struct {
	submitted [][]dispatch.Command
	freed     int
	closed    bool
	waits     int
	uploaded  int64 // bytes copied in by Upload
}

// hostMem is an allocation, or (view) a view of wrapped host memory
// (mappingRecorder), which nothing may write.
type hostMem struct {
	b        []byte
	view     bool
	released bool
}

func (m *hostMem) Size() int64 { return int64(len(m.b)) }

type entry struct{ family, name string }

func (e entry) Name() string { return e.name }

func (r *recorder) Device() string { return "a recorder of dispatches (no device)" }

func (r *recorder) Alloc(n int64) (dispatch.Mem, error) {
	if n < 1 {
		return nil, fmt.Errorf("an allocation of %d bytes", n)
	}
	return &hostMem{b: make([]byte, n)}, nil
}

func (r *recorder) Free(m dispatch.Mem) { r.freed++ }

func at(a dispatch.Arg, n int) ([]byte, error) {
	m, ok := a.Mem.(*hostMem)
	if !ok || a.Off < 0 || a.Off+int64(n) > int64(len(m.b)) {
		return nil, fmt.Errorf("bytes [%d, %d) outside the allocation", a.Off, a.Off+int64(n))
	}
	return m.b[a.Off : a.Off+int64(n)], nil
}

// writable refuses a view of wrapped host memory as a destination.
func writable(a dispatch.Arg) error {
	if m, ok := a.Mem.(*hostMem); ok && m.view {
		return fmt.Errorf("a write into a view of wrapped host memory")
	}
	return nil
}

func (r *recorder) Upload(dst dispatch.Arg, src []byte) error {
	if err := writable(dst); err != nil {
		return err
	}
	b, err := at(dst, len(src))
	if err == nil {
		copy(b, src)
		r.uploaded += int64(len(src))
	}
	return err
}

func (r *recorder) Download(dst []byte, src dispatch.Arg) error {
	b, err := at(src, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (r *recorder) Copy(dst, src dispatch.Arg, n int64) error {
	if err := writable(dst); err != nil {
		return err
	}
	d, err := at(dst, int(n))
	if err != nil {
		return err
	}
	s, err := at(src, int(n))
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

func (r *recorder) Kernel(family, name string) (dispatch.Kernel, error) {
	return entry{family, name}, nil
}

func (r *recorder) Submit(cmds []dispatch.Command) error {
	for _, c := range cmds {
		for i, a := range c.Buffers {
			if m, ok := a.Mem.(*hostMem); ok && m.released {
				return fmt.Errorf("%s buffer %d: a released view", c.Kernel.Name(), i)
			}
		}
	}
	r.submitted = append(r.submitted, slices.Clone(cmds))
	return nil
}

func (r *recorder) Wait() error { r.waits++; return nil }

func (r *recorder) Close() error { r.closed = true; return nil }

// mappingRecorder is a recorder that can also wrap host memory
// (dispatch.HostMapper), in views planned as the Metal device plans them
// (device.PlanViews, 16 KiB pages) under a maxBufferLength of maxLen.
type mappingRecorder struct {
	*recorder
	maxLen uint64
	maps   []*recordedMap
}

type recordedMap struct {
	r         *recorder
	plan      device.ViewPlan
	views     []*hostMem
	span      int64
	released  bool
	waitsThen int // the recorder's waits when it was released
}

func (r *mappingRecorder) MapHost(region []byte, span int64) (dispatch.Mapped, error) {
	if uintptr(unsafe.Pointer(unsafe.SliceData(region)))%device.PageSize != 0 {
		return nil, fmt.Errorf("a region that does not start on a page")
	}
	plan, err := device.PlanViews(uint64(len(region)), r.maxLen, uint64(span))
	if err != nil {
		return nil, err
	}
	m := &recordedMap{r: r.recorder, plan: plan, span: span}
	for _, v := range plan.Views {
		// the device's last view may run past the region to its page's end;
		// host memory here ends with the region
		end := min(v.Offset+v.Length, uint64(len(region)))
		m.views = append(m.views, &hostMem{b: region[v.Offset:end:end], view: true})
	}
	r.maps = append(r.maps, m)
	return m, nil
}

func (m *recordedMap) Locate(off, n int64) (dispatch.Arg, error) {
	k, within, err := m.plan.Locate(uint64(off), uint64(n))
	if err != nil {
		return dispatch.Arg{}, err
	}
	return dispatch.Arg{Mem: m.views[k], Off: int64(within)}, nil
}

func (m *recordedMap) Views() int { return len(m.views) }

func (m *recordedMap) Release() {
	m.released, m.waitsThen = true, m.r.waits
	for _, v := range m.views {
		v.released = true
	}
}
