package session

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"

	"petal/engine/backend"
)

// nativeLittleEndian is true on every platform petal targets; the slow
// paths below keep the format little-endian elsewhere.
var nativeLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// floatBytes views v's memory as bytes (little-endian hosts only).
func floatBytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// writeFloats writes v as little-endian float32.
func writeFloats(w io.Writer, v []float32) error {
	if nativeLittleEndian {
		_, err := w.Write(floatBytes(v))
		return err
	}
	buf := make([]byte, 0, 64<<10)
	for len(v) > 0 {
		k := min(len(v), cap(buf)/4)
		buf = buf[:0]
		for _, x := range v[:k] {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		v = v[k:]
	}
	return nil
}

// readFloats fills v from little-endian float32 and returns the raw bytes
// read, for checksumming, through sum.
func readFloats(r io.Reader, v []float32, sum func([]byte)) error {
	if nativeLittleEndian {
		b := floatBytes(v)
		// read in pieces so the checksum runs on data still in cache
		for len(b) > 0 {
			k := min(len(b), 1<<20)
			if _, err := io.ReadFull(r, b[:k]); err != nil {
				return err
			}
			sum(b[:k])
			b = b[k:]
		}
		return nil
	}
	buf := make([]byte, 64<<10)
	for len(v) > 0 {
		k := min(len(v), len(buf)/4)
		if _, err := io.ReadFull(r, buf[:4*k]); err != nil {
			return err
		}
		sum(buf[:4*k])
		for i := range k {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		v = v[k:]
	}
	return nil
}

func appendUint32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// writeHalves writes v as little-endian 16-bit floats of type t, refusing a
// value that t does not hold exactly (a state of a 16-bit KV cache holds
// only such values; rounding here would change it silently).
func writeHalves(w io.Writer, v []float32, t backend.DType) error {
	buf := make([]byte, 0, 64<<10)
	for off := 0; off < len(v); {
		k := min(len(v)-off, cap(buf)/2)
		buf = buf[:0]
		for i, x := range v[off : off+k] {
			h, ok := half(x, t)
			if !ok {
				return fmt.Errorf("value %d (%g) is not a %s value", off+i, x, t)
			}
			buf = binary.LittleEndian.AppendUint16(buf, h)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		off += k
	}
	return nil
}

// half is x as a 16-bit float of type t, bit for bit (NaN payloads
// included, so that what is read back writes out the same), and whether t
// holds it exactly.
func half(x float32, t backend.DType) (uint16, bool) {
	b := math.Float32bits(x)
	if t == backend.BF16 {
		return uint16(b >> 16), b&0xffff == 0
	}
	if x != x { // a binary16 NaN widens to its payload shifted up 13 bits
		return uint16(b>>16)&0x8000 | 0x7c00 | uint16(b>>13)&0x3ff, b&0x1fff == 0 && b&0x7fe000 != 0
	}
	h := backend.F16FromFloat32(x)
	return h, math.Float32bits(backend.Float32FromF16(h)) == b
}

// readHalves fills v from little-endian 16-bit floats of type t, widened
// exactly, passing the raw bytes to sum.
func readHalves(r io.Reader, v []float32, t backend.DType, sum func([]byte)) error {
	buf := make([]byte, 64<<10)
	for len(v) > 0 {
		k := min(len(v), len(buf)/2)
		if _, err := io.ReadFull(r, buf[:2*k]); err != nil {
			return err
		}
		sum(buf[:2*k])
		for i := range k {
			h := binary.LittleEndian.Uint16(buf[2*i:])
			if t == backend.BF16 {
				v[i] = backend.Float32FromBF16(h)
			} else {
				v[i] = backend.Float32FromF16(h)
			}
		}
		v = v[k:]
	}
	return nil
}
