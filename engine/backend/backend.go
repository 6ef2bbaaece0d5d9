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

// Buffer is a window of Len elements at Offset into one allocation. Float
// buffers hold float32, Int buffers int32 (token ids, expert indices).
type Buffer struct {
	Mem    Memory
	Offset int
	Len    int
	Int    bool
}

// View returns the sub-window [off, off+n) of b.
func (b Buffer) View(off, n int) Buffer {
	if off < 0 || n < 0 || off+n > b.Len {
		panic(fmt.Sprintf("backend: view [%d, %d) of a %d-element buffer", off, off+n, b.Len))
	}
	return Buffer{Mem: b.Mem, Offset: b.Offset + off, Len: n, Int: b.Int}
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

// Backend executes the op set.
type Backend interface {
	Name() string
	// Alloc returns a zeroed buffer of n float32 (or int32) elements.
	Alloc(n int, isInt bool) Buffer
	// Free releases an allocation made by Alloc (views of it become invalid).
	Free(b Buffer)
	// Upload binds a quantised matrix for use by ops.
	Upload(m quant.Matrix) (Matrix, error)
	// Write and Read copy between host memory and a buffer.
	Write(dst Buffer, src []float32)
	WriteInts(dst Buffer, src []int32)
	Read(src Buffer, dst []float32)
	// Run executes ops in order (a backend may reorder only what
	// Dependencies allows) and returns when their results can be read.
	Run(ops ...Op) error
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
