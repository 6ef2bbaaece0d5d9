// Package cuda runs petal's ops on an NVIDIA GPU: Backend (backend.Backend,
// "--backend cuda"), device-resident weights and the launchers of the
// kernels in engine/cuda/kernels, over the device layer of
// engine/cuda/driver. One-row ops run on the decode kernels (qmv, route,
// moe, gdn, attn) where their shapes fit, everything else on the plain
// kernels of ops.cu and sample.cu; a compiled program is one CUDA graph.
package cuda

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// QMatrix is a quantised matrix in device memory, in quant.Matrix's layout:
// the packed words of all rows, then the bf16 scales, then the biases.
type QMatrix struct {
	Rows, Cols, Bits, GroupSize int // Rows counts every row of an expert stack
	Words, Scales, Biases       driver.Ptr
	// ScaleBias is the scales and biases re-laid out at upload as one u32
	// per group (scale in the low half, bias in the high half), for the
	// kernels that read a group's pair with one load; 0 until
	// UploadScaleBias.
	ScaleBias driver.Ptr
	Bytes     int64 // weight bytes a mat-vec reads
	c         *driver.Context
	mem, sb   driver.Ptr
}

// UploadQMatrix copies m (all experts, as one matrix of Experts·Rows rows)
// to the device through up.
func UploadQMatrix(c *driver.Context, up *driver.Uploader, m *quant.Matrix, label string) (*QMatrix, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", label, err)
	}
	words, scales, biases := bytesOf(m.Words), bytesOf(m.Scales), bytesOf(m.Biases)
	// Each part starts 256-byte aligned, as the kernels' 16-byte loads need.
	align := func(n int) int64 { return int64((n + 255) &^ 255) }
	total := align(len(words)) + align(len(scales)) + align(len(biases))
	mem, err := c.Alloc(total, label)
	if err != nil {
		return nil, err
	}
	q := &QMatrix{
		Rows: m.Rows * m.Experts, Cols: m.Cols, Bits: m.Bits, GroupSize: m.GroupSize, Bytes: m.Bytes(),
		c: c, mem: mem, Words: mem,
	}
	q.Scales = q.Words.Add(align(len(words)))
	q.Biases = q.Scales.Add(align(len(scales)))
	for _, part := range []struct {
		dst driver.Ptr
		src []byte
	}{{q.Words, words}, {q.Scales, scales}, {q.Biases, biases}} {
		if err := up.Upload(part.dst, part.src); err != nil {
			c.Free(mem)
			return nil, fmt.Errorf("cuda: uploading %s: %w", label, err)
		}
	}
	return q, nil
}

// UploadScaleBias adds the interleaved scale/bias array of m (the matrix q
// was uploaded from) to q.
func (q *QMatrix) UploadScaleBias(up *driver.Uploader, m *quant.Matrix) error {
	if q.sb != 0 {
		return nil
	}
	sb := make([]uint32, len(m.Scales))
	for i := range sb {
		sb[i] = uint32(m.Scales[i]) | uint32(m.Biases[i])<<16
	}
	mem, err := q.c.Alloc(int64(4*len(sb)), "scale/bias")
	if err != nil {
		return err
	}
	if err := up.Upload(mem, bytesOf(sb)); err != nil {
		q.c.Free(mem)
		return fmt.Errorf("cuda: uploading scales and biases: %w", err)
	}
	q.sb, q.ScaleBias = mem, mem
	return nil
}

// RowRange returns a view of rows [first, first+n) of q (an expert of a
// stack, say); it shares q's memory and needs no Free.
func (q *QMatrix) RowRange(first, n int) *QMatrix {
	groups := int64(q.Cols / q.GroupSize)
	wpr := int64(q.Cols * q.Bits / 32)
	v := &QMatrix{Rows: n, Cols: q.Cols, Bits: q.Bits, GroupSize: q.GroupSize, c: q.c,
		Bytes: q.Bytes / int64(q.Rows) * int64(n)}
	v.Words = q.Words.Add(4 * wpr * int64(first))
	v.Scales = q.Scales.Add(2 * groups * int64(first))
	v.Biases = q.Biases.Add(2 * groups * int64(first))
	if q.ScaleBias != 0 {
		v.ScaleBias = q.ScaleBias.Add(4 * groups * int64(first))
	}
	return v
}

// Free releases the matrix's device memory.
func (q *QMatrix) Free() error {
	var err error
	if q.sb != 0 {
		err = q.c.Free(q.sb)
		q.sb, q.ScaleBias = 0, 0
	}
	if q.mem == 0 {
		return err
	}
	m := q.mem
	q.mem = 0
	if e := q.c.Free(m); e != nil {
		return e
	}
	return err
}

