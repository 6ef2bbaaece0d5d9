package cuda

import (
	"encoding/binary"
	"fmt"

	"petal/engine/cuda/driver"
)

// QKind is the arithmetic a 4-bit kernel does its group dot products in
// (kernels/qgroup.h says how each works).
type QKind int

const (
	// QF32 is exact float32: the default.
	QF32 QKind = iota
	// QF16 holds x in f16 and sums 16 products in packed half before
	// float32; a lower-precision choice, for measurement.
	QF16
	// QI8x1, QI8x2 and QI8x3 quantise x per group of 64 to 1, 2 or 3 int8
	// parts (8, 16, 24 bits) and sum codes times parts exactly in int32
	// with dp4a.
	QI8x1
	QI8x2
	QI8x3
)

var qkindNames = [...]string{"f32", "f16", "i8x1", "i8x2", "i8x3"}

func (k QKind) String() string { return qkindNames[k] }

// stageWords is QStage<M>::words in qgroup.h: shared-memory words per
// staged group of 64 inputs.
func (k QKind) stageWords() int {
	switch k {
	case QF32:
		return 68
	case QF16:
		return 36
	default:
		return 20 * int(k-QI8x1+1)
	}
}

// stageBytes is QSTAGE_BYTES: the shared memory that staging a vector of
// the given groups takes (its float32 copy, the kind's layout, and two
// floats per group).
func (k QKind) stageBytes(groups int) int { return groups * (64 + k.stageWords() + 2) * 4 }

// teamFor is the lanes sharing a row: the largest power of two at most 32
// and at most the row's groups.
func teamFor(groups int) int {
	team := 1
	for team*2 <= min(32, groups) {
		team *= 2
	}
	return team
}

// QMVVariant is one compiled form of qmv.cu: its arithmetic, rows per
// lane, and whether it reads the interleaved scale/bias array.
type QMVVariant struct {
	Kind QKind
	R    int
	SB   bool
}

func (v QMVVariant) String() string {
	s := fmt.Sprintf("%v_r%d", v.Kind, v.R)
	if v.SB {
		s += "_sb"
	}
	return s
}

// QMVVariants are the variants compiled in qmv.cu.
var QMVVariants = []QMVVariant{
	{QF32, 4, false}, {QF32, 4, true}, {QF32, 2, true}, {QF32, 1, true},
	{QF16, 4, false}, {QF16, 4, true}, {QF16, 2, true},
	{QI8x1, 4, true},
	{QI8x2, 4, false}, {QI8x2, 4, true}, {QI8x2, 2, true}, {QI8x2, 1, true}, {QI8x2, 8, true},
	{QI8x3, 4, true}, {QI8x3, 2, true}, {QI8x3, 1, true}, {QI8x3, 2, false},
}

// DefaultQMV is the variant chosen from the H200 runs
// (docs/bench/cuda/README.md): x in three int8 parts keeps float32's error
// (relative 2.4e-7 on the lm_head, the float32 kernel's 2.3e-7) at 70-75% of
// the read bandwidth against the float32 kernels' 41-49%. FastQMV, x in two
// parts, gains 3-4 points more for an error of 5e-5 (1e-4 with outliers):
// inside the 1e-3 bound, kept behind a choice.
var (
	DefaultQMV = QMVVariant{QI8x3, 2, true}
	FastQMV    = QMVVariant{QI8x2, 2, true}
)

const qmvWarps = 8 // QMV_WARPS in qmv.cu

// LoadQMVModule loads the qmv kernels embedded in the binary.
func LoadQMVModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "qmv")
}

// QMV launches y = W·x for 4-bit matrices in groups of 64, one variant of
// qmv.cu.
type QMV struct {
	fn      *driver.Function
	group   *driver.Function // qmv_group_<kind>_r2, for the R=2 _sb variants; else nil
	variant QMVVariant
	occ     occupancy
	// groupOcc is the grouped kernel's occupancy
	groupOcc occupancy
	// groupNorm is qmv_group_norm_<kind>_r2 (with group), normOcc its
	// occupancy
	groupNorm *driver.Function
	normOcc   occupancy
}

// QMVNorm is the add-and-norm LaunchGroupNorm does first (an AddRMSNorm
// of one row before the mat-vecs): H += Delta (0: none), the row
// H/rms(H)·W staged as x and written to Out, Eps in the rms; Counter a
// u32 ticket (zero, and left so by every complete launch).
type QMVNorm struct {
	H, Delta, W, Out, Counter driver.Ptr
	Eps                       float32
}

// QMVGroupMax is QMV_GROUP of qmv.cu: the most matrices of one grouped
// launch.
const QMVGroupMax = 4

