package checkpoint

import (
	"math"
	"slices"
	"testing"
	"unsafe"
)

func TestFloat32sFromHalf(t *testing.T) {
	// IEEE binary16 bit patterns and their exact values.
	bits := []uint16{0x3c00, 0xc000, 0x0001, 0x8400, 0x7bff, 0x3555, 0x0000, 0x8000}
	want := []float32{1, -2, 1.0 / (1 << 24), -1.0 / (1 << 14), 65504, 0.333251953125, 0, float32(math.Copysign(0, -1))}
	var data []byte
	for _, b := range bits {
		data = append(data, byte(b), byte(b>>8))
	}
	data = append(data, 0x00, 0x7c, 0x01, 0x7e) // +Inf, NaN
	tn := &Tensor{Name: "h", DType: F16, Shape: []int{len(bits) + 2}, Data: data}
	got := tn.Float32s()
	for i, w := range want {
		if got[i] != w || math.Signbit(float64(got[i])) != math.Signbit(float64(w)) {
			t.Errorf("half %#04x = %g, want %g", bits[i], got[i], w)
		}
	}
	if !math.IsInf(float64(got[len(bits)]), 1) || !math.IsNaN(float64(got[len(bits)+1])) {
		t.Errorf("inf/nan: %v", got[len(bits):])
	}
}

func TestTypedViews(t *testing.T) {
	buf := []byte{0xff, 0x78, 0x56, 0x34, 0x12, 0x01, 0x00, 0x00, 0x80, 0x00}
	// Misaligned on purpose: buf[1:] is off a 4-byte boundary, so this decodes a copy.
	u := &Tensor{Name: "u", DType: U32, Shape: []int{2}, Data: buf[1:9]}
	if got := u.Uint32s(); !slices.Equal(got, []uint32{0x12345678, 0x80000001}) {
		t.Errorf("misaligned Uint32s %#x", got)
	}
	i := &Tensor{Name: "i", DType: I32, Shape: []int{2}, Data: buf[1:9]}
	if got := i.Int32s(); !slices.Equal(got, []int32{0x12345678, -0x7fffffff}) {
		t.Errorf("Int32s %d", got)
	}
	aligned := make([]uint32, 2) // backing array aligned for uint32
	b := (*[8]byte)(unsafePointer(&aligned[0]))[:]
	copy(b, buf[1:9])
	u2 := &Tensor{Name: "u2", DType: U32, Shape: []int{2}, Data: b}
	if got := u2.Uint32s(); &got[0] != &aligned[0] || got[0] != 0x12345678 {
		t.Errorf("aligned Uint32s copied or wrong: %#x", got)
	}
	h := &Tensor{Name: "b", DType: BF16, Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x00, 0xc0}}
	if got := h.Uint16s(); !slices.Equal(got, []uint16{0x3f80, 0xc000}) {
		t.Errorf("Uint16s %#x", got)
	}
	if got := h.Float32s(); !slices.Equal(got, []float32{1, -2}) {
		t.Errorf("bf16 Float32s %v", got)
	}
	if n := (&Tensor{Shape: nil}).NumElements(); n != 1 {
		t.Errorf("scalar has %d elements", n)
	}
}

func TestWrongDTypePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("Uint32s on a BF16 tensor did not panic")
		}
	}()
	(&Tensor{Name: "b", DType: BF16, Data: make([]byte, 4)}).Uint32s()
}

func unsafePointer(p *uint32) unsafe.Pointer { return unsafe.Pointer(p) }
