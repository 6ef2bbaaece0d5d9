package cpu

import (
	"math"
	"strings"
	"testing"

	"petal/engine/backend"
)

// TestTypedBuffers: bf16 and f16 buffers hold 16-bit patterns (rounded as
// the backend package defines), Copy converts between every pair of float
// types on the device, and misuse is an error that says what is wrong.
func TestTypedBuffers(t *testing.T) {
	b := New()
	vals := []float32{1, -2.5, 1.0 / 3, 65504, 1e-3, float32(math.Inf(1)), 3.14159265, -0.0}
	floats := []backend.DType{backend.F32, backend.BF16, backend.F16}
	for _, ty := range floats {
		buf, err := backend.AllocFloats(b, ty, vals)
		if err != nil {
			t.Fatal(err)
		}
		if ty != backend.F32 && len(H(buf)) != len(vals) {
			t.Fatalf("%s buffer is not stored as 16-bit values", ty)
		}
		got := make([]float32, len(vals))
		if err := b.Read(buf, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if math.Float32bits(got[i]) != math.Float32bits(backend.Round(ty, v)) {
				t.Errorf("%s: %g reads back as %g, want %g", ty, v, got[i], backend.Round(ty, v))
			}
		}
		for _, to := range floats {
			dst, _ := b.Alloc(len(vals), to)
			if err := b.Copy(dst, buf); err != nil {
				t.Fatal(err)
			}
			if err := b.Read(dst, got); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				want := backend.Round(to, backend.Round(ty, v))
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Errorf("copy %s to %s: %g became %g, want %g", ty, to, v, got[i], want)
				}
			}
		}
	}

	ints, err := backend.AllocInts(b, []int32{7, -1, 3})
	if err != nil {
		t.Fatal(err)
	}
	ints2, _ := b.Alloc(3, backend.I32)
	if err := b.Copy(ints2, ints); err != nil {
		t.Fatal(err)
	}
	gotInts := make([]int32, 3)
	if err := b.ReadInts(ints2, gotInts); err != nil || gotInts[0] != 7 || gotInts[1] != -1 || gotInts[2] != 3 {
		t.Errorf("int copy read back %v, %v", gotInts, err)
	}

	f, _ := b.Alloc(3, backend.F32)
	small, _ := b.Alloc(2, backend.F32)
	freed, _ := b.Alloc(3, backend.F32)
	b.Free(freed)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"write of the wrong length", b.Write(f, vals), "8 host values for a 3-element buffer"},
		{"floats into ints", b.Write(ints, []float32{1, 2, 3}), "float32 values for a i32 buffer"},
		{"ints into floats", b.WriteInts(f, []int32{1, 2, 3}), "int32 values for a f32 buffer"},
		{"read of the wrong length", b.Read(f, make([]float32, 2)), "2 host values"},
		{"copy of another length", b.Copy(small, f), "copy of 3 elements into 2"},
		{"copy between ints and floats", b.Copy(f, ints), "copy from i32 into f32"},
		{"copy within overlapping views", b.Copy(f.View(0, 2), f.View(1, 2)), "overlapping"},
		{"a freed buffer", b.Write(freed, []float32{1, 2, 3}), "freed"},
		{"alloc of no type", allocErr(b, 3, 0), "element type untyped"},
		{"alloc of a negative size", allocErr(b, -1, backend.F32), "-1 elements"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, c.err, c.want)
		}
	}
}

func allocErr(b *Backend, n int, ty backend.DType) error {
	_, err := b.Alloc(n, ty)
	return err
}
