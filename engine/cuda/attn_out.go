package cuda

import (
	"encoding/binary"
	"fmt"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// attn_out.cu's combine of a decoded token's split attention and the
// layer's output projection in one launch (attnout=on): a thread-block
// cluster a query head merges its head's chunks (attn_combine's bits) and
// computes the head's partial products of o_proj (outproj.h), where
// attn_combine and the mat-vec take two launches.

const (
	attnOutWarps = 16 // AO_WARPS
	// attnOutArgsSize is sizeof(AttnOutArgs) in attn_out.cu: five
	// pointers, an OutProj, two ints.
	attnOutArgsSize = 5*8 + outProjSize + 2*4
)

// LoadAttnOutModule loads attn_out.cu's kernels (attnout=on).
func LoadAttnOutModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "attn_out")
}

// AttnOut launches attn_out.cu's kernels, one a kind of the projection's
// arithmetic (qmv=exact's and qmv=fast's).
type AttnOut struct {
	fns map[QKind]*driver.Function
	occ map[QKind]*occupancy
}

// NewAttnOut finds the kernels in mod (LoadAttnOutModule).
func NewAttnOut(c *driver.Context, mod *driver.Module) (*AttnOut, error) {
	k := &AttnOut{fns: map[QKind]*driver.Function{}, occ: map[QKind]*occupancy{}}
	for _, kind := range []QKind{QI8x3, QI8x2} {
		fn, err := mod.Function("attn_combine_out_" + kind.String())
		if err != nil {
			return nil, err
		}
		occ := newOccupancy(c, fn)
		k.fns[kind], k.occ[kind] = fn, &occ
	}
	return k, nil
}

// AttnOutBuffers are the launch's operands: the split attention's
// partials and the combine's (AttnBuffers' PartO, PartML, QG, Pos, Out),
// and the projection (4-bit, interleaved scales and biases, query
// heads·256 columns, rows a multiple of gdnLayerCluster), its output OY,
// the partials OPart (query heads·rows floats) and OCounters
// (gdnLayerCluster u32, zero, left so by every complete launch).
type AttnOutBuffers struct {
	Attn                 AttnBuffers
	OutProj              *QMatrix
	OY, OPart, OCounters driver.Ptr
}

// fits says why the kernel does not take the projection (nil where it
// does).
func (k *AttnOut) fits(kind QKind, m *QMatrix, qheads int) error {
	if _, ok := k.fns[kind]; !ok {
		return fmt.Errorf("cuda: attnout=on is not built for %s mat-vecs (qmv=exact's and qmv=fast's kinds)", kind)
	}
	if err := check4bit(m); err != nil {
		return fmt.Errorf("cuda: attnout=on: the output projection: %w", err)
	}
	if m.ScaleBias == 0 || m.Cols != qheads*AttnHeadDim || m.Rows%gdnLayerCluster != 0 {
		return fmt.Errorf("cuda: attnout=on: the output projection is %dx%d (interleaved scales and biases: %v), want %d columns, rows a multiple of %d, with them",
			m.Rows, m.Cols, m.ScaleBias != 0, qheads*AttnHeadDim, gdnLayerCluster)
	}
	return nil
}

// attnOutArgs packs AttnOutArgs (attn_out.cu).
func attnOutArgs(b AttnOutBuffers, maxSplits, minChunk int) []byte {
	le := binary.LittleEndian
	buf := make([]byte, 0, attnOutArgsSize)
	for _, p := range []driver.Ptr{b.Attn.PartO, b.Attn.PartML, b.Attn.QG, b.Attn.Pos, b.Attn.Out} {
		buf = le.AppendUint64(buf, uint64(p))
	}
	buf = outProjArgs(buf, b.OutProj, b.OY, b.OPart, b.OCounters)
	buf = le.AppendUint32(buf, uint32(int32(maxSplits)))
	return le.AppendUint32(buf, uint32(int32(minChunk)))
}

// Launch queues the combine of att's split attention (queued before it,
// LaunchSplit) and the projection, x's arithmetic of kind, on s.
func (k *AttnOut) Launch(s *driver.Stream, kind QKind, att *Attn, sh AttnShape, b AttnOutBuffers) error {
	if err := sh.check(); err != nil {
		return err
	}
	if err := k.fits(kind, b.OutProj, sh.QHeads); err != nil {
		return err
	}
	shared := kind.stageBytes(AttnHeadDim / 64)
	if _, err := k.occ[kind].blocksPerSM(attnOutWarps*32, shared, "attention's combine with the output projection"); err != nil {
		return err
	}
	var a driver.Args
	a.Struct(attnOutArgs(b, att.MaxSplits, att.MinChunk))
	return s.LaunchCluster(k.fns[kind], driver.D1(sh.QHeads*gdnLayerCluster), driver.D1(attnOutWarps*32), driver.D1(gdnLayerCluster), shared, &a)
}

