package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Tensor is one tensor of a safetensors file. Data is a read-only view into
// the file's memory map: never write to it, and do not use it after Close.
type Tensor struct {
	Name  string // normalised name, e.g. "model.layers.0.linear_attn.in_proj_qkv.weight"
	DType DType
	Shape []int
	Data  []byte // little-endian elements, row-major
	File  string // file it came from, relative to the checkpoint folder
}

// NumElements is the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Uint32s views a U32 tensor as []uint32 without copying when the data is
// 4-byte aligned (it always is in MLX files); otherwise it decodes a copy.
func (t *Tensor) Uint32s() []uint32 {
	t.mustBe(U32)
	return view[uint32](t.Data, binary.LittleEndian.Uint32)
}

// Int32s views an I32 tensor as []int32, like Uint32s.
func (t *Tensor) Int32s() []int32 {
	t.mustBe(I32)
	return view[int32](t.Data, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
}

// Uint16s views the raw bits of a BF16 or F16 tensor as []uint16, like Uint32s.
func (t *Tensor) Uint16s() []uint16 {
	t.mustBe(BF16, F16)
	return view[uint16](t.Data, binary.LittleEndian.Uint16)
}

// Float32s converts a BF16, F16 or F32 tensor to a new []float32. Meant for
// small tensors (norms, conv taps, A_log, reference data).
func (t *Tensor) Float32s() []float32 {
	t.mustBe(BF16, F16, F32)
	n := t.NumElements()
	out := make([]float32, n)
	switch t.DType {
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(t.Data[2*i:])) << 16)
		}
	case F16:
		for i := range out {
			out[i] = halfToFloat32(binary.LittleEndian.Uint16(t.Data[2*i:]))
		}
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	}
	return out
}

// mustBe panics when the tensor has none of the given dtypes: asking for the
// wrong element type is a bug in the caller, not a property of the file.
func (t *Tensor) mustBe(want ...DType) {
	for _, d := range want {
		if t.DType == d {
			return
		}
	}
	panic(fmt.Sprintf("checkpoint: tensor %q is %s, not %v", t.Name, t.DType, want))
}

// nativeLittleEndian reports whether the file's byte order is the host's.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// view reinterprets b as []T when the host is little-endian and b is
// aligned for T, and decodes a copy otherwise.
func view[T uint16 | uint32 | int32, F func([]byte) T](b []byte, decode F) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := len(b) / size
	if n == 0 {
		return []T{}
	}
	if nativeLittleEndian && uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]T, n)
	for i := range out {
		out[i] = decode(b[i*size:])
	}
	return out
}

// halfToFloat32 widens an IEEE binary16 bit pattern to float32 exactly,
// subnormals, infinities and NaNs included.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal: rebias 15 -> 127
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: frac * 2^-24, exact in float32
	v := float32(frac) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}
