// Package metal is petal's backend for Apple GPUs (backend.Backend): every
// op lowered to the kernels of engine/metal/kernels, a compiled program one
// command buffer of dispatches in a concurrent encoder with barriers only
// where the ops' dependencies need them.
//
// The lowering is written once against a small device interface
// (engine/metal/dispatch) with two implementations: on macOS the Metal
// device of engine/metal/device (Open), and, as a test vehicle only, the
// CUDA driver running the same .metal sources compiled as CUDA
// (engine/metal/cudarun's Dispatcher), so that the lowering's kernels,
// parameter structs, grids and barriers can be run and checked on an
// NVIDIA GPU before a Mac sees them. Nothing of this package has run on
// Apple hardware yet.
package metal

import (
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

// Backend runs petal's ops through a dispatcher. Its work is one stream: a
// Run submits the program's command buffer and returns
// (backend.Asynchronous); a Read, a Write, a Copy or a Sync waits for it.
type Backend struct {
	o Options
	d dispatch.Dispatcher

	kernels map[string]dispatch.Kernel // "family.entry"
	scratch grower                     // temporaries of the ops (see program.scratchNeed)
	zeros   grower                     // never written: the residual of moe.metal's down (expertsOne)
	ropes   map[ropeKey]dispatch.Mem   // (hi, lo) inverse frequency pairs per (rotary dims, theta)
	held    []dispatch.Mem             // freed at Close
	regions []*region                  // memory maps wrapped in place (MapRegions), released at Close at the latest
	last    *program                   // the last program run, named in errors that surface later
	closed  bool

	inPlaceBytes, copiedBytes int64 // of the matrices' codes, scales and biases (WeightBytes)
}

type ropeKey struct {
	rot   int
	theta float64
}

// grower is device memory that only grows: a program keeps the allocation
// it was compiled with, so a smaller one is kept (until Close) when a
// larger one replaces it.
type grower struct {
	m     dispatch.Mem
	bytes int64
}

// New makes a backend over d, which it closes at Close.
func New(d dispatch.Dispatcher, o Options) (*Backend, error) {
	switch o.KV {
	case 0:
		o.KV = backend.F32
	case backend.F32, backend.BF16:
	default:
		return nil, fmt.Errorf("metal: KV caches of element type %s, want f32 or bf16", o.KV)
	}
	if o.TensorGEMM {
		o.SimdGEMM = true
		if err := tensorOps(d); err != nil {
			o.TensorGEMM = false
			fmt.Fprintf(stderr, "metal: gemm=tensor: %v; prefill's GEMMs take gemm=simd (simdgroup matrices) instead\n", err)
		}
	}
	return &Backend{o: o, d: d, kernels: map[string]dispatch.Kernel{}, ropes: map[ropeKey]dispatch.Mem{}}, nil
}

// stderr receives the backend's notes (the fallback from gemm=tensor).
var stderr io.Writer = os.Stderr

// tensorOps is nil where d runs Metal 4's tensor operations, else why not.
func tensorOps(d dispatch.Dispatcher) error {
	t, ok := d.(dispatch.TensorOps)
	if !ok {
		return fmt.Errorf("%s has no tensor operations", d.Device())
	}
	return t.TensorOps()
}

func (b *Backend) Name() string { return "metal" }

// Device describes the device the backend runs on.
func (b *Backend) Device() string { return b.d.Device() }

// Options are the backend's settings.
func (b *Backend) Options() Options { return b.o }

// KVCacheType is the element type of the KV caches (Options.KV).
func (b *Backend) KVCacheType() backend.DType { return b.o.KV }

// Asynchronous: Run submits the program's command buffer and returns.
func (b *Backend) Asynchronous() bool { return true }

// Close waits for the device and releases everything the backend holds;
// its buffers, matrices and programs must not be used afterwards.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.d.Wait()
	b.releaseRegions(b.regions) // before the caller unmaps them, with the work reading them done
	for _, m := range b.held {
		b.d.Free(m)
	}
	for _, g := range []grower{b.scratch, b.zeros} {
		if g.m != nil {
			b.d.Free(g.m)
		}
	}
	for _, m := range b.ropes {
		b.d.Free(m)
	}
	if e := b.d.Close(); err == nil {
		err = e
	}
	return err
}

