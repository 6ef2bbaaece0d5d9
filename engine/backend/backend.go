// Package backend is the contract between the model definition and the
// machines that run it: a dozen fused ops of the Qwen3.5/3.6 hybrid MoE over
// device-resident buffers. The model records ops; a backend executes them.
//
// A backend compiles an op list once into a Program and runs it many times;
// nothing in an op changes between runs, so a GPU backend may capture a
// whole decode step (a CUDA graph, a Metal command buffer) and replay it.
// What varies lives in device buffers: the tokens, and the position, which
// an op (Advance) moves on. Every op declares the buffers it reads and
// writes (Access), so one shared piece of code (Dependencies) finds the real
// ordering constraints at compile time: a GPU backend may run independent
// ops concurrently and put barriers only where a later op needs an earlier
// result. The CPU backend simply runs the ops in order and is the executable
// specification the GPU backends are tested against (backendtest).
package backend

import (
	"fmt"
	"time"

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
	// Compile prepares ops to be run many times, in order as far as their
	// results go: a backend may capture, fuse, reorder (within what
	// Dependencies allows) or schedule them as it likes, once. The buffers
	// and matrices the ops name are fixed from then on; what they hold may
	// change between runs (a position, the next token).
	Compile(ops []Op) (Program, error)
	// Sync waits for all work issued so far and returns the first error of
	// work that had not reported one yet.
	Sync() error
}

// Program is a compiled op list.
type Program interface {
	// Run issues the program's ops. It may return before they are done:
	// the results are there for a Read (or after Sync), and an error of
	// the run may surface there instead.
	Run() error
	// Ops is the op list the program was compiled from.
	Ops() []Op
}

// RunOnce compiles ops, runs them and waits for them.
func RunOnce(be Backend, ops ...Op) error {
	p, err := be.Compile(ops)
	if err != nil {
		return err
	}
	if err := p.Run(); err != nil {
		return err
	}
	return be.Sync()
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

// CheckOperand is the check a GPU backend's lowering makes of an op's
// buffer: what (its name in the message) is of type t, with at least n
// elements; who names the backend in the message.
func CheckOperand(who, what string, b Buffer, t DType, n int) error {
	if b.Type != t {
		return fmt.Errorf("%s is a %s buffer; the %s ops take %s here (Copy converts)", what, b.Type, who, t)
	}
	if b.Len < n {
		return fmt.Errorf("%s has %d elements, the op needs %d", what, b.Len, n)
	}
	return nil
}

// CheckKV is the check of a KV cache's element type: f32 or bf16.
func CheckKV(what string, b Buffer) error {
	if b.Type != F32 && b.Type != BF16 {
		return fmt.Errorf("%s is a %s buffer; KV caches are f32 or bf16", what, b.Type)
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

// Dependencies returns, for each op, the earlier ops it must wait for:
// those it conflicts with (read-after-write, write-after-read or
// write-after-write on overlapping buffers), leaving out any that it already
// waits for through another of its dependencies. So an op that conflicts
// with ops 0 and 2, where 2 waits for 0, gets only {2}. The lists are in
// decreasing order. A backend calls it once, when it compiles.
func Dependencies(ops []Op) [][]int {
	n := len(ops)
	type access struct{ reads, writes []Buffer }
	acc := make([]access, n)
	words := (n + 63) / 64
	before := make([][]uint64, n) // before[i]: every op that i waits for, directly or not
	deps := make([][]int, n)
	for i, op := range ops {
		r, w := op.Access()
		acc[i] = access{r, w}
		before[i] = make([]uint64, words)
		for j := i - 1; j >= 0; j-- {
			if before[i][j/64]&(1<<(j%64)) != 0 {
				continue
			}
			if conflicts(acc[i].reads, acc[j].writes) || conflicts(acc[i].writes, acc[j].reads) || conflicts(acc[i].writes, acc[j].writes) {
				deps[i] = append(deps[i], j)
				before[i][j/64] |= 1 << (j % 64)
				for k, word := range before[j] {
					before[i][k] |= word
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

// KVCacheTyper is a backend with a setting for the element type of the KV
// caches (the CPU's kv= option). A model keeps the caches of its states in
// that type; for a backend without it, in F32.
type KVCacheTyper interface {
	KVCacheType() DType
}

// ChunkChooser is a backend with its own default prefill chunk (tokens per
// pass), the one it was measured fastest with; others get DefaultChunk.
type ChunkChooser interface {
	PrefillChunk() int
}

// DefaultChunk is the prefill chunk for be where none is asked for: its
// own choice, else 512.
func DefaultChunk(be Backend) int {
	if c, ok := be.(ChunkChooser); ok && c.PrefillChunk() > 0 {
		return c.PrefillChunk()
	}
	return 512
}

// Profiler is a backend that can time a program op by op (for petal bench
// --profile).
type Profiler interface {
	// ProfiledRun runs p as Run does and waits for it, adding the time of
	// each op of p.Ops() to times (as long as p.Ops()). A backend that
	// fuses or overlaps ops says how it shares the time out in its docs.
	ProfiledRun(p Program, times []time.Duration) error
}
