package cuda

import (
	"encoding/binary"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// L2Region is device memory a kernel asks L2 for on behalf of a later one
// (kernels/device.h's L2Ahead): that kernel's weights, which do not depend
// on the kernels before it.
type L2Region struct {
	P     driver.Ptr
	Bytes int64
}

// l2AheadMax is L2_AHEAD of device.h: the most regions of one launch.
const l2AheadMax = 8

// l2AheadArg lays rs out as device.h's L2Ahead (pointers, byte counts, n,
// early), passed by value; early asks for them before the kernel's own
// work rather than after it.
func l2AheadArg(rs []L2Region, early bool) []byte {
	b := make([]byte, 8*l2AheadMax*2+8)
	for i, r := range rs[:min(len(rs), l2AheadMax)] {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(r.P))
		binary.LittleEndian.PutUint64(b[8*l2AheadMax+8*i:], uint64(r.Bytes))
	}
	binary.LittleEndian.PutUint32(b[16*l2AheadMax:], uint32(min(len(rs), l2AheadMax)))
	if early {
		binary.LittleEndian.PutUint32(b[16*l2AheadMax+4:], 1)
	}
	return b
}

// nextProjections are the weights of the first grouped projections of one
// row after op in p (the next layer's, for a decode step's MoE: the Gated
// DeltaNet's in_proj or attention's q, k and v): their codes and
// interleaved scales and biases, for Options.L2Next. None where there is
// no such op or its matrices are not 4-bit ones the mat-vec reads.
func (b *Backend) nextProjections(p *program, op backend.Op) []L2Region {
	at := -1
	for i, o := range p.ops {
		if o == op {
			at = i
			break
		}
	}
	if at < 0 {
		return nil
	}
	for _, o := range p.ops[at+1:] {
		g, ok := o.(*backend.QLinearGroup)
		if !ok || g.Rows != 1 {
			continue
		}
		ch := &checks{b: b}
		var rs []L2Region
		for _, m := range g.W {
			w := ch.mat("matrix", m)
			if w == nil || w.q.Bits != 4 || w.q.ScaleBias == 0 {
				return nil
			}
			rs = append(rs, L2Region{w.q.Words, int64(w.q.Rows) * int64(w.q.Cols) / 2},
				L2Region{w.q.ScaleBias, int64(w.q.Rows) * int64(w.q.Cols/w.q.GroupSize) * 4})
		}
		if len(rs) > l2AheadMax {
			return nil
		}
		return rs
	}
	return nil
}