// kernel is entry point entry of family, prepared once.
func (b *Backend) kernel(family, entry string) (dispatch.Kernel, error) {
	key := family + "." + entry
	if k, ok := b.kernels[key]; ok {
		return k, nil
	}
	k, err := b.d.Kernel(family, entry)
	if err != nil {
		return nil, err
	}
	b.kernels[key] = k
	return k, nil
}

// alloc is a zeroed allocation of at least n bytes (16 at least, a
// multiple of 16).
func (b *Backend) alloc(n int64) (dispatch.Mem, error) {
	if b.closed {
		return nil, fmt.Errorf("metal: the backend is closed")
	}
	return b.d.Alloc(max(16, (n+15)&^15))
}

// grow returns g's memory, at least n bytes, replacing it by a larger
// allocation where needed (the old one is kept: programs point at it).
func (b *Backend) grow(g *grower, n int64) (dispatch.Mem, error) {
	if n <= g.bytes && g.m != nil {
		return g.m, nil
	}
	n = max(n, 2*g.bytes, 1<<16)
	m, err := b.alloc(n)
	if err != nil {
		return nil, err
	}
	if g.m != nil {
		b.held = append(b.held, g.m)
	}
	g.m, g.bytes = m, n
	return m, nil
}

// memory is one allocation of Alloc.
type memory struct {
	b     *Backend
	m     dispatch.Mem
	bytes int64
}

func (*memory) Backend() string { return "metal" }

func (b *Backend) Alloc(n int, t backend.DType) (backend.Buffer, error) {
	if err := backend.CheckAlloc(n, t); err != nil {
		return backend.Buffer{}, err
	}
	bytes := int64(n) * int64(t.Size())
	m, err := b.alloc(bytes)
	if err != nil {
		return backend.Buffer{}, err
	}
	return backend.Buffer{Mem: &memory{b: b, m: m, bytes: bytes}, Len: n, Type: t}, nil
}

func (b *Backend) Free(buf backend.Buffer) {
	if m, ok := buf.Mem.(*memory); ok && m.b == b && m.m != nil {
		b.d.Free(m.m)
		m.m = nil
	}
}

// arg is the position of buf's first element, after checking that buf is
// a live allocation of this backend.
func (b *Backend) arg(buf backend.Buffer) (dispatch.Arg, error) {
	m, ok := buf.Mem.(*memory)
	switch {
	case buf.Mem == nil:
		return dispatch.Arg{}, fmt.Errorf("metal: a buffer is missing")
	case !ok || m.b != b:
		return dispatch.Arg{}, fmt.Errorf("metal: a buffer of another backend (%s)", buf.Mem.Backend())
	case m.m == nil:
		return dispatch.Arg{}, fmt.Errorf("metal: a freed buffer")
	case buf.Offset < 0 || int64(buf.Offset+buf.Len)*int64(buf.Type.Size()) > m.bytes:
		return dispatch.Arg{}, fmt.Errorf("metal: a view past the end of its allocation")
	}
	return dispatch.Arg{Mem: m.m, Off: int64(buf.Offset) * int64(buf.Type.Size())}, nil
}

func (b *Backend) hostCheck(buf backend.Buffer, n int, ints bool) (dispatch.Arg, error) {
	if err := backend.CheckHost(buf, n, ints); err != nil {
		return dispatch.Arg{}, err
	}
	return b.arg(buf)
}

func (b *Backend) Write(dst backend.Buffer, src []float32) error {
	a, err := b.hostCheck(dst, len(src), false)
	if err != nil || len(src) == 0 {
		return err
	}
	return b.surfaced(b.d.Upload(a, backend.Encode(dst.Type, src)))
}

func (b *Backend) WriteInts(dst backend.Buffer, src []int32) error {
	a, err := b.hostCheck(dst, len(src), true)
	if err != nil || len(src) == 0 {
		return err
	}
	return b.surfaced(b.d.Upload(a, bytesOf(src)))
}

