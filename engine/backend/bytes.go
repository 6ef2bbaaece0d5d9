package backend

import "unsafe"

// BytesOf views a slice's elements as bytes (no copy), for the copies
// between host slices and device buffers.
func BytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// Encode is src as a buffer of float type t holds it: src's own bytes for
// F32, else rounded to t as Narrow does.
func Encode(t DType, src []float32) []byte {
	if t == F32 {
		return BytesOf(src)
	}
	h := make([]uint16, len(src))
	Narrow(t, src, h)
	return BytesOf(h)
}
