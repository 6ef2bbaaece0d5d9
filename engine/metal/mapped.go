package metal

import (
	"fmt"
	"slices"
	"unsafe"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
)

var _ backend.RegionMapper = (*Backend)(nil)

// region is a checkpoint's memory map wrapped as read-only device buffers
// (dispatch.HostMapper): the matrices lying in it are bound where they
// lie, not copied, so that a Mac holds a checkpoint once, in the page
// cache, rather than a second time in buffers of its own.
type region struct {
	name string
	data []byte
	m    dispatch.Mapped // nil once released
}

// MapRegions wraps the checkpoint's memory maps (backend.RegionMapper) for
// the matrices uploaded after it. With weights=copy, or on a dispatcher
// that cannot wrap host memory (engine/metal/cudarun), it does nothing and
// every matrix is copied. The function returned waits for the work before
// it and releases the views; the regions may be unmapped afterwards, and
// the matrices bound in them must not be used. Close releases them too.
func (b *Backend) MapRegions(regions []backend.MappedRegion) (func() error, error) {
	if b.closed {
		return nil, fmt.Errorf("metal: the backend is closed")
	}
	hm, ok := b.d.(dispatch.HostMapper)
	if b.o.CopyWeights || !ok {
		return func() error { return nil }, nil
	}
	var set []*region
	for _, r := range regions {
		if len(r.Data) == 0 {
			continue
		}
		m, err := hm.MapHost(r.Data, max(r.Largest, 1))
		if err != nil {
			b.releaseRegions(set)
			return nil, fmt.Errorf("metal: %s: wrapping its memory map without a copy: %w (--backend metal:weights=copy copies the weights instead)", r.Name, err)
		}
		set = append(set, &region{name: r.Name, data: r.Data, m: m})
	}
	b.regions = append(b.regions, set...)
	return func() error {
		if b.closed || !slices.ContainsFunc(set, func(r *region) bool { return r.m != nil }) {
			return nil // released already (by Close)
		}
		err := b.d.Wait() // nothing may still read the views
		b.releaseRegions(set)
		return b.surfaced(err)
	}, nil
}

// releaseRegions releases the views of set and forgets them; the caller
// has waited for the work that reads them.
func (b *Backend) releaseRegions(set []*region) {
	for _, r := range set {
		if r.m != nil {
			r.m.Release()
			r.m = nil
		}
	}
	b.regions = slices.DeleteFunc(b.regions, func(r *region) bool { return r.m == nil })
}

// inPlace is the position of raw in a wrapped region, where raw lies wholly
// inside one at an offset that is a multiple of align, the size of the
// element the kernels read it as (a u32 code word, a bf16 scale or bias:
// Metal binds a buffer of the device address space at an offset aligned to
// the type the function reads, and every kernel reads the matrices as
// device const uint* or ushort*). ok is false otherwise, and raw is copied.
func (b *Backend) inPlace(raw []byte, align int64) (a dispatch.Arg, ok bool) {
	if len(raw) == 0 {
		return dispatch.Arg{}, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	for _, r := range b.regions {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(r.data)))
		if r.m == nil || p < base || len(raw) > len(r.data) || p-base > uintptr(len(r.data)-len(raw)) {
			continue
		}
		off := int64(p - base)
		if off%align != 0 {
			return dispatch.Arg{}, false
		}
		a, err := r.m.Locate(off, int64(len(raw)))
		if err != nil {
			return dispatch.Arg{}, false // longer than the views were planned for
		}
		return a, true
	}
	return dispatch.Arg{}, false
}

// WeightBytes is how many bytes of the matrices' codes, scales and biases
// were bound in place in a memory map and how many were copied.
func (b *Backend) WeightBytes() (inPlace, copied int64) { return b.inPlaceBytes, b.copiedBytes }