// QMVGroupTable is the QMVGroup of qmv.cu for ms (at most QMVGroupMax
// 4-bit matrices in groups of 64 with interleaved scales and biases, all
// as wide) and their outputs ys: the codes, the scale/bias words and the
// output of each, the first launch row of each and the end, the count
// (120 bytes, the layout of the struct: eight-byte pointers first),
// passed to the grouped kernels by value.
func QMVGroupTable(ms []*QMatrix, ys []driver.Ptr) ([]byte, error) {
	if len(ms) == 0 || len(ms) > QMVGroupMax || len(ys) != len(ms) {
		return nil, fmt.Errorf("cuda: a grouped mat-vec of %d matrices and %d outputs (1 to %d)", len(ms), len(ys), QMVGroupMax)
	}
	b := make([]byte, 120)
	put64 := func(at int, v uint64) { binary.LittleEndian.PutUint64(b[at:], v) }
	put32 := func(at int, v int32) { binary.LittleEndian.PutUint32(b[at:], uint32(v)) }
	start := 0
	for i, m := range ms {
		if err := check4bit(m); err != nil {
			return nil, err
		}
		if m.ScaleBias == 0 || m.Cols != ms[0].Cols {
			return nil, fmt.Errorf("cuda: grouped mat-vec: matrix %d (%dx%d) has no interleaved scales and biases or is not %d wide", i, m.Rows, m.Cols, ms[0].Cols)
		}
		put64(8*i, uint64(m.Words))
		put64(32+8*i, uint64(m.ScaleBias))
		put64(64+8*i, uint64(ys[i]))
		put32(96+4*i, int32(start))
		start += m.Rows
	}
	put32(96+4*len(ms), int32(start))
	put32(116, int32(len(ms)))
	return b, nil
}

// Grouped says whether LaunchGroup is there (the R=2 _sb variants).
func (k *QMV) Grouped() bool { return k.group != nil }

// GroupedNorm says whether LaunchGroupNorm is there.
func (k *QMV) GroupedNorm() bool { return k.groupNorm != nil }

// LaunchGroupNorm is LaunchGroup with the add-and-norm of n first, in the
// same kernel: x is n's normed row (bit for bit add_rmsnorm's), written to
// n.Out with the sum to n.H by the block that finishes last.
func (k *QMV) LaunchGroupNorm(s *driver.Stream, table []byte, n QMVNorm, rows, cols int) error {
	if k.groupNorm == nil {
		return fmt.Errorf("cuda: mat-vec %v has no grouped form with a norm", k.variant)
	}
	if n.H%16 != 0 {
		return fmt.Errorf("cuda: the row at %#x is not 16-byte aligned", uint64(n.H))
	}
	if rows == 0 {
		return nil
	}
	grid, team, shared, err := k.groupShape(&k.normOcc, rows, cols, 4*cols) // and h + delta (QNormIn's keep)
	if err != nil {
		return err
	}
	var a driver.Args
	a.Struct(table).Ptr(n.H).Ptr(n.Delta).Ptr(n.W).F32(n.Eps).Ptr(n.Out).Ptr(n.Counter).I32(int32(cols)).I32(int32(team))
	return s.Launch(k.groupNorm, driver.D1(grid), driver.D1(qmvWarps*32), shared, &a)
}

// LaunchGroup queues the mat-vecs of the QMVGroupTable table, rows in
// all, each cols wide, against x (float32, 16-byte aligned), in one
// launch.
func (k *QMV) LaunchGroup(s *driver.Stream, table []byte, x driver.Ptr, rows, cols int) error {
	if k.group == nil {
		return fmt.Errorf("cuda: mat-vec %v has no grouped form", k.variant)
	}
	if x%16 != 0 {
		return fmt.Errorf("cuda: mat-vec input at %#x is not 16-byte aligned", uint64(x))
	}
	if rows == 0 {
		return nil
	}
	grid, team, shared, err := k.groupShape(&k.groupOcc, rows, cols, 0)
	if err != nil {
		return err
	}
	var a driver.Args
	a.Struct(table).Ptr(x).I32(int32(cols)).I32(int32(team))
	return s.Launch(k.group, driver.D1(grid), driver.D1(qmvWarps*32), shared, &a)
}

// groupShape is a grouped launch's grid, team and shared memory for rows
// rows of cols columns, on the kernel of occupancy occ, with extra bytes
// of shared memory past the staging.
func (k *QMV) groupShape(occ *occupancy, rows, cols, extra int) (grid, team, shared int, err error) {
	groups := cols / 64
	team = teamFor(groups)
	shared = k.variant.Kind.stageBytes(groups) + extra
	perSM, err := occ.blocksPerSM(qmvWarps*32, shared, fmt.Sprintf("a grouped mat-vec with %d columns", cols))
	if err != nil {
		return 0, 0, 0, err
	}
	rowsPerBlock := qmvWarps * (32 / team) * k.variant.R
	return min((rows+rowsPerBlock-1)/rowsPerBlock, k.occ.sms*perSM), team, shared, nil
}