// Read waits for the work before it.
func (b *Backend) Read(src backend.Buffer, dst []float32) error {
	a, err := b.hostCheck(src, len(dst), false)
	if err != nil || len(dst) == 0 {
		return err
	}
	if src.Type == backend.F32 {
		return b.surfaced(b.d.Download(bytesOf(dst), a))
	}
	h := make([]uint16, len(dst))
	if err := b.surfaced(b.d.Download(bytesOf(h), a)); err != nil {
		return err
	}
	backend.Widen(src.Type, h, dst)
	return nil
}

func (b *Backend) ReadInts(src backend.Buffer, dst []int32) error {
	a, err := b.hostCheck(src, len(dst), true)
	if err != nil || len(dst) == 0 {
		return err
	}
	return b.surfaced(b.d.Download(bytesOf(dst), a))
}

// Copy copies on the device: bytes where the types agree, else through
// ops.metal's convert (rounding as Write does).
func (b *Backend) Copy(dst, src backend.Buffer) error {
	if err := backend.CheckCopy(dst, src); err != nil {
		return err
	}
	d, err := b.arg(dst)
	if err != nil {
		return err
	}
	s, err := b.arg(src)
	if err != nil {
		return err
	}
	if dst.Len == 0 || dst == src {
		return nil
	}
	if dst.Type == src.Type {
		return b.surfaced(b.d.Copy(d, s, int64(dst.Len)*int64(dst.Type.Size())))
	}
	k, err := b.kernel("ops", "convert")
	if err != nil {
		return err
	}
	cmd := dispatch.Command{Kernel: k, Buffers: []dispatch.Arg{s, d},
		Params: params(kernels.ConvertParams{N: uint32(dst.Len), From: src.Type.ConvertCode(), To: dst.Type.ConvertCode()}),
		Groups: dispatch.D1(ceil(dst.Len, 256)), Threads: dispatch.D1(256)}
	if err := cmd.Check(); err != nil {
		return err
	}
	return b.surfaced(b.d.Submit([]dispatch.Command{cmd}))
}

// Sync waits for everything submitted; an error of the device surfaces
// here with the program it came from.
func (b *Backend) Sync() error { return b.surfaced(b.d.Wait()) }

// surfaced adds to an error of the device which work it may have come
// from: an error of a command buffer shows at the next call that waits.
func (b *Backend) surfaced(err error) error {
	if err == nil || b.last == nil {
		return err
	}
	return fmt.Errorf("%w (an error of the work submitted up to now, the last program run being %s; --backend metal:sync=op names the op)", err, b.last.desc)
}

// matrix is a quantised matrix on the device: its codes, MLX's bf16 scales
// and biases, for 4-bit matrices in groups of 64 the interleaved
// scale/bias words the _sb decode kernels read (one u32 per group, scale
// in the low half), and a one-entry QShape table for ops.metal.
type matrix struct {
	b                     *Backend
	shape                 quant.Matrix // slices nil: the weights live on the device only
	q                     kernels.QShape
	words, scales, biases dispatch.Arg // copies at offset 0, or in place in a wrapped memory map
	sb                    dispatch.Mem // nil unless 4-bit, groups of 64
	table                 dispatch.Mem // the QShape
}

func (w *matrix) Shape() quant.Matrix { return w.shape }

// rows is the number of rows of the whole stack.
func (w *matrix) rows() int { return int(w.q.Rows) }
func (w *matrix) cols() int { return int(w.q.Cols) }

// fourBit64 is a matrix the 4-bit decode kernels take.
func (w *matrix) fourBit64() bool { return w.q.Bits == 4 && w.q.Group == 64 && w.sb != nil }

func shapeOf(m *quant.Matrix) kernels.QShape {
	return kernels.QShape{Rows: int32(m.Rows * m.Experts), Cols: int32(m.Cols), Bits: int32(m.Bits),
		Group: int32(m.GroupSize), Wpr: int32(m.WordsPerRow()), Gpr: int32(m.GroupsPerRow())}
}

