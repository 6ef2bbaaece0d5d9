package metal

import (
	"fmt"
	"slices"

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
}

type hostMem struct{ b []byte }

func (m *hostMem) Size() int64 { return int64(len(m.b)) }

type entry struct{ family, name string }

func (e entry) Name() string { return e.name }

func (r *recorder) Device() string { return "a recorder of dispatches (no device)" }

func (r *recorder) Alloc(n int64) (dispatch.Mem, error) {
	if n < 1 {
		return nil, fmt.Errorf("an allocation of %d bytes", n)
	}
	return &hostMem{make([]byte, n)}, nil
}

func (r *recorder) Free(m dispatch.Mem) { r.freed++ }

func at(a dispatch.Arg, n int) ([]byte, error) {
	m, ok := a.Mem.(*hostMem)
	if !ok || a.Off < 0 || a.Off+int64(n) > int64(len(m.b)) {
		return nil, fmt.Errorf("bytes [%d, %d) outside the allocation", a.Off, a.Off+int64(n))
	}
	return m.b[a.Off : a.Off+int64(n)], nil
}

func (r *recorder) Upload(dst dispatch.Arg, src []byte) error {
	b, err := at(dst, len(src))
	if err == nil {
		copy(b, src)
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
	r.submitted = append(r.submitted, slices.Clone(cmds))
	return nil
}

func (r *recorder) Wait() error { r.waits++; return nil }

func (r *recorder) Close() error { r.closed = true; return nil }
