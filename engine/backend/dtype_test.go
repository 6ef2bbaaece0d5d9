package backend

import (
	"math"
	"testing"
)

// conversion is one 16-bit float type's pair of conversions.
type conversion struct {
	t      DType
	narrow func(float32) uint16
	widen  func(uint16) float32
}

var conversions = []conversion{
	{BF16, BF16FromFloat32, Float32FromBF16},
	{F16, F16FromFloat32, Float32FromF16},
}

// TestConversionsRoundTrip: every 16-bit pattern widens exactly and narrows
// back to itself (NaNs stay NaN).
func TestConversionsRoundTrip(t *testing.T) {
	for _, c := range conversions {
		for h := range 1 << 16 {
			f := c.widen(uint16(h))
			back := c.narrow(f)
			if f != f {
				if g := c.widen(back); g == g {
					t.Fatalf("%s: NaN %#04x narrows to the number %g", c.t, h, g)
				}
				continue
			}
			if back != uint16(h) {
				t.Fatalf("%s: %#04x widens to %g, which narrows to %#04x", c.t, h, f, back)
			}
		}
	}
}

// TestConversionsRoundToNearestEven: the midpoint between two neighbours
// goes to the one with an even pattern, and a value just off the midpoint to
// the nearer; past the largest finite value is infinity.
func TestConversionsRoundToNearestEven(t *testing.T) {
	for _, c := range conversions {
		for h := range 0x7c00 { // positive finite patterns below F16's infinity
			if c.t == BF16 && h >= 0x7f80 {
				break
			}
			lo, hi := float64(c.widen(uint16(h))), float64(c.widen(uint16(h+1)))
			if math.IsInf(hi, 1) {
				hi = 2*lo - float64(c.widen(uint16(h-1))) // the next step, as if the format went on
			}
			mid := float32((lo + hi) / 2) // exact: the 16-bit types have fewer digits
			even := uint16(h)
			if h&1 == 1 {
				even = uint16(h + 1)
			}
			if got := c.narrow(mid); got != even && !(math.IsInf(float64(c.widen(got)), 1) && even > uint16(h)) {
				t.Fatalf("%s: midpoint %g of %#04x and %#04x narrows to %#04x", c.t, mid, h, h+1, got)
			}
			below := math.Nextafter32(mid, float32(math.Inf(-1)))
			if got := c.narrow(below); got != uint16(h) && float64(below) > lo {
				t.Fatalf("%s: %g, just below the midpoint of %#04x and %#04x, narrows to %#04x", c.t, below, h, h+1, got)
			}
			if got := c.narrow(-mid); got != even|0x8000 && !math.IsInf(float64(c.widen(got)), -1) {
				t.Fatalf("%s: -%g narrows to %#04x, want %#04x", c.t, mid, got, even|0x8000)
			}
		}
		if got := c.widen(c.narrow(math.MaxFloat32)); !math.IsInf(float64(got), 1) && c.t == F16 {
			t.Errorf("%s: the largest float32 narrows to %g, want +Inf", c.t, got)
		}
	}
	if got := Float32FromF16(F16FromFloat32(1e-8)); got != 0 {
		t.Errorf("f16: 1e-8 narrows to %g, want 0", got)
	}
	if got := Float32FromF16(F16FromFloat32(6e-8)); got != 0x1p-24 {
		t.Errorf("f16: 6e-8 narrows to %g, want the least subnormal 2^-24", got)
	}
}

func TestParseDType(t *testing.T) {
	for ty := F32; ty <= I32; ty++ {
		if got, err := ParseDType(ty.String()); err != nil || got != ty {
			t.Errorf("ParseDType(%q) = %v, %v", ty.String(), got, err)
		}
	}
	if _, err := ParseDType("f8"); err == nil {
		t.Error("f8 was accepted")
	}
}

// TestNarrowWiden: Narrow rounds as Round does and Widen gives the values
// back exactly, for both 16-bit float types.
func TestNarrowWiden(t *testing.T) {
	src := []float32{0, -0.5, 1.0 / 3, 65504, 70000, 1e-8, -3.4e38, float32(math.Inf(1))}
	for _, dt := range []DType{BF16, F16} {
		h := make([]uint16, len(src))
		Narrow(dt, src, h)
		back := make([]float32, len(src))
		Widen(dt, h, back)
		for i, v := range src {
			if want := Round(dt, v); math.Float32bits(back[i]) != math.Float32bits(want) {
				t.Errorf("%s: %v narrowed and widened is %v, Round gives %v", dt, v, back[i], want)
			}
		}
	}
}
