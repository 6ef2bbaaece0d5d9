package backend

import (
	"fmt"
	"math"
)

// DType is the element type of a buffer. The zero DType is no type: the
// zero Buffer (an absent optional input) has it.
type DType uint8

const (
	F32  DType = iota + 1 // IEEE float32
	BF16                  // bfloat16: float32's exponent, 8 bits of significand
	F16                   // IEEE binary16
	I32                   // int32: token ids, expert indices, positions
)

// Size is the number of bytes of one element.
func (t DType) Size() int {
	switch t {
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	}
	return 0
}

// IsFloat reports whether t is one of the float types.
func (t DType) IsFloat() bool { return t == F32 || t == BF16 || t == F16 }

// ConvertCode is a float type as the GPU backends' convert kernels number
// it (ops.cu, ops.metal): 0 f32, 1 bf16, 2 f16.
func (t DType) ConvertCode() int32 {
	switch t {
	case BF16:
		return 1
	case F16:
		return 2
	}
	return 0
}

// Valid reports whether t is one of the types above.
func (t DType) Valid() bool { return t >= F32 && t <= I32 }

func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case I32:
		return "i32"
	case 0:
		return "untyped"
	}
	return fmt.Sprintf("dtype(%d)", uint8(t))
}

// ParseDType reads a name as String writes it.
func ParseDType(s string) (DType, error) {
	for t := F32; t <= I32; t++ {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("backend: unknown element type %q (f32, bf16, f16, i32)", s)
}

// The conversions below define the numerics every backend must reproduce:
// float32 to a 16-bit type rounds to nearest, ties to even, overflows to
// infinity and keeps NaN a (quiet) NaN; widening is exact.

// BF16FromFloat32 rounds f to bfloat16.
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // NaN: keep it one, quiet
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Float32FromBF16 widens a bfloat16 exactly.
func Float32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromFloat32 rounds f to IEEE binary16 (subnormals included).
func F16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b >> 23 & 0xff)
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e <= 0: // a subnormal result, or zero
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - e)
		r, rem, half := mant>>shift, mant&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	if rem := mant & 0x1fff; rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++ // a carry into the exponent is right, up to infinity
	}
	return sign | uint16(r)
}

// Float32FromF16 widens a binary16 exactly.
func Float32FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		f := float32(mant) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// Round returns f as a buffer of type t would hold it (f itself for F32).
func Round(t DType, f float32) float32 {
	switch t {
	case BF16:
		return Float32FromBF16(BF16FromFloat32(f))
	case F16:
		return Float32FromF16(F16FromFloat32(f))
	}
	return f
}

// Narrow rounds src into dst, the 16-bit float type t's bits (BF16 or F16,
// as Round does); dst is as long as src.
func Narrow(t DType, src []float32, dst []uint16) {
	if t == BF16 {
		for i, v := range src {
			dst[i] = BF16FromFloat32(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = F16FromFloat32(v)
	}
}

// Widen is the float32 values of src, the 16-bit float type t's bits (BF16
// or F16), into dst; dst is as long as src. It is exact.
func Widen(t DType, src []uint16, dst []float32) {
	if t == BF16 {
		for i, v := range src {
			dst[i] = Float32FromBF16(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = Float32FromF16(v)
	}
}