// Upload puts a quantised matrix on the device: its codes, scales and
// biases bound in place where they lie in a region of MapRegions (see
// inPlace), else copied; the tables made from them (the interleaved
// scale/bias words, the QShape) are always copied.
func (b *Backend) Upload(m quant.Matrix) (backend.Matrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	w := &matrix{b: b, shape: m, q: shapeOf(&m)}
	w.shape.Words, w.shape.Scales, w.shape.Biases = nil, nil, nil
	up := func(raw []byte) (dispatch.Mem, error) {
		mem, err := b.alloc(int64(len(raw)))
		if err != nil {
			return nil, err
		}
		b.held = append(b.held, mem)
		if len(raw) > 0 {
			if err := b.d.Upload(dispatch.Arg{Mem: mem}, raw); err != nil {
				return nil, err
			}
		}
		return mem, nil
	}
	// bind is raw in place, or a copy; align is the size of the element
	// the kernels read it as.
	bind := func(raw []byte, align int64) (dispatch.Arg, error) {
		if a, ok := b.inPlace(raw, align); ok {
			b.inPlaceBytes += int64(len(raw))
			return a, nil
		}
		mem, err := up(raw)
		b.copiedBytes += int64(len(raw))
		return dispatch.Arg{Mem: mem}, err
	}
	var err error
	if w.words, err = bind(bytesOf(m.Words), 4); err != nil {
		return nil, err
	}
	if w.scales, err = bind(bytesOf(m.Scales), 2); err != nil {
		return nil, err
	}
	if w.biases, err = bind(bytesOf(m.Biases), 2); err != nil {
		return nil, err
	}
	if m.Bits == 4 && m.GroupSize == 64 {
		if w.sb, err = up(bytesOf(interleaveScaleBias(&m))); err != nil {
			return nil, err
		}
	}
	if w.table, err = up(params(w.q)); err != nil {
		return nil, err
	}
	return w, nil
}

// interleaveScaleBias is one u32 per group, the scale's bf16 in the low
// half and the bias's in the high (qgroup.h's load_sb with SB 1).
func interleaveScaleBias(m *quant.Matrix) []uint32 {
	sb := make([]uint32, len(m.Scales))
	for i := range sb {
		sb[i] = uint32(m.Scales[i]) | uint32(m.Biases[i])<<16
	}
	return sb
}

// mat is the device form of a matrix of this backend.
func (b *Backend) mat(m backend.Matrix) (*matrix, error) {
	w, ok := m.(*matrix)
	if !ok || w == nil || w.b != b {
		return nil, fmt.Errorf("metal: a matrix that was not uploaded to this backend")
	}
	return w, nil
}

// ropeTable is the table of (hi, lo) float pairs of theta^(-2i/rot) that
// the prep kernels read (rope.h): hi = float32(f), lo = float32(f - hi),
// made in float64.
func (b *Backend) ropeTable(rot int, theta float64) (dispatch.Mem, error) {
	k := ropeKey{rot, theta}
	if m, ok := b.ropes[k]; ok {
		return m, nil
	}
	pairs := RopePairs(rot, theta)
	m, err := b.alloc(int64(4 * max(1, len(pairs))))
	if err != nil {
		return nil, err
	}
	if err := b.d.Upload(dispatch.Arg{Mem: m}, bytesOf(pairs)); err != nil {
		b.d.Free(m)
		return nil, err
	}
	b.ropes[k] = m
	return m, nil
}

// RopePairs is the (hi, lo) table of rope.h for rot rotary dims: rot/2
// pairs, hi = float32(f) and lo = float32(f - hi) for f =
// theta^(-2i/rot) in float64.
func RopePairs(rot int, theta float64) []float32 {
	out := make([]float32, 2*(rot/2))
	for i := range rot / 2 {
		f := math.Pow(theta, -float64(2*i)/float64(rot))
		hi := float32(f)
		out[2*i], out[2*i+1] = hi, float32(f-float64(hi))
	}
	return out
}

// params is a params.h struct's bytes (its Go twin of params.go).
func params[T any](p T) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&p)), unsafe.Sizeof(p))...)
}

func bytesOf[T any](s []T) []byte { return backend.BytesOf(s) }

func ceil(a, b int) int { return (a + b - 1) / b }
