package checkpoint

import (
	"encoding/binary"
	"testing"
)

// withHeader frames a raw JSON header and data as a safetensors file.
func withHeader(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

// FuzzParseHeader feeds arbitrary files to the header parser: it must never
// panic, and whatever it accepts must describe views inside the file whose
// sizes agree with dtype and shape, and that cover its data area exactly.
func FuzzParseHeader(f *testing.F) {
	good := encodeSafetensors(routerTensors())
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(good[:20])
	f.Add([]byte{})
	f.Add(withHeader(`{}`, nil))
	f.Add(withHeader(`null`, nil))
	f.Add(withHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(withHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"b":{"dtype":"U32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 12)))
	f.Add(withHeader(`{"a":{"dtype":"F32","shape":[-1,-2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(withHeader(`{"a":{"dtype":"BF16","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, nil))
	f.Add(withHeader(`{"a":{"dtype":"I32","shape":[],"data_offsets":[8,4]}}`, make([]byte, 8)))
	f.Add(withHeader(`{"__metadata__":{"format":"mlx","n":3},"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)))
	f.Add(withHeader(`{"a":{"dtype":"F16","shape":[1],"data_offsets":[0]}}`, make([]byte, 2)))
	f.Add(withHeader(`{"a":[1,2,3]}   `, nil))
	f.Fuzz(func(t *testing.T, file []byte) {
		tensors, _, err := parseHeader("fuzz.safetensors", file)
		if err != nil {
			return
		}
		// accepted: the tensors tile the data area, which ends the file
		var total int
		for _, tn := range tensors {
			total += len(tn.Data)
		}
		if n := binary.LittleEndian.Uint64(file); uint64(total) != uint64(len(file))-8-n {
			t.Fatalf("%d bytes of tensors in a %d-byte file with a %d-byte header", total, len(file), n)
		}
		for _, tn := range tensors {
			if tn.DType.Size() == 0 { // only ignored tensors may have other dtypes
				if _, inText := normaliseName(tn.Name); inText {
					t.Fatalf("tensor %q of the text model has unsupported dtype %s", tn.Name, tn.DType)
				}
				continue
			}
			if len(tn.Data) != tn.NumElements()*tn.DType.Size() {
				t.Fatalf("tensor %q: %d bytes for shape %v of %s", tn.Name, len(tn.Data), tn.Shape, tn.DType)
			}
			if len(tn.Data) > len(file) {
				t.Fatalf("tensor %q larger than the file", tn.Name)
			}
		}
	})
}