// NewQMV finds variant v in mod.
func NewQMV(c *driver.Context, mod *driver.Module, v QMVVariant) (*QMV, error) {
	fn, err := mod.Function("qmv_" + v.String())
	if err != nil {
		return nil, err
	}
	k := &QMV{fn: fn, variant: v, occ: newOccupancy(c, fn)}
	if v.R == 2 && v.SB {
		if g, err := mod.Function("qmv_group_" + v.Kind.String() + "_r2"); err == nil {
			k.group, k.groupOcc = g, newOccupancy(c, g)
		}
		if g, err := mod.Function("qmv_group_norm_" + v.Kind.String() + "_r2"); err == nil && k.group != nil {
			k.groupNorm, k.normOcc = g, newOccupancy(c, g)
		}
	}
	return k, nil
}

// Function is the kernel, for its resource report.
func (k *QMV) Function() *driver.Function { return k.fn }

// Launch queues y[0:m.Rows] = W·x[0:m.Cols] on s. x and y are float32.
func (k *QMV) Launch(s *driver.Stream, m *QMatrix, x, y driver.Ptr) error {
	if err := check4bit(m); err != nil {
		return err
	}
	if k.variant.SB && m.ScaleBias == 0 {
		return fmt.Errorf("cuda: mat-vec %v reads the interleaved scales and biases, which were not uploaded", k.variant)
	}
	if x%16 != 0 {
		return fmt.Errorf("cuda: mat-vec input at %#x is not 16-byte aligned", uint64(x))
	}
	if m.Rows == 0 {
		return nil
	}
	groups := m.Cols / 64
	team := teamFor(groups)
	shared := k.variant.Kind.stageBytes(groups)
	perSM, err := k.occ.blocksPerSM(qmvWarps*32, shared, fmt.Sprintf("a mat-vec with %d columns", m.Cols))
	if err != nil {
		return err
	}
	rowsPerBlock := qmvWarps * (32 / team) * k.variant.R
	grid := min((m.Rows+rowsPerBlock-1)/rowsPerBlock, k.occ.sms*perSM)
	scales, biases := m.Scales, m.Biases
	if k.variant.SB {
		scales, biases = m.ScaleBias, 0
	}
	var a driver.Args
	a.Ptr(m.Words).Ptr(scales).Ptr(biases).Ptr(x).Ptr(y).I32(int32(m.Rows)).I32(int32(m.Cols)).I32(int32(team))
	return s.Launch(k.fn, driver.D1(grid), driver.D1(qmvWarps*32), shared, &a)
}

func check4bit(m *QMatrix) error {
	if m.Bits != 4 || m.GroupSize != 64 {
		return fmt.Errorf("cuda: mat-vec of %d-bit weights in groups of %d is not built (4-bit in groups of 64 only)", m.Bits, m.GroupSize)
	}
	return nil
}

// occupancy caches a kernel's resident blocks per multiprocessor by
// dynamic shared memory size, raising the kernel's shared-memory limit
// where a size needs it.
type occupancy struct {
	fn          *driver.Function
	sms         int
	sharedOptIn int
	perSM       map[int]int
	// limit is the largest shared size the kernel's limit was raised to:
	// never lowered, so that a size asked for before stays launchable.
	limit int
}

func newOccupancy(c *driver.Context, fn *driver.Function) occupancy {
	d := c.Device()
	return occupancy{fn: fn, sms: d.SMs, sharedOptIn: d.SharedOptIn, perSM: map[int]int{}}
}

func (o *occupancy) blocksPerSM(threads, shared int, what string) (int, error) {
	if shared > o.sharedOptIn {
		return 0, fmt.Errorf("cuda: %s needs %d bytes of shared memory; the GPU allows %d", what, shared, o.sharedOptIn)
	}
	if n, ok := o.perSM[shared]; ok {
		return n, nil
	}
	if shared > 48<<10 && shared > o.limit {
		if err := o.fn.SetMaxDynamicShared(shared); err != nil {
			return 0, err
		}
		o.limit = shared
	}
	n, err := o.fn.BlocksPerSM(threads, shared)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("cuda: %s does not fit on a multiprocessor with %d bytes of shared memory", o.fn.Name, shared)
	}
	o.perSM[shared] = n
	return n, nil
}
