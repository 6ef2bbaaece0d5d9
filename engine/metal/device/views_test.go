package device

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPlanViews: views start and end on 16 KiB pages, stay under
// maxBufferLength, cover the whole region, and every range up to the span
// is found inside one view at the right position.
func TestPlanViews(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		size := 1 + rng.Uint64N(64<<20)
		maxLen := PageSize*4 + rng.Uint64N(8<<20)
		span := 1 + rng.Uint64N(maxLen/2)
		if trial%3 == 0 {
			size = 1 + rng.Uint64N(maxLen) // fits one view
		}
		p, err := PlanViews(size, maxLen, span)
		if err != nil {
			t.Fatalf("size %d maxLen %d span %d: %v", size, maxLen, span, err)
		}
		var end uint64
		for i, v := range p.Views {
			if v.Offset%PageSize != 0 || v.Length%PageSize != 0 || v.Length == 0 || v.Length > maxLen {
				t.Fatalf("view %d %+v: not whole pages under %d", i, v, maxLen)
			}
			if v.Offset > end {
				t.Fatalf("view %d starts at %d after a gap (covered to %d)", i, v.Offset, end)
			}
			end = max(end, v.Offset+v.Length)
		}
		if end != roundUp(size, PageSize) {
			t.Fatalf("views cover %d bytes, want %d", end, roundUp(size, PageSize))
		}
		for range 200 {
			n := 1 + rng.Uint64N(min(span, size))
			off := rng.Uint64N(size - n + 1)
			k, within, err := p.Locate(off, n)
			if err != nil {
				t.Fatalf("locate [%d,+%d) in %+v: %v", off, n, p.Views, err)
			}
			v := p.Views[k]
			if v.Offset+within != off || within+n > v.Length {
				t.Fatalf("locate [%d,+%d) = view %d %+v at %d", off, n, k, v, within)
			}
		}
	}
}

func TestPlanViewsRefuses(t *testing.T) {
	if _, err := PlanViews(0, 1<<30, 1); err == nil {
		t.Error("an empty mapping was accepted")
	}
	_, err := PlanViews(1<<30, 1<<20, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "maxBufferLength") {
		t.Errorf("a tensor as large as a view: %v", err)
	}
	p, _ := PlanViews(10*PageSize, 4*PageSize, PageSize)
	if _, _, err := p.Locate(9*PageSize, 2*PageSize); err == nil {
		t.Error("a range past the region was placed")
	}
	if _, _, err := p.Locate(5*PageSize/2, 3*PageSize); err == nil || !strings.Contains(err.Error(), "planned") {
		t.Errorf("a range longer than the span: %v", err)
	}
}
