package cuda

import (
	"fmt"
	"slices"
	"strings"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// Prefill on the tensor cores (Options.TensorCores): ops of several rows
// whose matrices the 4-bit GEMMs of gemm.cu take run there, x rounded to
// bf16 once per op; the others keep the plain kernels of ops.cu.

// tcMatrix reports whether the dense tensor-core GEMM takes w: 4-bit in
// groups of 64 with the interleaved scales and biases, rows a multiple of
// 8 and columns of 64.
func tcMatrix(w *matrix) bool {
	q := w.q
	return q.Bits == 4 && q.GroupSize == 64 && q.ScaleBias != 0 && q.Rows%8 == 0 && q.Cols%64 == 0 && q.Words%16 == 0
}

// linears lowers ys[i][rows, R_i] = x[rows, C]·W_iᵀ for matrices of one
// width: through the dense tensor-core GEMM where it takes the matrix
// (one conversion of x to bf16 for all of them), else through linear.
func (b *Backend) linears(p *program, ws []*matrix, x driver.Ptr, ys []driver.Ptr, rows int) []step {
	return b.linearsFrom(p, ws, x, -1, 0, ys, rows)
}

// linearsFrom is linears where x's bf16 copy may already be in the op's
// scratch at xb (a norm wrote it: normLinearsSteps), the scratch's first
// off bytes taken; xb < 0: none yet.
func (b *Backend) linearsFrom(p *program, ws []*matrix, x driver.Ptr, xb, off int64, ys []driver.Ptr, rows int) []step {
	if rows == 0 {
		return nil
	}
	if g := b.qmvGroup(p, ws, x, ys, rows); g != nil {
		return g
	}
	tc := b.gemm != nil && rows > 1 && x%16 == 0
	if tc && len(ws) > 1 && b.o.GroupGEMM {
		if g := b.denseGroup(p, ws, x, xb, off, ys, rows); g != nil {
			return g
		}
	}
	var steps []step
	for i, w := range ws {
		y := ys[i]
		if !tc || w.q.Rows == 0 || !tcMatrix(w) || y%16 != 0 {
			steps = append(steps, b.linear(w, x, y, rows)...)
			continue
		}
		if xb < 0 {
			n := rows * w.q.Cols
			xb = p.reserve(&off, 2*int64(n))
			steps = append(steps, step{kernels: 1, name: "gemm_to_bf16", launch: func(s *driver.Stream) error {
				return b.gemm.ToBF16(s, x, p.scratch.Add(xb), n)
			}})
		}
		tile := b.gemm.DenseTile(rows, w.q.Rows)
		if st, ok := b.denseSplit(p, &off, tile, []*QMatrix{w.q}, []driver.Ptr{y}, xb, rows, "gemm_dense_"); ok {
			steps = append(steps, st)
			continue
		}
		steps = append(steps, step{kernels: 1, name: "gemm_dense_" + tile.Name, launch: func(s *driver.Stream) error {
			return b.gemm.Dense(s, tile, w.q, p.scratch.Add(xb), y, rows)
		}})
	}
	return steps
}

// denseGroup lowers the GEMMs of several matrices reading one x (a
// QLinearGroup of several rows) to one conversion of x and one grouped
// dense launch where the tensor-core GEMM takes them all, else returns nil:
// the Gated DeltaNet's b and a projections (32 rows each) and attention's
// k and v (512) ride in the launch of the large ones instead of taking a
// launch, and most of a wave, apiece.
func (b *Backend) denseGroup(p *program, ws []*matrix, x driver.Ptr, xb, off int64, ys []driver.Ptr, rows int) []step {
	if len(ws) > QMVGroupMax {
		return nil
	}
	qs := make([]*QMatrix, len(ws))
	total := 0
	for i, w := range ws {
		if w.q.Rows == 0 || !tcMatrix(w) || ys[i]%16 != 0 {
			return nil
		}
		qs[i] = w.q
		total += w.q.Rows
	}
	n := rows * qs[0].Cols
	var steps []step
	if xb < 0 {
		xb = p.reserve(&off, 2*int64(n))
		steps = []step{{kernels: 1, name: "gemm_to_bf16", launch: func(s *driver.Stream) error { return b.gemm.ToBF16(s, x, p.scratch.Add(xb), n) }}}
	}
	tile := b.gemm.DenseTile(rows, total)
	if st, ok := b.denseSplit(p, &off, tile, qs, ys, xb, rows, "gemm_group_"); ok {
		return append(steps, st)
	}
	return append(steps, step{kernels: 1, name: "gemm_group_" + tile.Name, launch: func(s *driver.Stream) error {
		return b.gemm.DenseGroup(s, tile, qs, ys, p.scratch.Add(xb), rows)
	}})
}

// denseSplit lowers the dense GEMMs of ms (one matrix, or a group under
// splitk=all) with their columns split (splitk=on) where the tile is the 16-row one and
// denseSplits finds more than one split, else returns false. xb is x's
// bf16 copy in the scratch, whose use so far is off.
func (b *Backend) denseSplit(p *program, off *int64, tile GEMMTile, ms []*QMatrix, ys []driver.Ptr, xb int64, rows int, kind string) (step, bool) {
	if !b.o.SplitK || tile.Name != "m16" || (len(ms) > 1 && !b.o.SplitKGroups) {
		return step{}, false
	}
	blocks, total := 0, 0
	for _, m := range ms {
		blocks += ceil(m.Rows, tile.BN)
		total += m.Rows
	}
	splits := denseSplits(blocks*ceil(rows, tile.BM), ms[0].Cols/64, b.ctx.Device().SMs)
	if splits < 2 {
		return step{}, false
	}
	parts := p.reserve(off, 4*int64(splits*rows*total))
	return step{kernels: 2, name: kind + tile.Name + "_split", launch: func(s *driver.Stream) error {
		return b.gemm.DenseSplit(s, tile, ms, ys, p.scratch.Add(parts), p.scratch.Add(xb), rows, splits)
	}}, true
}

// denseBlocks is the number of blocks a split-K dense GEMM aims for (at
// most; splits are powers of two): four 16-row tiles are resident on a
// multiprocessor. Zero keeps one split.
var denseBlocks = func(sms int) int { return 4 * sms }

// denseSplits: how many ways to split the ktiles k-tiles of a dense GEMM of
// tiles blocks: none below 16 k-tiles, else the largest power of two that
// keeps the blocks within denseBlocks and four k-tiles a split. On an H100
// (2026-12-06-split1, 16 rows): out_proj's 2048 x 4096 54.4 us in one
// piece, 12.7 in 8, 12.5 in 16; in_proj's z (4096 x 2048) 28.0, 12.0 in
// 8; its qkv (8192 x 2048) 26.8, 15.9 in 4, 16.2 in 8; the shared down
// (2048 x 512, 8 k-tiles) 8.8, and 11.1 in 2.
func denseSplits(tiles, ktiles, sms int) int {
	s := 1
	for ktiles >= 16 && 8*s <= ktiles && 2*s*tiles <= denseBlocks(sms) {
		s *= 2
	}
	return s
}

// qmvGroup lowers the one-token mat-vecs of a group of matrices (a
// QLinearGroup under fused=on) to one grouped qmv launch where they all
// take it, else returns nil: one kernel instead of one per matrix (the
// Gated DeltaNet's b and a projections are 32 rows each, a launch apiece
// for almost nothing).
func (b *Backend) qmvGroup(p *program, ws []*matrix, x driver.Ptr, ys []driver.Ptr, rows int) []step {
	if rows != 1 || len(ws) < 2 || len(ws) > QMVGroupMax || !b.o.Fused || !b.qmv.Grouped() || x%16 != 0 {
		return nil
	}
	table, total, cols, ok := groupTable(ws, ys)
	if !ok {
		return nil
	}
	return []step{{kernels: 1, name: "qmv_group", launch: func(s *driver.Stream) error {
		return b.qmv.LaunchGroup(s, table, x, total, cols)
	}}}
}

// groupTable is the QMVGroupTable of ws and their outputs ys, the rows of
// all matrices and their width; false where the grouped mat-vec does not
// take them.
func groupTable(ws []*matrix, ys []driver.Ptr) (table []byte, rows, cols int, ok bool) {
	qs := make([]*QMatrix, len(ws))
	for i, w := range ws {
		qs[i] = w.q
		rows += w.q.Rows
	}
	table, err := QMVGroupTable(qs, ys)
	if err != nil {
		return nil, 0, 0, false
	}
	return table, rows, qs[0].Cols, true
}

// expertsTC lowers an Experts op of several rows to the grouped MoE GEMMs
// where they take it (top-8, 4-bit matrices the GEMM takes, hidden and
// both inner sizes multiples of 64), reporting false otherwise. The
// routing comes from the ids on the device (the Route op's output): the
// pairs are grouped by expert there, and nothing waits for the host. The
// shared expert runs through the dense GEMM with its sigmoid gate folded
// into its activations, its down projection writing out; the combine adds
// the routed experts in slot order.
func (b *Backend) expertsTC(p *program, o *backend.Experts, gate, up, down, sg, su, seg, sd *matrix, x, idx, wts, out driver.Ptr, xbMade bool) ([]step, bool) {
	rows, E, H, I, SI := o.Rows, max(gate.shape.Experts, 1), gate.q.Cols, o.Inter, o.SharedInter
	if b.gemm == nil || rows < 2 || o.TopK != MoETopK || E < MoETopK || E > 1024 || x%16 != 0 || out%16 != 0 ||
		H%64 != 0 || I%64 != 0 || SI%64 != 0 {
		return nil, false
	}
	for _, w := range []*matrix{gate, up, down, sg, su, sd} {
		if !tcMatrix(w) {
			return nil, false
		}
	}
	tile := b.gemm.MoETile(rows, E, b.o.MoE)
	if tile.Stream && !b.gemm.StreamFits(tile, H, I) {
		tile = b.gemm.MoETile(rows, E, MoESmem)
	}
	pairs := rows * MoETopK
	maxTiles := ceil(pairs, tile.BM) + E
	var off int64
	res := func(n int) int64 { return p.reserve(&off, int64(n)) }
	xb := res(2 * rows * H) // at 0: where normMoESteps' norm writes it (xbMade)
	counts, offsets, pos, rowTok := res(4*E), res(4*(E+1)), res(4*pairs), res(4*pairs)
	tiles, ntiles, status, hist := res(8*maxTiles), res(4), res(4), res(4*groupHistInts(rows, E))
	// the expert outputs: bf16 under moeys=bf16 where the tile has the
	// kernel, else float32
	ysBF := b.o.MoEYsBF16 && b.gemm.DownBF(tile)
	ysBytes := 4
	if ysBF {
		ysBytes = 2
	}
	hb, ys := res(2*pairs*I), res(ysBytes*pairs*H)
	gs, us, hs, logit := res(4*rows*SI), res(4*rows*SI), res(2*rows*SI), res(4*rows) // the shared expert's, to off
	sharedEnd := off
	at := func(o int64) driver.Ptr { return p.scratch.Add(o) }
	groups := func() *MoEGroups {
		return &MoEGroups{Tokens: rows, Experts: E, Tile: tile, MaxTiles: maxTiles,
			Counts: at(counts), Offsets: at(offsets), Pos: at(pos), RowTok: at(rowTok),
			Tiles: at(tiles), NTiles: at(ntiles), Status: at(status), Hist: at(hist)}
	}
	one := func(name string, f func(s *driver.Stream) error) step { return step{kernels: 1, name: name, launch: f} }
	g := b.gemm
	tileD := g.DenseTile(rows, H)
	segGemm, segGrid := b.qgemmShape(1, rows)
	if rowsKernelFits(seg.q) {
		segGemm, segGrid = "qgemm_rows", driver.D1(ceil(rows, 8))
	}
	var head []step
	if !xbMade {
		head = append(head, one("gemm_to_bf16", func(s *driver.Stream) error { return g.ToBF16(s, x, at(xb), rows*H) }))
	}
	shared := []step{ // the shared expert: its gate logit, gate and up (one launch, or one each), SwiGLU and down
		one(segGemm, func(s *driver.Stream) error { // the shared expert's gate logit, from x in float32
			var a driver.Args
			a.Ptr(seg.desc).Ptr(x).Ptr(at(logit)).I32(int32(rows)).I32(1)
			return s.Launch(b.fn[segGemm], segGrid, driver.D1(256), 0, &a)
		})}
	if b.o.GroupGEMM {
		tileS := g.DenseTile(rows, 2*SI)
		shared = append(shared, one("gemm_group_"+tileS.Name, func(s *driver.Stream) error {
			return g.DenseGroup(s, tileS, []*QMatrix{sg.q, su.q}, []driver.Ptr{at(gs), at(us)}, at(xb), rows)
		}))
	} else {
		tileS := g.DenseTile(rows, SI)
		shared = append(shared,
			one("gemm_dense_"+tileS.Name, func(s *driver.Stream) error { return g.Dense(s, tileS, sg.q, at(xb), at(gs), rows) }),
			one("gemm_dense_"+tileS.Name, func(s *driver.Stream) error { return g.Dense(s, tileS, su.q, at(xb), at(us), rows) }),
		)
	}
	shared = append(shared,
		one("moe_shared_swiglu", func(s *driver.Stream) error { return g.SharedSwiGLU(s, at(gs), at(us), at(logit), at(hs), rows, SI) }),
		one("gemm_dense_"+tileD.Name, func(s *driver.Stream) error { return g.Dense(s, tileD, sd.q, at(hs), out, rows) }))
	tail := []step{
		{kernels: g.RouteKernels(), name: routeStepName(g), launch: func(s *driver.Stream) error { return g.Route(s, groups(), idx, rows) }},
		one("gemm_gateup_"+tile.Name, func(s *driver.Stream) error { return g.MoEGateUp(s, groups(), gate.q, up.q, I, H, at(xb), at(hb)) }),
	}
	left := false // the combine left to the next layer's norm
	if ysBF {
		tail = append(tail, one("gemm_downbf_"+tile.Name, func(s *driver.Stream) error { return g.MoEDownBF(s, groups(), down.q, H, I, at(hb), at(ys)) }))
		combine := one("moe_combine_bf", func(s *driver.Stream) error { return g.MoECombineBF(s, groups(), at(ys), wts, out, rows, H, true) })
		if e, ok := b.leaveCombine(p, o, H); ok {
			// the next layer's input norm sums it (or, if its lowering does
			// not, Compile runs it before that norm's steps)
			p.combine = &combineIn{delta: o.Out, expertsAt: e, step: combine, args: func(a *driver.Args) {
				a.Ptr(out).Ptr(at(ys)).Ptr(at(pos)).Ptr(wts)
			}}
			left = true
		} else {
			tail = append(tail, combine)
		}
	} else {
		tail = append(tail,
			one("gemm_down_"+tile.Name, func(s *driver.Stream) error { return g.MoEDown(s, groups(), down.q, H, I, at(hb), at(ys)) }),
			one("moe_combine", func(s *driver.Stream) error { return g.MoECombine(s, groups(), at(ys), wts, out, rows, H, true) }))
	}
	if b.o.SharedSide && !left {
		// sharedside=on: the shared expert on the side stream, beside the
		// grouping and the routed experts (and the router, which
		// normMoESteps queues after it); the combine, which adds to the
		// shared expert's output, waits for it
		tail[len(tail)-1] = b.joinSide(tail[len(tail)-1])
		return append(append(head, b.sideSteps(shared, gs, sharedEnd)), tail...), true
	}
	return append(append(head, shared...), tail...), true
}

// combineIn is an MoE block's combine left to the norm after it
// (combinenorm=on): the MoE output it would sum into (delta), the Experts
// op's index, its launch (step), and add_rmsnorm_comb_bf's arguments for
// it (args: the shared expert's output, already in delta, the bf16 expert
// outputs, their positions and the weights); taken once a norm's lowering
// sums it.
type combineIn struct {
	delta     backend.Buffer
	expertsAt int
	step      step
	args      func(a *driver.Args)
	taken     bool
}

// leaveCombine says whether o, an MoE block of a prompt chunk, leaves its
// combine to the norm after it: under combinenorm=on with normbf, the next
// op an AddRMSNorm adding o's output (whole, as its delta) to its rows of
// at most normCombMaxDim values, no other op reading that output before
// the program writes over it; with the Experts op's index e where it does.
func (b *Backend) leaveCombine(p *program, o *backend.Experts, H int) (e int, ok bool) {
	if !b.o.CombineNorm || !b.o.NormBF16 || b.fn[normCombKernel] == nil || H > normCombMaxDim {
		return 0, false
	}
	e = slices.IndexFunc(p.ops, func(op backend.Op) bool { return op == backend.Op(o) })
	if e < 0 || e+1 >= len(p.ops) {
		return 0, false
	}
	n, ok := p.ops[e+1].(*backend.AddRMSNorm)
	return e, ok && n.Delta == o.Out && n.Rows == o.Rows && n.Dim == H && backend.Overwritten(p.ops, e, o.Out, e+1)
}

// normCombKernel is norm_comb.cu's norm; normCombMaxDim the longest row it
// takes (NC_THREADS·NC_REG there).
const (
	normCombKernel = "add_rmsnorm_comb_bf"
	normCombMaxDim = 256 * 8
)

// routeStepName names the MoE grouping's step by its kernels.
func routeStepName(g *GEMM) string {
	if g.RouteKernels() > 1 {
		return "moe_group"
	}
	return "moe_route"
}

// normLinearsSteps lowers ops[i:i+2], a prompt chunk's norm (AddRMSNorm, or
// GatedRMSNorm) and the QLinear or QLinearGroup that reads its output next,
// every matrix on the tensor cores, to norm_bf.cu's form of the norm, which
// also writes its output's bf16 copy into the scratch, and the GEMMs
// taking that copy: no gemm_to_bf16 (normbf=on). Otherwise false. Each
// step's op is relative: the norm's 0, the GEMMs' 1.
func (b *Backend) normLinearsSteps(p *program, i int) ([]step, bool) {
	if !b.o.NormBF16 || b.gemm == nil || i+1 >= len(p.ops) {
		return nil, false
	}
	switch p.ops[i].(type) { // the cheap test first: this runs for every op
	case *backend.AddRMSNorm, *backend.GatedRMSNorm:
	default:
		return nil, false
	}
	var x, y backend.Buffer
	var ms []backend.Matrix
	var rows int
	var offs []int // a group's outputs' offsets; nil for one matrix
	switch o := p.ops[i+1].(type) {
	case *backend.QLinear:
		x, y, ms, rows = o.X, o.Y, []backend.Matrix{o.W}, o.Rows
	case *backend.QLinearGroup:
		x, y, ms, rows, offs = o.X, o.Y, o.W, o.Rows, o.Offsets()
	default:
		return nil, false
	}
	if rows <= 1 || len(ms) == 0 || len(ms) > QMVGroupMax {
		return nil, false
	}
	ch := &checks{b: b}
	ws := make([]*matrix, len(ms))
	for j, m := range ms {
		if ws[j] = ch.mat(fmt.Sprintf("matrix %d", j), m); ws[j] == nil || ws[j].q.Rows == 0 || !tcMatrix(ws[j]) || ws[j].q.Cols != ws[0].q.Cols {
			return nil, false // (a group of mixed widths gets lowering's error)
		}
	}
	cols := ws[0].q.Cols
	ys := make([]driver.Ptr, len(ws))
	if offs == nil {
		ys[0] = ch.buf("y", y, backend.F32, rows*ws[0].q.Rows)
	} else {
		yp := ch.buf("y", y, backend.F32, offs[len(ws)])
		for j := range ws {
			ys[j] = yp.Add(4 * int64(offs[j]))
		}
	}
	var norm func(xb int64, lean bool) step // its step, the bf16 copy at xb in the scratch; lean: no float32 output
	var xp driver.Ptr
	var outBuf backend.Buffer
	switch n := p.ops[i].(type) {
	case *backend.AddRMSNorm:
		if n.Out != x || n.Rows != rows || n.Dim != cols {
			return nil, false
		}
		xp, norm = b.addNormBF(p, ch, n)
		outBuf = n.Out
	case *backend.GatedRMSNorm:
		if n.Out != x || n.Rows != rows || n.Heads*n.Dim != cols {
			return nil, false
		}
		size := rows * cols
		xs, z, w := ch.buf("x", n.X, backend.F32, size), ch.buf("z", n.Z, backend.F32, size), ch.buf("the weight", n.Weight, backend.F32, n.Dim)
		xp = ch.buf("the output", n.Out, backend.F32, size)
		count, dim, eps := rows*n.Heads, n.Dim, n.Eps
		outBuf = n.Out
		norm = func(xb int64, lean bool) step {
			name, out := normKernel("gated_rmsnorm_bf", xp, lean)
			return b.launch(name, driver.D1(ceil(count, 8)), driver.D1(256), 0, func(a *driver.Args) {
				a.Ptr(xs).Ptr(z).Ptr(w).Ptr(out).Ptr(p.scratch.Add(xb)).I32(int32(count)).I32(int32(dim)).F32(eps)
			})
		}
	default:
		return nil, false
	}
	if ch.err != nil || xp%16 != 0 {
		return nil, false
	}
	for _, yj := range ys {
		if yj%16 != 0 {
			return nil, false
		}
	}
	var off int64
	xb := p.reserve(&off, 2*int64(rows*cols))
	linears := b.linearsFrom(p, ws, xp, xb, off, ys, rows)
	if cs, ok := b.convGEMMSteps(p, i, ws, ys, xb, rows, linears); ok {
		linears = cs // the in_proj with the conv after it in its epilogue, and conv_fix
	}
	// normf32=lean: the float32 output left unwritten where only the GEMMs
	// (which read the bf16 copy) come before the program writes over it
	lean := b.o.NormF32Lean && backend.Overwritten(p.ops, i, outBuf, i+1)
	for _, st := range linears {
		lean = lean && (strings.HasPrefix(st.name, "gemm_") || st.op > 1) // the linears' (an op after them, conv_fix's, reads not x)
	}
	steps := []step{norm(xb, lean)}
	for _, st := range linears {
		st.op = max(st.op, 1) // conv_fix's is the ConvSiLU's, 2
		steps = append(steps, st)
	}
	return steps, true
}

// addNormBF is n, a prompt chunk's AddRMSNorm, as normbf's step: its
// float32 output xp and norm, the launch of add_rmsnorm_bf writing the
// bf16 copy at xb in the scratch too (lean: norm_bfo.cu's form, without
// the float32 output). ch collects what is wrong with n's buffers.
func (b *Backend) addNormBF(p *program, ch *checks, n *backend.AddRMSNorm) (xp driver.Ptr, norm func(xb int64, lean bool) step) {
	rows, dim, eps := n.Rows, n.Dim, n.Eps
	h, w := ch.buf("h", n.H, backend.F32, rows*dim), ch.buf("the weight", n.Weight, backend.F32, dim)
	xp = ch.buf("the output", n.Out, backend.F32, rows*dim)
	var delta driver.Ptr
	if n.Delta.Mem != nil {
		delta = ch.buf("the delta", n.Delta, backend.F32, rows*dim)
	}
	if c := p.combine; c != nil && c.delta == n.Delta && dim <= normCombMaxDim && b.fn[normCombKernel] != nil {
		// the MoE block before leaves its combine here (combinenorm=on),
		// taken once the caller builds this step (it may yet fall back)
		return xp, func(xb int64, lean bool) step {
			c.taken = true
			out := xp
			if lean {
				out = 0
			}
			return b.launch(normCombKernel, driver.D1(rows), driver.D1(256), 0, func(a *driver.Args) {
				a.Ptr(h)
				c.args(a)
				a.Ptr(w).Ptr(out).Ptr(p.scratch.Add(xb)).I32(int32(dim)).F32(eps)
			})
		}
	}
	return xp, func(xb int64, lean bool) step {
		name, out := normKernel("add_rmsnorm_bf", xp, lean)
		return b.launch(name, driver.D1(rows), driver.D1(256), 0, func(a *driver.Args) {
			a.Ptr(h).Ptr(delta).Ptr(w).Ptr(out).Ptr(p.scratch.Add(xb)).I32(int32(dim)).F32(eps)
		})
	}
}

// normKernel is norm_bf.cu's kernel name and its float32 output, or under
// lean norm_bfo.cu's, which takes a null output (writes only the bf16 copy).
func normKernel(name string, out driver.Ptr, lean bool) (string, driver.Ptr) {
	if lean {
		return name + "o", 0
	}
	return name, out
}

// normMoESteps lowers ops[i:i+3], a prompt chunk's post-attention norm, its
// router and its experts reading the norm's output (normbf=moe): the norm
// (norm_bf.cu) writes the float32 row the router reads and the bf16 copy
// the experts' GEMMs read, at the scratch's start, so that the experts
// need no gemm_to_bf16; the router's scratch follows the copy. Otherwise
// false (and the ops are lowered one by one).
func (b *Backend) normMoESteps(p *program, i int) ([]step, bool) {
	if !b.o.NormBF16MoE || b.gemm == nil || i+2 >= len(p.ops) {
		return nil, false
	}
	n, ok1 := p.ops[i].(*backend.AddRMSNorm)
	r, ok2 := p.ops[i+1].(*backend.Route)
	e, ok3 := p.ops[i+2].(*backend.Experts)
	if !ok1 || !ok2 || !ok3 || n.Rows < 2 || r.Rows != n.Rows || e.Rows != n.Rows || r.X != n.Out || e.X != n.Out {
		return nil, false
	}
	ch := &checks{b: b}
	out, norm := b.addNormBF(p, ch, n)
	if ch.err != nil || out%16 != 0 {
		return nil, false // the plain lowering says what is wrong
	}
	var off int64
	xb := p.reserve(&off, 2*int64(n.Rows*n.Dim)) // at 0, where expertsTC reads it
	experts, err := b.expertsFrom(p, &checks{b: b}, e, true)
	if err != nil {
		return nil, false // not the tensor-core path, or a bad op the plain lowering names
	}
	routeEnd := off // the router's scratch: from off to routeEnd
	route, err := b.routeOpFrom(p, &checks{b: b}, r, &routeEnd)
	if err != nil {
		return nil, false
	}
	steps := []step{norm(xb, false)}
	if len(experts) > 0 && experts[0].side && routeEnd <= experts[0].sideFrom &&
		!e.Out.Overlaps(r.X) && !e.Out.Overlaps(r.Idx) && !e.Out.Overlaps(r.Weights) {
		// the shared expert's fork first, so that it runs beside the router
		// too (whose scratch ends before the shared expert's starts, and
		// whose buffers are not the MoE's output, which it writes); listed
		// with the norm it forks from (steps stay in the order of their
		// ops, as --profile's timing of each op needs)
		experts[0].op = 0
		steps, experts = append(steps, experts[0]), experts[1:]
	}
	for _, st := range route {
		st.op = 1
		steps = append(steps, st)
	}
	for _, st := range experts {
		st.op = 2
		steps = append(steps, st)
	}
	return steps, true
}
