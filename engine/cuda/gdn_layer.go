package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"petal/engine/cuda/driver"
)

// gdn_layer.cu's one launch for the start of a Gated DeltaNet layer of one
// token (gdnlayer=cluster): the input add-and-norm, the four input
// projections and the step after them, where qmv_group_norm and gdn_step
// take two. Each thread-block cluster of gdnLayerCluster blocks computes
// one key head's projection rows into its blocks' shared memory and runs
// that key head's step from there. The out forms (gdnlayer=out) go on to
// the output projection, its partial products over each cluster's columns
// summed by a ticket an eighth of its rows.

const (
	gdnLayerCluster = 8  // GL_BLOCKS: a key head's blocks
	gdnLayerWarps   = 16 // GL_WARPS
	// gdnLayerRatio is the value heads a key head of the built entries
	// (gdn_layer_<kind>_v2): every model of the family has two.
	gdnLayerRatio = 2
	// gdnLayerArgsSize is sizeof(GDNLayerArgs) in gdn_layer.cu: 24 pointers
	// (w, sb and y of four matrices, 12 more), an OutProj (outproj.h: five
	// pointers, two ints), two floats, four ints.
	gdnLayerArgsSize = 24*8 + outProjSize + 2*4 + 4*4
	// outProjSize is sizeof(OutProj) in outproj.h.
	outProjSize = 5*8 + 2*4
)

// LoadGDNLayerModule loads gdn_layer.cu's kernels (gdnlayer=cluster).
func LoadGDNLayerModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "gdn_layer")
}

// LoadGDNLayerNBModule loads gdn_layer_nb.cu's kernels, in clusters of 6
// or 7 blocks (gdnlayer=cluster6|cluster7).
func LoadGDNLayerNBModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "gdn_layer_nb")
}

// GDNLayerNBBlocks are the cluster sizes of gdn_layer_nb.cu's forms.
var GDNLayerNBBlocks = []int{6, 7}

// GDNLayer launches gdn_layer.cu's kernels, one a kind of x's arithmetic
// (qmv=exact's and qmv=fast's) and form (with the output projection or
// without).
type GDNLayer struct {
	fns map[gdnLayerForm]*driver.Function
	occ map[gdnLayerForm]*occupancy
	// Blocks is a key head's cluster: gdnLayerCluster (8), or 6 or 7 with
	// gdn_layer_nb.cu's forms added (AddNBForms).
	Blocks int
}

type gdnLayerForm struct {
	kind   QKind
	out    bool
	blocks int
}

// NewGDNLayer finds the kernels in mod (LoadGDNLayerModule).
func NewGDNLayer(c *driver.Context, mod *driver.Module) (*GDNLayer, error) {
	k := &GDNLayer{fns: map[gdnLayerForm]*driver.Function{}, occ: map[gdnLayerForm]*occupancy{}, Blocks: gdnLayerCluster}
	for _, kind := range []QKind{QI8x3, QI8x2} {
		for _, out := range []bool{false, true} {
			name := fmt.Sprintf("gdn_layer_%s_v%d", kind, gdnLayerRatio)
			if out {
				name = fmt.Sprintf("gdn_layer_out_%s_v%d", kind, gdnLayerRatio)
			}
			if err := k.add(c, mod, name, gdnLayerForm{kind, out, gdnLayerCluster}); err != nil {
				return nil, err
			}
		}
	}
	return k, nil
}

