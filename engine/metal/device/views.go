package device

import "fmt"

// View is the window of one no-copy buffer on a mapped region: bytes
// [Offset, Offset+Length) of it, both multiples of PageSize.
type View struct{ Offset, Length uint64 }

// ViewPlan covers a memory-mapped region with no-copy buffer views.
// Metal wraps host memory only in whole pages and only up to the device's
// maxBufferLength per buffer, so a checkpoint larger than that becomes
// several views; they overlap by the largest tensor (rounded up to a page),
// so that every tensor lies wholly inside one view and a kernel binds it as
// one buffer and an offset.
type ViewPlan struct {
	Views  []View
	Span   uint64 // the longest range Locate is guaranteed to place
	stride uint64
}

// PlanViews plans views over a mapped region of size bytes that starts on a
// page (the region an mmap call returns: the system maps whole pages, so the
// last view may end past size, up to the page boundary). maxLen is the
// device's maxBufferLength, span the length of the largest tensor.
func PlanViews(size, maxLen, span uint64) (ViewPlan, error) {
	if size == 0 {
		return ViewPlan{}, fmt.Errorf("metal: cannot wrap an empty mapping")
	}
	total := roundUp(size, PageSize)
	viewLen := maxLen / PageSize * PageSize
	overlap := roundUp(span, PageSize)
	if viewLen <= overlap {
		return ViewPlan{}, fmt.Errorf("metal: a tensor of %d bytes does not fit a buffer view under the device's maxBufferLength of %d bytes", span, maxLen)
	}
	stride := viewLen - overlap
	var views []View
	for off := uint64(0); ; off += stride {
		n := min(viewLen, total-off)
		views = append(views, View{Offset: off, Length: n})
		if off+n >= total {
			break
		}
	}
	return ViewPlan{Views: views, Span: span, stride: stride}, nil
}

// Locate returns the view that holds bytes [off, off+n) of the region and
// off's position inside it.
func (p ViewPlan) Locate(off, n uint64) (view int, within uint64, err error) {
	if len(p.Views) == 0 {
		return 0, 0, fmt.Errorf("metal: no views planned")
	}
	last := p.Views[len(p.Views)-1]
	if off+n < off || off+n > last.Offset+last.Length {
		return 0, 0, fmt.Errorf("metal: bytes [%d, %d) lie outside the mapped region of %d bytes", off, off+n, last.Offset+last.Length)
	}
	k := min(int(off/p.stride), len(p.Views)-1)
	v := p.Views[k]
	if off+n > v.Offset+v.Length {
		return 0, 0, fmt.Errorf("metal: bytes [%d, %d) span more than the %d bytes the views were planned for", off, off+n, p.Span)
	}
	return k, off - v.Offset, nil
}

func roundUp(n, m uint64) uint64 { return (n + m - 1) / m * m }