// bytesOf views a slice's elements as bytes (no copy).
func bytesOf[T any](s []T) []byte { return backend.BytesOf(s) }

// MatVec launches y = W·x for 4-bit matrices in groups of 64 (one variant of
// the qmatvec kernel family).
type MatVec struct {
	fn          *driver.Function
	variant     MatVecVariant
	sms         int
	sharedOptIn int
	blocksPerSM map[int]int // by dynamic shared memory size
}

// MatVecVariant is one compiled form of the mat-vec kernel (qmatvec.cu
// says what each name means); R is its rows per team.
type MatVecVariant struct {
	Name string
	R    int
}

// MatVecVariants are the variants compiled in qmatvec.cu.
var MatVecVariants = []MatVecVariant{
	{"r4u1", 4}, {"r4u2", 4}, {"r2u2", 2}, {"r2u2_b4", 2}, {"r4u1_b3", 4}, {"r4u2_b3", 4},
	{"p2", 2}, {"p2_b4", 2}, {"p4", 4}, {"p4_b3", 4}, {"p1_b4", 1},
}

// matVecLab are probes that time parts of the kernel and give wrong
// results by design (qmatvec.cu, MODE); only measurements use them.
var matVecLab = []MatVecVariant{
	{"lab_r4u1_nomath", 4}, {"lab_r4u1_noload", 4}, {"lab_r2u2_b4_nomath", 2}, {"lab_r2u2_b4_noload", 2},
}

// DefaultMatVec is the variant chosen from the H200 measurements
// (docs/bench/cuda/README.md): the best clang build without spills, within
// 2% of the best of every variant on the model's large shapes.
var DefaultMatVec = MatVecVariants[0]

func (v MatVecVariant) String() string { return v.Name }

const (
	matVecWarps = 8  // QMV_WARPS in qmatvec.cu
	matVecPad   = 36 // QMV_PAD in qmatvec.cu
)

// LoadQMatVecModule loads the qmatvec kernels embedded in the binary.
func LoadQMatVecModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "qmatvec")
}

// NewMatVec finds variant v in mod (the embedded module or another build of
// qmatvec.cu).
func NewMatVec(c *driver.Context, mod *driver.Module, v MatVecVariant) (*MatVec, error) {
	fn, err := mod.Function("qmatvec4_" + v.String())
	if err != nil {
		return nil, err
	}
	d := c.Device()
	return &MatVec{fn: fn, variant: v, sms: d.SMs, sharedOptIn: d.SharedOptIn, blocksPerSM: map[int]int{}}, nil
}

// Function is the kernel, for its resource report.
func (k *MatVec) Function() *driver.Function { return k.fn }

// Launch queues y[0:m.Rows] = W·x[0:m.Cols] on s. x and y are float32.
func (k *MatVec) Launch(s *driver.Stream, m *QMatrix, x, y driver.Ptr) error {
	if m.Bits != 4 || m.GroupSize != 64 {
		return fmt.Errorf("cuda: mat-vec of %d-bit weights in groups of %d is not built (4-bit in groups of 64 only)", m.Bits, m.GroupSize)
	}
	if m.Rows == 0 {
		return nil
	}
	chunks := m.Cols / 32
	team := 1
	for team*2 <= min(32, chunks) {
		team *= 2
	}
	shared := chunks * (matVecPad + 1) * 4
	if shared > k.sharedOptIn {
		return fmt.Errorf("cuda: mat-vec with %d columns needs %d bytes of shared memory; the GPU allows %d", m.Cols, shared, k.sharedOptIn)
	}
	perSM, ok := k.blocksPerSM[shared]
	if !ok {
		if shared > 48<<10 {
			if err := k.fn.SetMaxDynamicShared(shared); err != nil {
				return err
			}
		}
		var err error
		if perSM, err = k.fn.BlocksPerSM(matVecWarps*32, shared); err != nil {
			return err
		}
		if perSM < 1 {
			return fmt.Errorf("cuda: %s does not fit on a multiprocessor with %d bytes of shared memory", k.fn.Name, shared)
		}
		k.blocksPerSM[shared] = perSM
	}
	rowsPerBlock := matVecWarps * (32 / team) * k.variant.R
	grid := min((m.Rows+rowsPerBlock-1)/rowsPerBlock, k.sms*perSM)
	var a driver.Args
	a.Ptr(m.Words).Ptr(m.Scales).Ptr(m.Biases).Ptr(x).Ptr(y).I32(int32(m.Rows)).I32(int32(m.Cols)).I32(int32(team))
	return s.Launch(k.fn, driver.D1(grid), driver.D1(matVecWarps*32), shared, &a)
}
