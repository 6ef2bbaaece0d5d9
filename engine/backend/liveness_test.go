package backend_test

import (
	"testing"

	"petal/engine/backend"
)

// TestOverwritten: a norm's output read only by the linear after it and
// then written over by the next norm is dead; read by another op first,
// written over only in part, or still there at the run's end, it is not.
func TestOverwritten(t *testing.T) {
	mem, other := &fakeMem{}, &fakeMem{}
	buf := func(m backend.Memory, off, n int) backend.Buffer {
		return backend.Buffer{Mem: m, Offset: off, Len: n, Type: backend.F32}
	}
	h, a, y, z := buf(mem, 0, 64), buf(mem, 64, 64), buf(mem, 128, 64), buf(other, 0, 64)
	norm := func(out backend.Buffer) backend.Op {
		return &backend.AddRMSNorm{H: h, Weight: z, Out: out, Rows: 1, Dim: 64}
	}
	linear := func(x, out backend.Buffer) backend.Op { return &backend.QLinear{X: x, Y: out, Rows: 1} }
	for _, c := range []struct {
		name string
		ops  []backend.Op
		want bool
	}{
		{"read by its linear, then written over", []backend.Op{norm(a), linear(a, y), norm(a)}, true},
		{"read by another op first", []backend.Op{norm(a), linear(a, y), linear(a, z), norm(a)}, false},
		{"still there at the end", []backend.Op{norm(a), linear(a, y)}, false},
		{"written over in part", []backend.Op{norm(a), linear(a, y), norm(buf(mem, 64, 32))}, false},
		{"read and written by one op", []backend.Op{norm(a), linear(a, y), &backend.AddRMSNorm{H: a, Weight: z, Out: a, Rows: 1, Dim: 64}}, false},
		{"another buffer written", []backend.Op{norm(a), linear(a, y), norm(y), norm(a)}, true},
	} {
		if got := backend.Overwritten(c.ops, 0, a, 1); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
