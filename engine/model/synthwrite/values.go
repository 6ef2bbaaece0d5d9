package synthwrite

import (
	"encoding/binary"
	"io"
	"math"
	"unsafe"

	"petal/engine/model"
)

// writeValues writes a tensor's values little-endian, as safetensors
// stores them, and returns the bytes written.
func writeValues(w io.Writer, t *model.SyntheticTensor) (int64, error) {
	switch {
	case t.Words != nil:
		return writeLE(w, t.Words, 4, func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) })
	case t.Halves != nil:
		return writeLE(w, t.Halves, 2, func(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) })
	default:
		return writeLE(w, t.Floats, 4, func(b []byte, v float32) []byte { return binary.LittleEndian.AppendUint32(b, math.Float32bits(v)) })
	}
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// writeLE writes v as its bytes on a little-endian host (no copy of a
// matrix of gigabytes), else encoded a block at a time.
func writeLE[T uint16 | uint32 | float32](w io.Writer, v []T, size int, encode func([]byte, T) []byte) (int64, error) {
	if len(v) == 0 {
		return 0, nil
	}
	if littleEndian {
		n, err := w.Write(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*size))
		return int64(n), err
	}
	var total int64
	buf := make([]byte, 0, 64<<10)
	for start := 0; start < len(v); start += cap(buf) / size {
		buf = buf[:0]
		for _, x := range v[start:min(len(v), start+cap(buf)/size)] {
			buf = encode(buf, x)
		}
		n, err := w.Write(buf)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