// attnOutKernel names the combine with the output projection.
const attnOutKernel = "attn_combine_out"

// attnOutStep lowers ops[i:i+2] under attnout=on, when they are a decoded
// token's Attention the split kernels take (decodeAttention) and the
// QLinear of one row that reads its output (the output projection): the
// split attention, then attn_combine_out. The kernels write all both ops
// write. A projection the kernel does not take is an error that names the
// option.
func (b *Backend) attnOutStep(p *program, i int) ([]step, bool, error) {
	if !b.o.AttnOut {
		return nil, false, nil
	}
	a, ok, err := b.attnProjection(p, i)
	if !ok || err != nil {
		return nil, false, err
	}
	kind := b.qmv.variant.Kind
	if err := b.attnOut.fits(kind, a.w, a.sh.QHeads); err != nil {
		return nil, false, err
	}
	// the projection's partials past the attention's: a cluster writes
	// them while others may still read those
	partOff := p.reserve(&a.off, 4*int64(a.sh.QHeads*a.w.Rows))
	counters, err := b.grow(&b.tickets, 4*int64(gdnLayerCluster), "attention projection tickets")
	if err != nil {
		return nil, false, err
	}
	return []step{
		a.split(b, p),
		{kernels: 1, name: attnOutKernel, launch: func(s *driver.Stream) error {
			return b.attnOut.Launch(s, kind, b.attn, a.sh, AttnOutBuffers{Attn: a.at(p), OutProj: a.w, OY: a.oy,
				OPart: p.scratch.Add(partOff), OCounters: counters})
		}},
	}, true, nil
}

// attnProj is a decoded token's Attention and the QLinear of one row that
// reads its output (the output projection), as the forms that take both
// in their launches (attnout=on, attnsplit=on) see them: the split
// attention's lowering (decodeAttn), the projection w and its output oy,
// and off, the program's scratch offset past the attention's.
type attnProj struct {
	decodeAttn
	w   *QMatrix
	oy  driver.Ptr
	off int64
}

// split is the split attention's launch.
func (a attnProj) split(b *Backend, p *program) step {
	return step{kernels: 1, name: "attn_split", launch: func(s *driver.Stream) error { return b.attn.LaunchSplit(s, a.sh, a.at(p)) }}
}

// attnProjection finds ops[i:i+2] as attnProj, when they are a decoded
// token's Attention the split kernels take (decodeAttention) and the
// QLinear of one row that reads its output; not ok otherwise (their own
// lowerings say what is wrong).
func (b *Backend) attnProjection(p *program, i int) (attnProj, bool, error) {
	if i+1 >= len(p.ops) {
		return attnProj{}, false, nil
	}
	o, ok1 := p.ops[i].(*backend.Attention)
	l, ok2 := p.ops[i+1].(*backend.QLinear)
	if !ok1 || !ok2 || o.Rows != 1 || l.Rows != 1 || l.X != o.Out {
		return attnProj{}, false, nil
	}
	c := &checks{b: b}
	QH, KVH, D := o.QHeads, o.KVHeads, o.HeadDim
	c.require(o.KCache.Type == o.VCache.Type, "K and V caches of element types %s and %s", o.KCache.Type, o.VCache.Type)
	bufs := AttnBuffers{Q: c.buf("q", o.Q, backend.F32, QH*D), QG: c.buf("qg", o.QG, backend.F32, QH*2*D),
		KCache: c.kv("the K cache", o.KCache, 0), VCache: c.kv("the V cache", o.VCache, o.KCache.Len),
		Out: c.buf("the output", o.Out, backend.F32, QH*D), Pos: c.buf("the position", o.Pos, backend.I32, 1)}
	w := c.mat("the output projection", l.W)
	if c.err != nil || w == nil {
		return attnProj{}, false, nil
	}
	oy := c.buf("the output projection's output", l.Y, backend.F32, w.q.Rows)
	if c.err != nil {
		return attnProj{}, false, nil
	}
	shadow, err := b.cacheShadow(o.KCache, o.VCache, bufs.KCache, bufs.VCache, o.KCache.Len/max(KVH*D, 1), KVH*D)
	if err != nil {
		return attnProj{}, false, err
	}
	var off int64
	d, ok := b.decodeAttention(p, &off, o, bufs, shadow)
	if !ok {
		return attnProj{}, false, nil
	}
	return attnProj{decodeAttn: d, w: w.q, oy: oy, off: off}, true, nil
}
