// Package backend is the contract between the model definition and the
// machines that run it: a dozen fused ops of the Qwen3.5/3.6 hybrid MoE over
// device-resident buffers. The model records ops; a backend executes them.
//
// Every op declares the buffers it reads and writes (Access), so one shared
// piece of code (Dependencies) can find the real ordering constraints: a GPU
// backend may run independent ops concurrently and put barriers only where a
// later op needs an earlier result, or capture a whole decode step and replay
// it. The CPU backend simply runs the ops in order and is the executable
// specification the GPU backends are tested against.
package backend

import (
	"fmt"

	"petal/engine/quant"
)

// Memory is a backend's own allocation; only that backend looks inside.
type Memory interface {
	Backend() string
}

// Buffer is a window of Len elements of type Type at Offset (in elements)
// into one allocation.
type Buffer struct {
	Mem    Memory
	Offset int
	Len    int
	Type   DType
}

// View returns the sub-window [off, off+n) of b.
func (b Buffer) View(off, n int) Buffer {
	if off < 0 || n < 0 || off+n > b.Len {
		panic(fmt.Sprintf("backend: view [%d, %d) of a %d-element buffer", off, off+n, b.Len))
	}
	return Buffer{Mem: b.Mem, Offset: b.Offset + off, Len: n, Type: b.Type}
}

// Rows returns rows [r0, r0+n) of a row-major buffer with dim columns.
func (b Buffer) Rows(r0, n, dim int) Buffer { return b.View(r0*dim, n*dim) }

// Overlaps reports whether two buffers share any element.
func (b Buffer) Overlaps(o Buffer) bool {
	return b.Mem != nil && b.Mem == o.Mem && b.Offset < o.Offset+o.Len && o.Offset < b.Offset+b.Len
}

// Matrix is a quantised weight matrix as a backend holds it (for the CPU, the
// memory-mapped quant.Matrix itself).
type Matrix interface {
	Shape() quant.Matrix // the host description: rows, cols, experts, bits, group (slices may be nil)
}

// Backend executes the op set. Its methods are ordered with each other as
// one stream: a Write, a Copy or a Run sees every earlier call's effect.
type Backend interface {
	Name() string
	// Alloc returns a zeroed buffer of n elements of type t.
	Alloc(n int, t DType) (Buffer, error)
	// Free releases an allocation made by Alloc (views of it become invalid).
	Free(b Buffer)
	// Upload binds a quantised matrix for use by ops.
	Upload(m quant.Matrix) (Matrix, error)
	// Write and Read copy between host memory and a buffer of the same
	// length: float32 values into or out of any float type (rounded as
	// Round does), int32 values for I32 buffers. Read waits for the work
	// before it, so errors of earlier work may surface there.
	Write(dst Buffer, src []float32) error
	WriteInts(dst Buffer, src []int32) error
	Read(src Buffer, dst []float32) error
	ReadInts(src Buffer, dst []int32) error
	// Copy copies src into dst on the device: two buffers of one length,
	// both float (converting between float types) or both I32.
	Copy(dst, src Buffer) error
	// Run executes ops in order (a backend may reorder only what
	// Dependencies allows) and returns when their results can be read.
	Run(ops ...Op) error
}

// CheckHost is the check of Write and Read that every backend makes: b is a
// buffer of n elements of a float type (or of I32 when ints).
func CheckHost(b Buffer, n int, ints bool) error {
	switch {
	case b.Mem == nil:
		return fmt.Errorf("backend: no buffer")
	case ints && b.Type != I32:
		return fmt.Errorf("backend: int32 values for a %s buffer", b.Type)
	case !ints && !b.Type.IsFloat():
		return fmt.Errorf("backend: float32 values for a %s buffer", b.Type)
	case n != b.Len:
		return fmt.Errorf("backend: %d host values for a %d-element buffer", n, b.Len)
	}
	return nil
}

// CheckCopy is the check of Copy that every backend makes.
func CheckCopy(dst, src Buffer) error {
	switch {
	case dst.Mem == nil || src.Mem == nil:
		return fmt.Errorf("backend: copy with no buffer")
	case dst.Len != src.Len:
		return fmt.Errorf("backend: copy of %d elements into %d", src.Len, dst.Len)
	case dst.Type.IsFloat() != src.Type.IsFloat() || !dst.Type.Valid() || !src.Type.Valid():
		return fmt.Errorf("backend: copy from %s into %s", src.Type, dst.Type)
	case dst.Overlaps(src) && dst != src:
		return fmt.Errorf("backend: copy between overlapping buffers")
	}
	return nil
}

// CheckAlloc is the check of Alloc that every backend makes.
func CheckAlloc(n int, t DType) error {
	if n < 0 {
		return fmt.Errorf("backend: allocation of %d elements", n)
	}
	if !t.Valid() {
		return fmt.Errorf("backend: allocation of element type %s", t)
	}
	return nil
}

// AllocFloats allocates a buffer of type t holding x.
func AllocFloats(be Backend, t DType, x []float32) (Buffer, error) {
	b, err := be.Alloc(len(x), t)
	if err != nil {
		return Buffer{}, err
	}
	if err := be.Write(b, x); err != nil {
		be.Free(b)
		return Buffer{}, err
	}
	return b, nil
}

// AllocInts allocates an I32 buffer holding x.
func AllocInts(be Backend, x []int32) (Buffer, error) {
	b, err := be.Alloc(len(x), I32)
	if err != nil {
		return Buffer{}, err
	}
	if err := be.WriteInts(b, x); err != nil {
		be.Free(b)
		return Buffer{}, err
	}
	return b, nil
}

// Op is one fused operation. Access lists the buffers it reads and writes;
// it must be complete, since schedulers trust it.
type Op interface {
	Name() string
	Access() (reads, writes []Buffer)
}

// Dependencies returns, for each op, the indices of the earlier ops it must
// wait for: read-after-write, write-after-read and write-after-write on
// overlapping buffers. Only the latest conflicting op of each kind is kept
// per buffer pair, which is enough for an in-order stream with barriers.
func Dependencies(ops []Op) [][]int {
	deps := make([][]int, len(ops))
	type access struct{ reads, writes []Buffer }
	acc := make([]access, len(ops))
	for i, op := range ops {
		r, w := op.Access()
		acc[i] = access{r, w}
		seen := map[int]bool{}
		for j := i - 1; j >= 0; j-- {
			if conflicts(acc[i].reads, acc[j].writes) || conflicts(acc[i].writes, acc[j].reads) || conflicts(acc[i].writes, acc[j].writes) {
				if !seen[j] {
					seen[j] = true
					deps[i] = append(deps[i], j)
				}
			}
		}
	}
	return deps
}

func conflicts(a, b []Buffer) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Overlaps(y) {
				return true
			}
		}
	}
	return false
}
