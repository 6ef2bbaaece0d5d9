package cuda

import (
	"fmt"

	"petal/engine/cuda/driver"
)

// attn_out_split.cu's combine of a decoded token's split attention and the
// layer's output projection in one launch (attnsplit=on): each block merges
// 32 dims of a query head (attn_combine's bits) and multiplies them by
// those columns of o_proj, the blocks' parts summed as 64-bit fixed point
// (splitk.h), where attn_combine and the mat-vec take two launches.

const (
	attnSplitThreads = 256                         // AS_THREADS
	attnSplitBlocks  = AttnHeadDim / splitKColumns // AS_BLOCKS: blocks a query head
)

// LoadAttnSplitModule loads attn_out_split.cu's kernel (attnsplit=on).
func LoadAttnSplitModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "attn_out_split")
}

// AttnSplit launches attn_out_split.cu's attn_combine_split.
type AttnSplit struct {
	fn  *driver.Function
	occ occupancy
}

// NewAttnSplit finds the kernel in mod (LoadAttnSplitModule).
func NewAttnSplit(c *driver.Context, mod *driver.Module) (*AttnSplit, error) {
	fn, err := mod.Function("attn_combine_split")
	if err != nil {
		return nil, err
	}
	return &AttnSplit{fn: fn, occ: newOccupancy(c, fn)}, nil
}

// fits says why the kernel does not take the projection (nil where it
// does).
func (k *AttnSplit) fits(m *QMatrix, qheads int) error {
	if err := check4bit(m); err != nil {
		return fmt.Errorf("cuda: attnsplit=on: the output projection: %w", err)
	}
	if m.ScaleBias == 0 || m.Cols != qheads*AttnHeadDim {
		return fmt.Errorf("cuda: attnsplit=on: the output projection is %dx%d (interleaved scales and biases: %v), want %d columns with them",
			m.Rows, m.Cols, m.ScaleBias != 0, qheads*AttnHeadDim)
	}
	return nil
}

// Launch queues the combine of att's split attention (queued before it,
// Attn.LaunchSplit) and the projection o on s: b.Out as attn_combine
// writes it, y = o·b.Out to float32's rounding of the mat-vec's, the sums
// spread over copies copies. sums is SplitKSumBytes(o.Rows, copies) bytes,
// zero when allocated and left so by every complete launch.
func (k *AttnSplit) Launch(s *driver.Stream, att *Attn, sh AttnShape, b AttnBuffers, o *QMatrix, y, sums driver.Ptr, copies int) error {
	if err := sh.check(); err != nil {
		return err
	}
	if err := k.fits(o, sh.QHeads); err != nil {
		return err
	}
	if sums%16 != 0 {
		return fmt.Errorf("cuda: attnsplit=on: the sums (%#x) must be 16-byte aligned", uint64(sums))
	}
	if copies < 1 || copies > maxSplitCopies {
		return fmt.Errorf("cuda: attnsplit=on: %d copies of the sums, want 1 to %d", copies, maxSplitCopies)
	}
	shared := splitKShared(o.Rows)
	if _, err := k.occ.blocksPerSM(attnSplitThreads, shared, fmt.Sprintf("attention's combine with an output projection of %d rows", o.Rows)); err != nil {
		return err
	}
	var a driver.Args
	a.Ptr(b.PartO).Ptr(b.PartML).Ptr(b.QG).Ptr(b.Pos).Ptr(b.Out).I32(int32(att.MaxSplits)).I32(int32(att.MinChunk))
	a.Ptr(o.Words).Ptr(o.ScaleBias).Ptr(y).Ptr(sums).Ptr(sums.Add(SplitKTicket(o.Rows, copies))).I32(int32(o.Rows)).I32(int32(o.Cols)).I32(int32(copies))
	return s.Launch(k.fn, driver.D1(sh.QHeads*attnSplitBlocks), driver.D1(attnSplitThreads), shared, &a)
}

// attnSplitKernel names the combine with the split output projection.
const attnSplitKernel = "attn_combine_split"

// attnSplitStep lowers ops[i:i+2] under attnsplit=on, when they are a
// decoded token's Attention the split kernels take (decodeAttention) and
// the QLinear of one row that reads its output (the output projection):
// the split attention, then attn_combine_split. The kernels write all both
// ops write. A projection the kernel does not take is an error that names
// the option.
func (b *Backend) attnSplitStep(p *program, i int) ([]step, bool, error) {
	if !b.o.AttnSplit || b.attnSplit == nil {
		return nil, false, nil
	}
	a, ok, err := b.attnProjection(p, i)
	if !ok || err != nil {
		return nil, false, err
	}
	if err := b.attnSplit.fits(a.w, a.sh.QHeads); err != nil {
		return nil, false, err
	}
	copies := b.o.splitCopies()
	sums, err := b.grow(&b.attnSums, SplitKSumBytes(a.w.Rows, copies), "the split projection's sums")
	if err != nil {
		return nil, false, err
	}
	return []step{
		a.split(b, p),
		{kernels: 1, name: attnSplitKernel, launch: func(s *driver.Stream) error {
			return b.attnSplit.Launch(s, b.attn, a.sh, a.at(p), a.w, a.oy, sums, copies)
		}},
	}, true, nil
}
