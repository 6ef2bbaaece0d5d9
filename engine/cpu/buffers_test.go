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

// TestPositionChecked: an attention op whose position, read from the device
// at run time, puts its rows past the cache fails with an error saying so;
// Advance moves the position on; Compile refuses an op over a bf16 buffer.
func TestPositionChecked(t *testing.T) {
	b := New()
	const D = 8
	pos := mustInts(b, 3)
	o := &backend.Attention{Q: mustBuf(b, make([]float32, 2*D)), QG: mustBuf(b, make([]float32, 2*2*D)),
		KCache: mustBuf(b, make([]float32, 5*D)), VCache: mustBuf(b, make([]float32, 5*D)),
		Out: mustBuf(b, make([]float32, 2*D)), Pos: pos, Rows: 2, QHeads: 1, KVHeads: 1, HeadDim: D}
	p, err := b.Compile([]backend.Op{o, &backend.Advance{Pos: pos, By: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil { // rows 3 and 4 of 5
		t.Fatal(err)
	}
	got := make([]int32, 1)
	if err := b.ReadInts(pos, got); err != nil || got[0] != 5 {
		t.Fatalf("position after Advance: %v, %v; want 5", got, err)
	}
	if err := p.Run(); err == nil || !strings.Contains(err.Error(), "2 tokens at position 5 do not fit a cache of 5") {
		t.Errorf("a run past the cache: error %v", err)
	}
	half, _ := b.Alloc(2*D, backend.BF16)
	bad := *o
	bad.Out = half
	if _, err := b.Compile([]backend.Op{&bad}); err == nil || !strings.Contains(err.Error(), "bf16") {
		t.Errorf("an attention op writing a bf16 buffer compiled: %v", err)
	}
}
