package cuda

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// convgemm=on (gemm_conv.cu): a prompt chunk's Gated DeltaNet conv made in
// the epilogue of the in_proj GEMM that writes its input, and conv_fix.
const (
	convGemmKernel = "gemm_group_conv_w256rp"
	convFixKernel  = "conv_fix"
	convGemmTile   = "w256rp" // the tile whose kernel gemm_conv.cu instantiates (GCONV_TILE rows)
	convTileRows   = 256
)

// DenseGroupConv is DenseGroup of tile t (convGemmTile) through fn,
// gemm_conv.cu's gemm_group_conv_w256rp: matrix ci's outputs through the
// causal conv of width 4 (taps convW [N][4]) into convOut [M][N], its
// output ys[ci] only the rows conv_fix reads.
func (g *GEMM) DenseGroupConv(s *driver.Stream, t GEMMTile, fn *driver.Function, ms []*QMatrix, ys []driver.Ptr, x driver.Ptr, M, ci int, convW, convOut driver.Ptr) error {
	if t.Name != convGemmTile || fn == nil {
		return fmt.Errorf("cuda: no conv GEMM of tile %q", t.Name)
	}
	if !aligned16(convW, convOut) || ci < 0 || ci >= len(ms) || ms[ci].Rows%4 != 0 {
		return fmt.Errorf("cuda: conv GEMM: buffers not 16-byte aligned, or matrix %d of %d not taking the conv", ci, len(ms))
	}
	return g.denseGroupFn(s, fn, t, ms, ys, ys, x, M, 1, func(a *driver.Args) { a.I32(int32(ci)).Ptr(convW).Ptr(convOut) })
}

// convGEMMSteps are the steps of ops[i+1:i+3], a prompt chunk's in_proj
// (a QLinearGroup after the norm at i, lowered to linears, its matrices ws
// writing ys from x's bf16 copy at xb in the scratch) and the ConvSiLU of
// its first output, under convgemm=on: the grouped GEMM with the conv in
// its epilogue (op 1), then conv_fix (op 2). False where the in_proj's
// lowering is not gemm_group_w256rp alone, the conv is not of width 4 over
// that whole output, or some other op reads the raw projection (the
// kernel leaves most of its rows unwritten) but as another layer's conv of
// the same shared buffer does (backend.ReadByOwnProducers).
func (b *Backend) convGEMMSteps(p *program, i int, ws []*matrix, ys []driver.Ptr, xb int64, rows int, linears []step) ([]step, bool) {
	if !b.o.ConvGEMM || b.fn[convGemmKernel] == nil || i+2 >= len(p.ops) || len(linears) != 1 || linears[0].name != "gemm_group_"+convGemmTile {
		return nil, false
	}
	g, ok1 := p.ops[i+1].(*backend.QLinearGroup)
	c, ok2 := p.ops[i+2].(*backend.ConvSiLU)
	if !ok1 || !ok2 || c.K != 4 || c.Rows != rows || len(ws) == 0 || c.Chans != ws[0].q.Rows || c.Chans%4 != 0 {
		return nil, false
	}
	C := c.Chans
	ch := &checks{b: b}
	x := ch.buf("x", c.X, backend.F32, rows*C)
	state := ch.buf("the state", c.State, backend.F32, 3*C)
	w := ch.buf("the weight", c.Weight, backend.F32, C*4)
	out := ch.buf("the output", c.Out, backend.F32, rows*C)
	if ch.err != nil || x != ys[0] || w%16 != 0 || out%16 != 0 || !g.Y.Covers(c.X) ||
		!backend.ReadByOwnProducers(p.ops, []backend.Buffer{c.X}, i+2) {
		return nil, false
	}
	qs := make([]*QMatrix, len(ws))
	total := 0
	for k, m := range ws {
		qs[k] = m.q
		total += m.q.Rows
	}
	tile := b.gemm.DenseTile(rows, total)
	if tile.Name != convGemmTile {
		return nil, false
	}
	fn := b.fn[convGemmKernel]
	gemm := step{kernels: 1, name: convGemmKernel, op: 1, launch: func(s *driver.Stream) error {
		return b.gemm.DenseGroupConv(s, tile, fn, qs, ys, p.scratch.Add(xb), rows, 0, w, out)
	}}
	fix := b.launch(convFixKernel, grid2(ceil(C, 256), ceil(rows, convTileRows)), driver.D1(256), 0, func(a *driver.Args) {
		a.Ptr(x).Ptr(state).Ptr(w).Ptr(out).I32(int32(rows)).I32(int32(C))
	})
	fix.op = 2
	return []step{gemm, fix}, true
}
