package session

import (
	"encoding/binary"
	"io"
	"math"
	"unsafe"
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