// AddNBForms finds gdn_layer_nb.cu's kernels in mod (LoadGDNLayerNBModule).
func (k *GDNLayer) AddNBForms(c *driver.Context, mod *driver.Module) error {
	for _, kind := range []QKind{QI8x3, QI8x2} {
		for _, nb := range GDNLayerNBBlocks {
			if err := k.add(c, mod, fmt.Sprintf("gdn_layer_c%d_%s_v%d", nb, kind, gdnLayerRatio), gdnLayerForm{kind, false, nb}); err != nil {
				return err
			}
			if err := k.add(c, mod, fmt.Sprintf("gdn_layer_out_c%d_%s_v%d", nb, kind, gdnLayerRatio), gdnLayerForm{kind, true, nb}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *GDNLayer) add(c *driver.Context, mod *driver.Module, name string, f gdnLayerForm) error {
	fn, err := mod.Function(name)
	if err != nil {
		return err
	}
	occ := newOccupancy(c, fn)
	k.fns[f], k.occ[f] = fn, &occ
	return nil
}

// GDNLayerBuffers are a layer's operands: the projections Proj (qkv, z, b,
// a: 4-bit, interleaved scales and biases, hidden columns) and their
// outputs Y; the input norm (Norm: H += Delta, the normed row to Out, a
// ticket Counter); the step's (GDNBuffers' ConvW, ConvState, ALog, DtBias,
// NormW, State and Out; its QKV, Z, B, A and Counters unused: the
// projections never leave the cluster on their way to the step) and the
// gated norm's GEps.
//
// The out forms take OutProj too (4-bit, interleaved scales and biases,
// value heads·128 columns, rows a multiple of gdnLayerCluster), its output
// OY, OPart for the partials (key heads·OutProj.Rows floats) and
// OCounters (gdnLayerCluster u32, zero, left so by every complete launch).
type GDNLayerBuffers struct {
	Proj [4]*QMatrix
	Y    [4]driver.Ptr
	Norm QMVNorm
	Step GDNBuffers
	GEps float32

	OutProj              *QMatrix
	OY, OPart, OCounters driver.Ptr
}

// gdnLayerShared is gdn_layer's dynamic shared memory for kind at cols
// columns: the staging, h + delta, the cluster's q, k, v and z rows, and the
// block's state rows, conv weights and conv state, each from a 16-byte
// boundary.
func gdnLayerShared(kind QKind, cols int) int {
	const D, R = GDNHeadDim, gdnLayerWarps * gdnLayerRatio
	up := func(n int) int { return (n + 15) &^ 15 }
	rows, ch := 2*D+2*gdnLayerRatio*D, 2*D+R  // the rows the cluster shares: q, k, v, z
	stage := max(cols/64, gdnLayerRatio*D/64) // x's groups, or the out forms' if more
	return up(kind.stageBytes(stage)) + up(4*cols) + up(4*rows) + 4*R*D + 16*ch + 4*3*ch
}

// gdnLayerNBShared is gdn_layer_nb's dynamic shared memory for kind at
// cols columns in clusters of nb blocks: the staging, h + delta, the
// cluster's q, k, v and z rows, the state rows of the block's warps (at
// most maxRows a warp), and the q and k channels' conv weights and state.
func gdnLayerNBShared(kind QKind, cols, nb int) int {
	const D = GDNHeadDim
	up := func(n int) int { return (n + 15) &^ 15 }
	warps := nb * gdnLayerWarps
	maxRows := (gdnLayerRatio*D + warps - 1) / warps
	stage := max(cols/64, gdnLayerRatio*D/64) // x's groups, or the out forms' if more
	return up(kind.stageBytes(stage)) + up(4*cols) + up(4*(2*D+2*gdnLayerRatio*D)) + 4*gdnLayerWarps*maxRows*D + 16*2*D + 4*3*2*D
}

// shared is the form's dynamic shared memory at cols columns.
func (f gdnLayerForm) shared(cols int) int {
	if f.blocks != gdnLayerCluster {
		return gdnLayerNBShared(f.kind, cols, f.blocks)
	}
	return gdnLayerShared(f.kind, cols)
}

// fits says why the kernels do not take a layer (nil where they do).
func (k *GDNLayer) fits(kind QKind, b GDNLayerBuffers, hk, hv int) error {
	if _, ok := k.fns[gdnLayerForm{kind, false, k.Blocks}]; !ok {
		return fmt.Errorf("cuda: gdnlayer=cluster is not built for %s mat-vecs (qmv=exact's and qmv=fast's kinds) in clusters of %d blocks", kind, k.Blocks)
	}
	if m := b.OutProj; m != nil {
		if err := check4bit(m); err != nil {
			return fmt.Errorf("cuda: gdnlayer=out: the output projection: %w", err)
		}
		if m.ScaleBias == 0 || m.Cols != hv*GDNHeadDim || m.Rows%gdnLayerCluster != 0 {
			return fmt.Errorf("cuda: gdnlayer=out: the output projection is %dx%d (interleaved scales and biases: %v), want %d columns, rows a multiple of %d, with them",
				m.Rows, m.Cols, m.ScaleBias != 0, hv*GDNHeadDim, gdnLayerCluster)
		}
	}
	if hk < 1 || hv != gdnLayerRatio*hk {
		return fmt.Errorf("cuda: gdnlayer=cluster takes %d value heads a key head, not %d key and %d value heads", gdnLayerRatio, hk, hv)
	}
	cols := b.Proj[0].Cols
	rows := []int{(2*hk + hv) * GDNHeadDim, hv * GDNHeadDim, hv, hv}
	for i, m := range b.Proj {
		if err := check4bit(m); err != nil {
			return fmt.Errorf("cuda: gdnlayer=cluster: projection %d: %w", i, err)
		}
		if m.ScaleBias == 0 || m.Cols != cols || m.Rows != rows[i] {
			return fmt.Errorf("cuda: gdnlayer=cluster: projection %d is %dx%d (interleaved scales and biases: %v), want %dx%d with them",
				i, m.Rows, m.Cols, m.ScaleBias != 0, rows[i], cols)
		}
	}
	if cols%64 != 0 {
		return fmt.Errorf("cuda: gdnlayer=cluster: a hidden size of %d (want a multiple of 64)", cols)
	}
	for _, p := range []struct {
		name string
		p    driver.Ptr
	}{{"h", b.Norm.H}, {"the conv weights", b.Step.ConvW}, {"the conv state", b.Step.ConvState}, {"the state", b.Step.State}} {
		if p.p%16 != 0 {
			return fmt.Errorf("cuda: gdnlayer=cluster: %s at %#x are not 16-byte aligned", p.name, uint64(p.p))
		}
	}
	return nil
}

// gdnLayerArgs packs GDNLayerArgs (gdn_layer.cu) for b.
func gdnLayerArgs(b GDNLayerBuffers, hk, hv int, eps float32) []byte {
	le := binary.LittleEndian
	buf := make([]byte, 0, gdnLayerArgsSize)
	ptr := func(p driver.Ptr) { buf = le.AppendUint64(buf, uint64(p)) }
	for _, m := range b.Proj {
		ptr(m.Words)
	}
	for _, m := range b.Proj {
		ptr(m.ScaleBias)
	}
	for _, y := range b.Y {
		ptr(y)
	}
	n, s := b.Norm, b.Step
	for _, p := range []driver.Ptr{n.H, n.Delta, n.W, n.Out, n.Counter, s.ConvW, s.ConvState, s.ALog, s.DtBias, s.NormW, s.State, s.Out} {
		ptr(p)
	}
	buf = outProjArgs(buf, b.OutProj, b.OY, b.OPart, b.OCounters)
	buf = le.AppendUint32(buf, math.Float32bits(n.Eps))
	buf = le.AppendUint32(buf, math.Float32bits(eps))
	cols := b.Proj[0].Cols
	for _, v := range []int{hk, hv, cols, teamFor(cols / 64)} {
		buf = le.AppendUint32(buf, uint32(int32(v)))
	}
	return buf
}

// outProjArgs appends outproj.h's OutProj for m (none where nil: zeros),
// its output y, partials part and counters to buf.
func outProjArgs(buf []byte, m *QMatrix, y, part, counters driver.Ptr) []byte {
	le := binary.LittleEndian
	var w, sb driver.Ptr
	rows, cols := 0, 0
	if m != nil {
		w, sb, rows, cols = m.Words, m.ScaleBias, m.Rows, m.Cols
	}
	for _, p := range []driver.Ptr{w, sb, y, part, counters} {
		buf = le.AppendUint64(buf, uint64(p))
	}
	buf = le.AppendUint32(buf, uint32(int32(rows)))
	return le.AppendUint32(buf, uint32(int32(cols)))
}

// residentClusters is how many of the kernel's clusters (of kind, at cols
// columns) the GPU holds at once: a layer of more key heads runs its
// clusters in waves.
func (k *GDNLayer) residentClusters(kind QKind, cols int) (int, error) {
	f := gdnLayerForm{kind, false, k.Blocks}
	shared := f.shared(cols)
	if _, err := k.occ[f].blocksPerSM(gdnLayerWarps*32, shared, fmt.Sprintf("the Gated DeltaNet layer kernel at hidden size %d", cols)); err != nil {
		return 0, err // raises the kernel's shared-memory limit first
	}
	return k.fns[f].MaxActiveClusters(gdnLayerWarps*32, f.blocks, shared)
}

// Launch queues the layer's norm, projections and step of one token with
// hk key and hv value heads on s, x's arithmetic of kind (and its output
// projection where b.OutProj is set: the out forms).
func (k *GDNLayer) Launch(s *driver.Stream, kind QKind, b GDNLayerBuffers, hk, hv int) error {
	if err := k.fits(kind, b, hk, hv); err != nil {
		return err
	}
	f := gdnLayerForm{kind, b.OutProj != nil, k.Blocks}
	cols := b.Proj[0].Cols
	shared := f.shared(cols)
	if _, err := k.occ[f].blocksPerSM(gdnLayerWarps*32, shared, fmt.Sprintf("the Gated DeltaNet layer kernel at hidden size %d", cols)); err != nil {
		return err
	}
	var a driver.Args
	a.Struct(gdnLayerArgs(b, hk, hv, b.GEps))
	return s.LaunchCluster(k.fns[f], driver.D1(hk*f.blocks), driver.D1(gdnLayerWarps*32), driver.D1(f.blocks), shared, &a)
}
