package cuda

import (
	"errors"
	"fmt"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// checks collects the first problem with an op's buffers.
type checks struct {
	b   *Backend
	err error
}

func (c *checks) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// buf is the address of buf, checked to be of type t with at least n
// elements.
func (c *checks) buf(what string, buf backend.Buffer, t backend.DType, n int) driver.Ptr {
	if c.err != nil {
		return 0
	}
	p, err := c.b.addr(buf)
	if err != nil {
		c.fail("%s: %w", what, err)
		return 0
	}
	if err := backend.CheckOperand("CUDA", what, buf, t, n); err != nil {
		c.fail("%w", err)
	}
	return p
}

// kv is the address of a KV cache, f32 or bf16.
func (c *checks) kv(what string, buf backend.Buffer, n int) driver.Ptr {
	if err := backend.CheckKV(what, buf); err != nil {
		c.fail("%w", err)
		return 0
	}
	return c.buf(what, buf, buf.Type, n)
}

func (c *checks) mat(what string, m backend.Matrix) *matrix {
	if c.err != nil {
		return nil
	}
	w, err := c.b.mat(m)
	if err != nil {
		c.fail("%s: %w", what, err)
		return nil
	}
	return w
}

func (c *checks) require(ok bool, format string, args ...any) {
	if !ok {
		c.fail(format, args...)
	}
}

func ceil(a, b int) int { return (a + b - 1) / b }

// convRows is CONV_ROWS of ops.cu: the rows of one block of conv_silu.
const convRows = 32

// launch is a step of one kernel of ops.cu or sample.cu.
func (b *Backend) launch(name string, grid, block driver.Dim3, shared int, args func(a *driver.Args)) step {
	fn := b.fn[name]
	return step{kernels: 1, name: name, launch: func(s *driver.Stream) error {
		var a driver.Args
		args(&a)
		return s.Launch(fn, grid, block, shared, &a)
	}}
}

func grid2(x, y int) driver.Dim3 { return driver.Dim3{X: x, Y: y, Z: 1} }

// lower turns one op into its kernels.
func (b *Backend) lower(p *program, op backend.Op) ([]step, error) {
	c := &checks{b: b}
	var steps []step
	switch o := op.(type) {
	case *backend.Embed:
		w := c.mat("the table", o.Table)
		if w != nil {
			tok := c.buf("the tokens", o.Tokens, backend.I32, o.Rows)
			out := c.buf("the output", o.Out, backend.F32, o.Rows*w.q.Cols)
			if o.Rows > 0 {
				steps = append(steps, b.launch("embed_rows", driver.D1(o.Rows), driver.D1(256), 0, func(a *driver.Args) {
					a.Ptr(w.desc).Ptr(tok).Ptr(out)
				}))
			}
		}
	case *backend.AddRMSNorm:
		n := o.Rows * o.Dim
		h := c.buf("h", o.H, backend.F32, n)
		var delta driver.Ptr
		if o.Delta.Mem != nil {
			delta = c.buf("the delta", o.Delta, backend.F32, n)
		}
		w := c.buf("the weight", o.Weight, backend.F32, o.Dim)
		out := c.buf("the output", o.Out, backend.F32, n)
		if o.Rows > 0 && o.Dim > 0 {
			steps = append(steps, b.launch("add_rmsnorm", driver.D1(o.Rows), driver.D1(256), 0, func(a *driver.Args) {
				a.Ptr(h).Ptr(delta).Ptr(w).Ptr(out).I32(int32(o.Dim)).F32(o.Eps)
			}))
		}
	case *backend.QLinear:
		w := c.mat("the matrix", o.W)
		if w != nil {
			x := c.buf("x", o.X, backend.F32, o.Rows*w.q.Cols)
			y := c.buf("y", o.Y, backend.F32, o.Rows*w.q.Rows)
			if c.err == nil {
				steps = append(steps, b.linears(p, []*matrix{w}, x, []driver.Ptr{y}, o.Rows)...)
			}
		}
	case *backend.QLinearGroup:
		c.require(len(o.W) > 0, "no matrices")
		var ws []*matrix
		for i, m := range o.W {
			if w := c.mat(fmt.Sprintf("matrix %d", i), m); w != nil {
				c.require(w.q.Cols == c.b.mustCols(o.W[0]), "matrix %d is %d wide, matrix 0 %d", i, w.q.Cols, c.b.mustCols(o.W[0]))
				ws = append(ws, w)
			}
		}
		if c.err == nil {
			off := o.Offsets()
			x := c.buf("x", o.X, backend.F32, o.Rows*ws[0].q.Cols)
			y := c.buf("y", o.Y, backend.F32, off[len(ws)])
			if c.err == nil {
				ys := make([]driver.Ptr, len(ws))
				for i := range ws {
					ys[i] = y.Add(4 * int64(off[i]))
				}
				steps = append(steps, b.linears(p, ws, x, ys, o.Rows)...)
			}
		}
	case *backend.ConvSiLU:
		c.require(o.K >= 1 && o.K <= 16, "a conv of width %d; the kernel takes 1 to 16", o.K)
		x := c.buf("x", o.X, backend.F32, o.Rows*o.Chans)
		st := c.buf("the state", o.State, backend.F32, (o.K-1)*o.Chans)
		w := c.buf("the weights", o.Weight, backend.F32, o.Chans*o.K)
		out := c.buf("the output", o.Out, backend.F32, o.Rows*o.Chans)
		if o.Rows > 0 && o.Chans > 0 {
			steps = append(steps, b.launch("conv_silu", grid2(ceil(o.Chans, 256), ceil(o.Rows, convRows)), driver.D1(256), 0, func(a *driver.Args) {
				a.Ptr(x).Ptr(st).Ptr(w).Ptr(out).I32(int32(o.Rows)).I32(int32(o.Chans)).I32(int32(o.K))
			}))
		}
	case *backend.DeltaRule:
		c.require(o.KeyHeads >= 1 && o.ValueHeads%o.KeyHeads == 0, "%d value heads over %d key heads", o.ValueHeads, o.KeyHeads)
		c.require(o.KeyDim >= 1 && o.KeyDim <= 32*8, "key heads of %d values; the kernel takes up to 256", o.KeyDim)
		width := 2*o.KeyHeads*o.KeyDim + o.ValueHeads*o.ValueDim
		qkv := c.buf("qkv", o.QKV, backend.F32, o.Rows*width)
		d := deltaRuleBuffers(c, o)
		if b.o.ChunkedDelta && chunkableDelta(o) && o.Rows > 0 && c.err == nil {
			chunked, err := b.deltaRuleChunked(p, o, qkv, d)
			steps, c.err = append(steps, chunked...), err
		} else if tasks := o.ValueHeads * o.ValueDim; o.Rows > 0 && tasks > 0 && c.err == nil {
			steps = append(steps, b.launch("delta_rule", driver.D1(ceil(tasks, 8)), driver.D1(256), 0, func(a *driver.Args) {
				a.Ptr(qkv).Ptr(d.b).Ptr(d.a).Ptr(d.aLog).Ptr(d.dtBias).Ptr(d.state).Ptr(d.out).
					I32(int32(o.Rows)).I32(int32(o.KeyHeads)).I32(int32(o.KeyDim)).I32(int32(o.ValueHeads)).I32(int32(o.ValueDim))
			}))
		}
	case *backend.GatedRMSNorm:
		n := o.Rows * o.Heads * o.Dim
		x := c.buf("x", o.X, backend.F32, n)
		z := c.buf("z", o.Z, backend.F32, n)
		w := c.buf("the weight", o.Weight, backend.F32, o.Dim)
		out := c.buf("the output", o.Out, backend.F32, n)
		if count := o.Rows * o.Heads; count > 0 && o.Dim > 0 {
			steps = append(steps, b.launch("gated_rmsnorm", driver.D1(ceil(count, 8)), driver.D1(256), 0, func(a *driver.Args) {
				a.Ptr(x).Ptr(z).Ptr(w).Ptr(out).I32(int32(count)).I32(int32(o.Dim)).F32(o.Eps)
			}))
		}
	case *backend.QKPrep:
		return b.qkPrep(p, c, o)
	case *backend.Attention:
		return b.attention(p, c, o)
	case *backend.Route:
		return b.routeOp(p, c, o)
	case *backend.Experts:
		return b.experts(p, c, o)
	case *backend.Advance:
		pos := c.buf("the position", o.Pos, backend.I32, 1)
		steps = append(steps, b.launch("advance", driver.D1(1), driver.D1(1), 0, func(a *driver.Args) {
			a.Ptr(pos).I32(int32(o.By))
		}))
	case *backend.Sample:
		return b.sampleOp(p, c, o)
	case *backend.Logprobs:
		return b.logprobsOp(c, o)
	default:
		return nil, fmt.Errorf("not implemented by the CUDA backend")
	}
	return steps, c.err
}

func (b *Backend) mustCols(m backend.Matrix) int {
	if w, ok := m.(*matrix); ok && w != nil {
		return w.q.Cols
	}
	return -1
}

// linear is y[rows, R] = x[rows, C]·Wᵀ: the 4-bit mat-vec for one row
// where it applies, else the plain GEMM (linears puts the tensor-core GEMM
// before both).
func (b *Backend) linear(w *matrix, x, y driver.Ptr, rows int) []step {
	if rows == 0 || w.q.Rows == 0 {
		return nil
	}
	q := w.q
	if b.o.Fused && rows == 1 && q.Bits == 4 && q.GroupSize == 64 && q.ScaleBias != 0 && x%16 == 0 {
		return []step{{kernels: 1, name: "qmv", launch: func(s *driver.Stream) error { return b.qmv.Launch(s, q, x, y) }}}
	}
	R := q.Rows
	name, grid := b.qgemmShape(R, rows)
	if rowsKernelFits(q) {
		name, grid = "qgemm_rows", driver.D1(ceil(R*rows, 8))
	}
	return []step{b.launch(name, grid, driver.D1(256), 0, func(a *driver.Args) {
		a.Ptr(w.desc).Ptr(x).Ptr(y).I32(int32(rows)).I32(int32(R))
	})}
}

// rowsKernelFits: a matrix of a few rows (the shared expert's gate) takes
// qgemm_rows, a warp per token and row, rather than a tile of 32 rows.
func rowsKernelFits(q *QMatrix) bool {
	return q.Rows <= 8 && (q.Bits == 4 || q.Bits == 8) && q.GroupSize%(32/q.Bits) == 0
}

// qgemmShape chooses the plain GEMM's tiles for R weight rows and T
// tokens: qgemm's 64 × 64 where that makes two blocks per multiprocessor
// or more, else qgemm_s's 32 × 32 (the router's 256 logits of a 512-token
// chunk are 32 blocks of 64 × 64 on 132 multiprocessors, 128 of 32 × 32).
func (b *Backend) qgemmShape(R, T int) (string, driver.Dim3) {
	if ceil(R, 64)*ceil(T, 64) >= 2*b.ctx.Device().SMs {
		return "qgemm", grid2(ceil(R, 64), ceil(T, 64))
	}
	return "qgemm_s", grid2(ceil(R, 32), ceil(T, 32))
}

func (b *Backend) qkPrep(p *program, c *checks, o *backend.QKPrep) ([]step, error) {
	QH, KVH, D, rot := o.QHeads, o.KVHeads, o.HeadDim, o.RotaryDim
	c.require(KVH >= 1 && QH%KVH == 0, "%d query heads over %d KV heads", QH, KVH)
	c.require(D >= 1 && D <= 1024, "heads of %d values; the kernel takes up to 1024", D)
	c.require(rot >= 0 && rot%2 == 0 && rot <= D, "%d rotary dims of %d", rot, D)
	c.require(o.KCache.Type == o.VCache.Type, "K and V caches of element types %s and %s", o.KCache.Type, o.VCache.Type)
	kvW := KVH * D
	qg := c.buf("qg", o.QG, backend.F32, o.Rows*QH*2*D)
	k := c.buf("k", o.K, backend.F32, o.Rows*kvW)
	v := c.buf("v", o.V, backend.F32, o.Rows*kvW)
	qn := c.buf("the q norm", o.QNorm, backend.F32, D)
	kn := c.buf("the k norm", o.KNorm, backend.F32, D)
	q := c.buf("q", o.Q, backend.F32, o.Rows*QH*D)
	kc := c.kv("the K cache", o.KCache, 0)
	vc := c.kv("the V cache", o.VCache, o.KCache.Len)
	pos := c.buf("the position", o.Pos, backend.I32, 1)
	if c.err != nil || o.Rows == 0 {
		return nil, c.err
	}
	maxPos := o.KCache.Len / max(kvW, 1)
	inv, err := b.ropeTable(max(rot, 2), o.RopeTheta)
	if err != nil {
		return nil, err
	}
	shadow, err := b.cacheShadow(o.KCache, o.VCache, kc, vc, maxPos, kvW)
	if err != nil {
		return nil, err
	}
	if b.o.Fused && o.Rows == 1 && D == AttnHeadDim && QH == AttnGroup*KVH && rot >= 2 {
		sh := AttnShape{QHeads: QH, KVHeads: KVH, RotaryDim: rot, RopeTheta: o.RopeTheta, Eps: o.Eps, MaxPos: maxPos, KV: kvType(o.KCache.Type)}
		bufs := AttnBuffers{QG: qg, K: k, V: v, QNorm: qn, KNorm: kn, InvFreq: inv, Q: q, KCache: kc, VCache: vc, Pos: pos}
		if shadow != nil {
			// the row into the shadows too
			return []step{b.launch("qk_prep_f32_shadow", driver.D1(QH+KVH), driver.D1(AttnHeadDim), 0, func(a *driver.Args) {
				b.attn.prepArgs(a, sh, bufs)
				a.Ptr(shadow.ks).Ptr(shadow.vs)
			})}, nil
		}
		return []step{{kernels: 1, name: "qk_prep", launch: func(s *driver.Stream) error { return b.attn.LaunchPrep(s, sh, bufs) }}}, nil
	}
	if b.o.QKRowsWarp && D == qkRowsD && rot == qkRowsRot {
		// qk_rows.cu: a warp a row, the shadow's rows from the same registers
		name := "qk_rows_f32"
		ks, vs := driver.Ptr(0), driver.Ptr(0)
		switch {
		case o.KCache.Type == backend.BF16:
			name = "qk_rows_bf16"
		case shadow != nil:
			name, ks, vs = "qk_rows_f32_shadow", shadow.ks, shadow.vs
		}
		return []step{b.launch(name, driver.D1(ceil(o.Rows, qkRowsWarps)), driver.D1(32*qkRowsWarps), 0, func(a *driver.Args) {
			a.Ptr(qg).Ptr(k).Ptr(v).Ptr(qn).Ptr(kn).Ptr(q).Ptr(kc).Ptr(vc).Ptr(pos).I32(int32(maxPos)).Ptr(inv).
				I32(int32(QH)).I32(int32(KVH)).I32(int32(o.Rows)).F32(o.Eps).Ptr(ks).Ptr(vs)
		})}, nil
	}
	name := "qk_prep_rows_f32"
	if o.KCache.Type == backend.BF16 {
		name = "qk_prep_rows_bf16"
	}
	threads := 32 * ceil(D, 32)
	steps := []step{b.launch(name, grid2(QH+KVH, o.Rows), driver.D1(threads), 4*D, func(a *driver.Args) {
		a.Ptr(qg).Ptr(k).Ptr(v).Ptr(qn).Ptr(kn).Ptr(q).Ptr(kc).Ptr(vc).Ptr(pos).I32(int32(maxPos)).Ptr(inv).
			I32(int32(QH)).I32(int32(KVH)).I32(int32(D)).I32(int32(rot)).F32(o.Eps)
	})}
	if shadow != nil {
		steps = append(steps, b.shadowRowsStep(shadow, pos, o.Rows))
	}
	return steps, nil
}

// qk_rows.cu's shape (QR_D, QR_ROT: heads of 256 values, 64 of them
// rotated) and its warps a block (QR_WARPS).
const (
	qkRowsD     = 256
	qkRowsRot   = 64
	qkRowsWarps = 8
)

func kvType(t backend.DType) KVType {
	if t == backend.BF16 {
		return KVBF16
	}
	return KVF32
}

func (b *Backend) attention(p *program, c *checks, o *backend.Attention) ([]step, error) {
	QH, KVH, D := o.QHeads, o.KVHeads, o.HeadDim
	c.require(KVH >= 1 && QH%KVH == 0, "%d query heads over %d KV heads", QH, KVH)
	c.require(D >= 1 && D <= 512, "heads of %d values; the kernel takes up to 512", D)
	c.require(o.KCache.Type == o.VCache.Type, "K and V caches of element types %s and %s", o.KCache.Type, o.VCache.Type)
	q := c.buf("q", o.Q, backend.F32, o.Rows*QH*D)
	qg := c.buf("qg", o.QG, backend.F32, o.Rows*QH*2*D)
	kc := c.kv("the K cache", o.KCache, 0)
	vc := c.kv("the V cache", o.VCache, o.KCache.Len)
	out := c.buf("the output", o.Out, backend.F32, o.Rows*QH*D)
	pos := c.buf("the position", o.Pos, backend.I32, 1)
	if c.err != nil || o.Rows == 0 {
		return nil, c.err
	}
	shadow, err := b.cacheShadow(o.KCache, o.VCache, kc, vc, o.KCache.Len/max(KVH*D, 1), KVH*D)
	if err != nil {
		return nil, err
	}
	if st, ok, err := b.flashAttention(p, o, FlashBuffers{Q: q, QG: qg, KCache: kc, VCache: vc, Pos: pos, Out: out}, shadow); ok || err != nil {
		return st, err
	}
	if b.o.Fused && o.Rows == 1 && D == AttnHeadDim && QH == AttnGroup*KVH && q%16 == 0 && kc%16 == 0 && vc%16 == 0 {
		// the attention kernels take no rotary dims; the shape's check wants some
		sh := AttnShape{QHeads: QH, KVHeads: KVH, RotaryDim: 2, KV: kvType(o.KCache.Type)}
		if shadow != nil {
			sh.KV, kc, vc = KVBF16, shadow.ks, shadow.vs // the rows rounded to bf16
		}
		po, pml := b.attn.PartialsBytes(sh)
		var off int64
		oOff, mlOff := p.reserve(&off, po), p.reserve(&off, pml)
		return []step{{kernels: 2, name: "attn_split+attn_combine", launch: func(s *driver.Stream) error {
			bufs := AttnBuffers{QG: qg, Q: q, KCache: kc, VCache: vc, Pos: pos, Out: out,
				PartO: p.scratch.Add(oOff), PartML: p.scratch.Add(mlOff)}
			return b.attn.LaunchAttention(s, sh, bufs)
		}}}, nil
	}
	j := 2
	for 32*j < D {
		j *= 2
	}
	kv := "f32"
	if o.KCache.Type == backend.BF16 {
		kv = "bf16"
	}
	rows := o.Rows
	return []step{b.launch(fmt.Sprintf("attn_rows_%s_j%d", kv, j), driver.D1(ceil(rows*QH, 8)), driver.D1(256), 0, func(a *driver.Args) {
		a.Ptr(q).Ptr(qg).Ptr(kc).Ptr(vc).Ptr(pos).Ptr(out).I32(int32(rows)).I32(int32(QH)).I32(int32(KVH)).I32(int32(D))
	})}, nil
}

func (b *Backend) routeOp(p *program, c *checks, o *backend.Route) ([]step, error) {
	var off int64
	return b.routeOpFrom(p, c, o, &off)
}

// routeOpFrom is routeOp with the scratch's first *off bytes taken (a
// norm's bf16 copy for the experts after it: normMoESteps); *off is left
// at the end of the scratch it takes.
func (b *Backend) routeOpFrom(p *program, c *checks, o *backend.Route, off *int64) ([]step, error) {
	w := c.mat("the router", o.Router)
	if w == nil {
		return nil, c.err
	}
	E, C := w.q.Rows, w.q.Cols
	c.require(o.TopK >= 1 && o.TopK <= E, "top-%d of %d experts", o.TopK, E)
	x := c.buf("x", o.X, backend.F32, o.Rows*C)
	idx := c.buf("the expert ids", o.Idx, backend.I32, o.Rows*o.TopK)
	wts := c.buf("the weights", o.Weights, backend.F32, o.Rows*o.TopK)
	if c.err != nil || o.Rows == 0 {
		return nil, c.err
	}
	q := w.q
	if b.o.Fused && o.Rows == 1 && routeFits(q, o.TopK) && x%16 == 0 {
		lOff := p.reserve(off, 4*int64(E))
		return []step{{kernels: 1, name: "route", launch: func(s *driver.Stream) error {
			bufs := RouteBuffers{X: x, Logits: p.scratch.Add(lOff), Counter: b.counter, IDs: idx, Weights: wts}
			return b.route.Launch(s, q, bufs, o.TopK, o.Normalize)
		}}}, nil
	}
	lOff := p.reserve(off, 4*int64(o.Rows*E))
	rows, topK, norm := o.Rows, o.TopK, int32(0)
	if o.Normalize {
		norm = 1
	}
	gemm, grid := b.qgemmShape(E, rows)
	threads, f64, splits, pOff, shared := 256, false, 0, int64(0), 0
	// the exact routers take MLX groups of 64 of 4- or 8-bit codes
	exact := q.GroupSize == 64 && C%64 == 0 && (q.Bits == 4 || q.Bits == 8)
	switch {
	case exact && b.o.Router == RouterCert && certFits(q, o.Normalize) && x%16 == 0:
		return b.certRouteSteps(p, w, x, idx, wts, rows, o.TopK, off)
	case exact && (b.o.Router.integer() || b.o.Router == RouterCert):
		// exact integer products of x's 8-bit parts, float64 sums
		// (router=cert: router=i8wg's, where certFits refuses)
		k := b.o.Router
		if k == RouterCert {
			k = RouterI8WG
		}
		sh := qiShapes[k]
		tiles := ceil(E, sh.rows) * ceil(rows, sh.tokens)
		if splits = routerSplits(sh.weight*tiles, C/64, b.ctx.Device().SMs); splits > 1 {
			pOff = p.reserve(off, 8*int64(splits*rows*E))
		}
		grid = driver.Dim3{X: ceil(E, sh.rows), Y: ceil(rows, sh.tokens), Z: splits}
		f64, gemm, threads, shared = true, sh.kernel, sh.threads, sh.shared()
	case exact && b.o.Router != RouterPlain:
		// the logits in float64 on the tensor cores, the columns split
		// where the tiles are too few to fill the GPU
		f64, gemm, threads = true, "qgemm_f64", 128
		tile, weight := 32, 1
		if routerWide(ceil(E, 64)*ceil(rows, 64), b.ctx.Device().SMs) {
			gemm, tile, shared, weight = routerWideKernel, 64, qfWideShared, routerWideWeight
		}
		tiles := ceil(E, tile) * ceil(rows, tile)
		if splits = routerSplits(weight*tiles, C/64, b.ctx.Device().SMs); splits > 1 {
			pOff = p.reserve(off, 8*int64(splits*rows*E))
		}
		grid = driver.Dim3{X: ceil(E, tile), Y: ceil(rows, tile), Z: splits}
	}
	if splits == 1 {
		splits = 0 // route_select reads the float32 logits as they are
	}
	return []step{
		{kernels: 1, name: gemm, launch: func(s *driver.Stream) error {
			var a driver.Args
			a.Ptr(w.desc).Ptr(x).Ptr(p.scratch.Add(lOff))
			if f64 {
				a.Ptr(p.scratch.Add(pOff))
			}
			a.I32(int32(rows)).I32(int32(E))
			return s.Launch(b.fn[gemm], grid, driver.D1(threads), shared, &a)
		}},
		{kernels: 1, name: "route_select", launch: func(s *driver.Stream) error {
			var a driver.Args
			a.Ptr(p.scratch.Add(lOff)).Ptr(p.scratch.Add(pOff)).Ptr(idx).Ptr(wts).I32(int32(E)).I32(int32(topK)).I32(norm).I32(int32(splits))
			return s.Launch(b.fn["route_select"], driver.D1(rows), driver.D1(32), E, &a)
		}},
	}, nil
}

// routerBlocks is the number of qgemm_f64 blocks a split of the columns
// aims for (at most; splits are powers of two): a few a multiprocessor,
// each thread's loads of one group in flight while another's products run.
// Zero keeps one split (the measurement's baseline).
var routerBlocks = func(sms int) int { return 4 * sms }

// routerWideKernels are the 64 x 64 float64 router kernels: qgemm_f64_h
// (sm_90's m16n8k16 products), the one routeOp takes (routerWideKernel),
// and qgemm_f64_w (m8n8k4), measured beside it. On an H100 (2026-12-06-
// router5, route_select included) qgemm_f64_h took 44 / 62 / 175 / 653 us
// at 512 / 1024 / 4096 / 16384 rows against qgemm_f64_w's 52 / 75 / 227 /
// 876, the experts chosen the same and the weights as close to float64's.
// qgemm_f64_w3, three blocks a multiprocessor, measured 295 us at 4096
// rows against qgemm_f64_w's 226 (2026-12-06-pipe2) and went.
var routerWideKernels = []string{"qgemm_f64_h", "qgemm_f64_w"}

var routerWideKernel = routerWideKernels[0]

// qfWideShared is qgemm_f64_w's dynamic shared memory (QF_WIDE_SHARED):
// 64 rows of x and 64 of weights, 68 doubles each.
const qfWideShared = 2 * 64 * 68 * 8

// routerWide says whether the router's logits take the 64 x 64 kernel
// (routerWideKernel: half the fragment loads a product, and m16n8k16) for
// tiles64 such blocks: from a sixth of a block a multiprocessor (384 rows of
// 256 experts). On an H100 (2026-12-06-router5, route_select included):
// qgemm_f64_h 44 us at 512 rows against qgemm_f64's 50; at 64 rows 30
// against 26, so shorter prompts keep qgemm_f64. (With qgemm_f64_w the
// rule was from a third, 1024 rows: 512 rows took 51 us against 50.)
var routerWide = func(tiles64, sms int) bool { return 6*tiles64 >= sms }

// qiShape is a shape of qgemm_i8's block: its module and kernel, tokens
// and weight rows, threads, and what a block counts for in routerSplits (a
// qgemm_f64 block, four a multiprocessor, counts 1).
type qiShape struct {
	family, kernel                string
	tokens, rows, threads, weight int
	groups, stages                int // groups of 64 columns a stage of copies, stages
	parts                         int // x's 8-bit parts: 0 for qgemm_i8's four (route_cert.cu's qgemm_cert: 2)
}

// shared is the block's dynamic shared memory (route_i8.cu's qi_gemm):
// the stages of x's rows and the codes, then for each group of a stage
// x's parts, two float64 a token and two a row.
func (s qiShape) shared() int {
	parts := s.parts
	if parts == 0 {
		parts = 4
	}
	return s.stages*s.groups*(s.tokens*64*4+s.rows*80) + s.groups*(parts*s.tokens*80+s.tokens*16+s.rows*16)
}

// qiShapes are qgemm_i8's shapes by router, the one list of them (the
// routers that have a module of their own, its kernels, router='s
// integer forms), each an instance of route_i8.cu's qi_gemm: qgemm_i8 (32
// tokens x 128 rows, two blocks a multiprocessor, so twice a qgemm_f64
// block) and route_i8w.cu's wider ones.
var qiShapes = map[RouterKernel]qiShape{
	RouterI8:   {"route_i8", "qgemm_i8", 32, 128, 256, 2, 1, 3, 0},
	RouterI8W:  {"route_i8w", "qgemm_i8_w", 32, 256, 512, 4, 1, 3, 0}, // one a multiprocessor
	RouterI8WG: {"route_i8w", "qgemm_i8_wg2", 32, 256, 512, 4, 2, 2, 0},
}

// routerWideWeight is what a qgemm_f64_w block counts for in routerSplits
// (four times a qgemm_f64 block's work): at two, its best split counts
// measured (4 at 1024 rows, 1 at 4096; splitting 4096 rows in two took 243
// us against 226).
const routerWideWeight = 2

// routerSplits: how many ways qgemm_f64 splits the router's groups of 64
// columns for tiles blocks (of 32 x 32 logits, or 64 x 64 for
// qgemm_f64_w): the largest power of two
// that keeps the blocks within routerBlocks, at least two groups a split
// (one loading while the other's products run). On the H200 (2026-12-06-
// stream1, the 35B router with route_select): 64 us at 16 and 512 rows in
// one split, 24 at 16 rows in 16, 48 at 512 in 4, 78 at 1024 in 2 (88).
func routerSplits(tiles, groups, sms int) int {
	s := 1
	for 4*s <= groups && 2*s*tiles <= routerBlocks(sms) {
		s *= 2
	}
	return s
}

func (b *Backend) experts(p *program, c *checks, o *backend.Experts) ([]step, error) {
	return b.expertsFrom(p, c, o, false)
}

// errNoBF16Copy: expertsFrom was given a bf16 copy of x that its lowering
// does not take (not the tensor-core path); normMoESteps then leaves the
// ops to be lowered apart.
var errNoBF16Copy = errors.New("cuda: the experts' x in bf16, but not on the tensor-core path")

// expertsFrom is experts where xbMade says a norm already wrote x's bf16
// copy at the scratch's start, where the tensor-core path reads it.
func (b *Backend) expertsFrom(p *program, c *checks, o *backend.Experts, xbMade bool) ([]step, error) {
	names := []string{"gate", "up", "shared gate", "shared up", "shared expert gate", "down", "shared down"}
	var ws []*matrix
	for i, m := range []backend.Matrix{o.Gate, o.Up, o.SharedGate, o.SharedUp, o.SharedExpertGate, o.Down, o.SharedDown} {
		ws = append(ws, c.mat("the "+names[i]+" matrix", m))
	}
	if c.err != nil {
		return nil, c.err
	}
	gate, up, sg, su, seg, down, sd := ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
	E, H, I, SI := max(gate.shape.Experts, 1), gate.q.Cols, o.Inter, o.SharedInter
	for _, m := range []struct {
		name       string
		w          *matrix
		rows, cols int
	}{
		{"gate", gate, E * I, H}, {"up", up, E * I, H}, {"down", down, E * H, I},
		{"shared gate", sg, SI, H}, {"shared up", su, SI, H}, {"shared down", sd, H, SI}, {"shared expert gate", seg, 1, H},
	} {
		c.require(m.w.q.Rows == m.rows && m.w.q.Cols == m.cols, "the %s matrix is %dx%d, want %dx%d", m.name, m.w.q.Rows, m.w.q.Cols, m.rows, m.cols)
	}
	c.require(o.TopK >= 1 && o.TopK <= E, "top-%d of %d experts", o.TopK, E)
	x := c.buf("x", o.X, backend.F32, o.Rows*H)
	idx := c.buf("the expert ids", o.Idx, backend.I32, o.Rows*o.TopK)
	wts := c.buf("the weights", o.Weights, backend.F32, o.Rows*o.TopK)
	out := c.buf("the output", o.Out, backend.F32, o.Rows*H)
	if c.err != nil || o.Rows == 0 {
		return nil, c.err
	}
	if steps, ok := b.expertsTC(p, o, gate, up, down, sg, su, seg, sd, x, idx, wts, out, xbMade); ok {
		return steps, nil
	}
	if xbMade {
		return nil, errNoBF16Copy
	}
	var off int64
	if mw, ok := b.decodeMoE(o, ws, x); ok {
		hOff := p.reserve(&off, 4*int64((MoETopK+1)*I))
		lOff := p.reserve(&off, 16)
		p.zerosNeed = max(p.zerosNeed, 4*int64(H))
		bufs := func() MoEBuffers {
			return MoEBuffers{X: x, IDs: idx, Weights: wts, H: p.scratch.Add(hOff), Logit: p.scratch.Add(lOff), Resid: p.zeros, Out: out}
		}
		return []step{
			{kernels: 1, name: "moe_gate_up", launch: func(s *driver.Stream) error { return b.moe.LaunchGateUp(s, mw, bufs()) }},
			{kernels: 1, name: "moe_down", launch: func(s *driver.Stream) error { return b.moe.LaunchDown(s, mw, bufs()) }},
		}, nil
	}
	// the table of the seven matrices the plain kernels read
	var table []byte
	for _, w := range ws {
		table = append(table, w.raw[:]...)
	}
	tOff := p.constant(table)
	per := o.TopK*I + SI
	hOff := p.reserve(&off, 4*int64(o.Rows*per))
	lOff := p.reserve(&off, 4*int64(o.Rows))
	rows, topK := o.Rows, o.TopK
	tasks := rows * (per + 1)
	return []step{
		{kernels: 1, name: "experts_gate_up", launch: func(s *driver.Stream) error {
			var a driver.Args
			a.Ptr(p.consts.Add(tOff)).Ptr(idx).Ptr(x).Ptr(p.scratch.Add(hOff)).Ptr(p.scratch.Add(lOff)).
				I32(int32(rows)).I32(int32(topK)).I32(int32(I)).I32(int32(SI))
			return s.Launch(b.fn["experts_gate_up"], driver.D1(ceil(tasks, 8)), driver.D1(256), 0, &a)
		}},
		{kernels: 1, name: "experts_down", launch: func(s *driver.Stream) error {
			var a driver.Args
			a.Ptr(p.consts.Add(tOff)).Ptr(idx).Ptr(wts).Ptr(p.scratch.Add(hOff)).Ptr(p.scratch.Add(lOff)).Ptr(out).
				I32(int32(rows)).I32(int32(H)).I32(int32(topK)).I32(int32(I)).I32(int32(SI))
			return s.Launch(b.fn["experts_down"], driver.D1(ceil(rows*H, 8)), driver.D1(256), 0, &a)
		}},
	}, nil
}

// decodeMoE gives the MoE weights of an Experts op that the decode kernels
// of moe.cu take (one row, top-8, 4-bit matrices in groups of 64 with
// their interleaved scales and biases, an 8-bit shared expert gate, the
// shared expert as wide as a routed one), with Options.Fused on; ws are its
// matrices in experts()'s order, checked.
func (b *Backend) decodeMoE(o *backend.Experts, ws []*matrix, x driver.Ptr) (*MoEWeights, bool) {
	gate, up, sg, su, seg, down, sd := ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
	E, H, I, SI := max(gate.shape.Experts, 1), gate.q.Cols, o.Inter, o.SharedInter
	fourBit := func(w *matrix) bool { return w.q.Bits == 4 && w.q.GroupSize == 64 && w.q.ScaleBias != 0 }
	if !b.o.Fused || o.Rows != 1 || o.TopK != MoETopK || E < MoETopK || SI != I || H%64 != 0 || I%64 != 0 || x%16 != 0 ||
		!fourBit(gate) || !fourBit(up) || !fourBit(down) || !fourBit(sg) || !fourBit(su) || !fourBit(sd) ||
		seg.q.Bits != 8 || seg.q.GroupSize != 64 {
		return nil, false
	}
	return &MoEWeights{Experts: E, Hidden: H, Inter: I, Gate: gate.q, Up: up.q, Down: down.q,
		SharedGate: sg.q, SharedUp: su.q, SharedDown: sd.q, SharedExpertGate: seg.q}, true
}

// sampleParts is SAMPLE_PARTS of sample.cu: sample_prep's blocks, each
// leaving its best token and finite check for sample_row.
const sampleParts = 128

// sampleFastK is SAMPLE_FAST_K of sample.cu: the largest top-k of the fast
// path, where sample_prep's blocks each leave their k best keys and
// sample_row sorts those; sampleFastKeys is the bytes of their keys (a
// scratch buffer, and sample_row's dynamic shared memory).
const (
	sampleFastK    = 64
	sampleFastKeys = 8 * sampleParts * sampleFastK
)

func (b *Backend) sampleOp(p *program, c *checks, o *backend.Sample) ([]step, error) {
	V := o.Vocab
	c.require(V >= 1, "a vocabulary of %d tokens", V)
	logits := c.buf("the logits", o.Logits, backend.F32, V)
	params := c.buf("the parameters", o.Params, backend.F32, backend.SampleParamCount)
	config := c.buf("the configuration", o.Config, backend.I32, backend.SampleConfigCount)
	counts := c.buf("the counts", o.Counts, backend.I32, V)
	prompt := c.buf("the prompt flags", o.InPrompt, backend.I32, V)
	tok := c.buf("the token", o.Token, backend.I32, 1)
	status := c.buf("the status", o.Status, backend.I32, 2)
	if c.err != nil {
		return nil, c.err
	}
	var off int64
	xOff, wOff := p.reserve(&off, 4*int64(V)), p.reserve(&off, 4*int64(V))
	partOff := p.reserve(&off, 16*sampleParts)
	candOff := p.reserve(&off, sampleFastKeys)
	fastOn, fastShared := int32(0), 0
	if b.o.SamplerTopK {
		fastOn, fastShared = 1, sampleFastKeys
	}
	// the scratch's address is known once the program is compiled
	return []step{
		{kernels: 1, name: "sample_prep", launch: func(s *driver.Stream) error {
			var a driver.Args
			a.Ptr(logits).Ptr(params).Ptr(config).Ptr(counts).Ptr(prompt).Ptr(p.scratch.Add(xOff)).Ptr(p.scratch.Add(partOff)).
				Ptr(p.scratch.Add(candOff)).I32(fastOn).I32(int32(V))
			return s.Launch(b.fn["sample_prep"], driver.D1(sampleParts), driver.D1(256), 0, &a)
		}},
		{kernels: 1, name: "sample_row", launch: func(s *driver.Stream) error {
			var a driver.Args
			a.Ptr(params).Ptr(config).Ptr(counts).Ptr(tok).Ptr(status).Ptr(p.scratch.Add(xOff)).Ptr(p.scratch.Add(wOff)).
				Ptr(p.scratch.Add(partOff)).Ptr(p.scratch.Add(candOff)).I32(fastOn).I32(int32(V))
			return s.Launch(b.fn["sample_row"], driver.D1(1), driver.D1(1024), fastShared, &a)
		}},
	}, nil
}

func (b *Backend) logprobsOp(c *checks, o *backend.Logprobs) ([]step, error) {
	V, N := o.Vocab, o.TopN
	c.require(V >= 1, "a vocabulary of %d tokens", V)
	c.require(N >= 0 && N <= V, "top %d of a %d-token vocabulary", N, V)
	logits := c.buf("the logits", o.Logits, backend.F32, V)
	tok := c.buf("the token", o.Token, backend.I32, 1)
	out := c.buf("the output", o.Out, backend.F32, 1+N)
	var top driver.Ptr
	if N > 0 {
		top = c.buf("the top ids", o.TopIDs, backend.I32, N)
	}
	if c.err != nil {
		return nil, c.err
	}
	return []step{b.launch("logprobs_row", driver.D1(1), driver.D1(1024), 0, func(a *driver.Args) {
		a.Ptr(logits).Ptr(tok).Ptr(out).Ptr(top).I32(int32(V)).I32(int32(N))
	})}, nil
}

// normRouteKernel names the add-and-norm and router of one token in one
// launch (route.cu's route_norm).
const normRouteKernel = "route_norm"

// normRouteStep lowers ops[i:i+2] to route_norm when they are an
// AddRMSNorm of one row and the Route of one token that reads its output
// (the post-attention norm and the MoE's router), with the router's
// shapes the decode kernel takes and Options.FusedNorms on. The kernel
// writes all that both ops write, the normed row bit for bit as
// add_rmsnorm does, so no later op can tell.
func (b *Backend) normRouteStep(p *program, i int) (step, bool) {
	if !b.o.Fused || !b.o.FusedNorms || i+1 >= len(p.ops) {
		return step{}, false
	}
	n, ok1 := p.ops[i].(*backend.AddRMSNorm)
	r, ok2 := p.ops[i+1].(*backend.Route)
	if !ok1 || !ok2 || n.Rows != 1 || r.Rows != 1 || n.Out != r.X {
		return step{}, false
	}
	ch := &checks{b: b}
	w := ch.mat("the router", r.Router)
	if w == nil {
		return step{}, false
	}
	q := w.q
	E, C := q.Rows, q.Cols
	if !routeFits(q, r.TopK) || n.Dim != C {
		return step{}, false
	}
	rn := RouteNorm{H: ch.buf("h", n.H, backend.F32, C), W: ch.buf("the weight", n.Weight, backend.F32, C),
		Out: ch.buf("the output", n.Out, backend.F32, C), Eps: n.Eps}
	if n.Delta.Mem != nil {
		rn.Delta = ch.buf("the delta", n.Delta, backend.F32, C)
	}
	idx := ch.buf("the expert ids", r.Idx, backend.I32, r.TopK)
	wts := ch.buf("the weights", r.Weights, backend.F32, r.TopK)
	if ch.err != nil {
		return step{}, false // the plain lowering says what is wrong
	}
	var off int64
	lOff := p.reserve(&off, 4*int64(E))
	topK, normalize := r.TopK, r.Normalize
	return step{kernels: 1, name: normRouteKernel, launch: func(s *driver.Stream) error {
		bufs := RouteBuffers{Logits: p.scratch.Add(lOff), Counter: b.counter, IDs: idx, Weights: wts}
		return b.route.LaunchNorm(s, q, bufs, rn, topK, normalize)
	}}, true
}

// moeLayerKernel names the add-and-norm, router and experts of one token in
// one launch (moe.cu's moe_layer).
const moeLayerKernel = "moe_layer"

// moeLayerStep lowers ops[i:i+3] to moe_layer when they are an AddRMSNorm
// of one row, the Route that reads its output and the Experts that read
// it and the routing (the post-attention norm and the MoE block of a
// decoded token), the router's and the experts' shapes are the decode
// kernels', and Options.MoELayer, Fused and FusedNorms are on. The kernel
// writes all that the three ops write, bit for bit as route_norm,
// moe_gate_up and moe_down do.
func (b *Backend) moeLayerStep(p *program, i int) (step, bool) {
	if !b.o.Fused || !b.o.FusedNorms || !b.o.MoELayer || i+2 >= len(p.ops) {
		return step{}, false
	}
	n, ok1 := p.ops[i].(*backend.AddRMSNorm)
	r, ok2 := p.ops[i+1].(*backend.Route)
	e, ok3 := p.ops[i+2].(*backend.Experts)
	if !ok1 || !ok2 || !ok3 || n.Rows != 1 || r.Rows != 1 || e.Rows != 1 || n.Out != r.X || e.X != n.Out ||
		e.Idx != r.Idx || e.Weights != r.Weights || r.TopK != MoETopK {
		return step{}, false
	}
	ch := &checks{b: b}
	w := ch.mat("the router", r.Router)
	var ws []*matrix
	for _, m := range []backend.Matrix{e.Gate, e.Up, e.SharedGate, e.SharedUp, e.SharedExpertGate, e.Down, e.SharedDown} {
		ws = append(ws, ch.mat("an expert matrix", m))
	}
	if ch.err != nil {
		return step{}, false // the plain lowering says what is wrong
	}
	q := w.q
	E, C := q.Rows, q.Cols
	if !routeFits(q, r.TopK) || n.Dim != C || !b.moe.HasLayer(q.Bits) {
		return step{}, false
	}
	x := ch.buf("x", n.Out, backend.F32, C)
	mw, ok := b.decodeMoE(e, ws, x)
	if !ok || mw.Experts != E || mw.Hidden != C {
		return step{}, false
	}
	if _, _, _, _, err := b.moe.layerShape(mw, q); err != nil {
		return step{}, false
	}
	bufs := MoELayerBuffers{H: ch.buf("h", n.H, backend.F32, C), NormW: ch.buf("the weight", n.Weight, backend.F32, C), X: x,
		IDs: ch.buf("the expert ids", r.Idx, backend.I32, r.TopK), Weights: ch.buf("the weights", r.Weights, backend.F32, r.TopK),
		Out: ch.buf("the output", e.Out, backend.F32, C), Counter: b.counter, Eps: n.Eps}
	if n.Delta.Mem != nil {
		bufs.Delta = ch.buf("the delta", n.Delta, backend.F32, C)
	}
	if ch.err != nil {
		return step{}, false
	}
	var off int64
	lOff := p.reserve(&off, 4*int64(E))
	aOff := p.reserve(&off, 4*int64((MoETopK+1)*mw.Inter))
	gOff := p.reserve(&off, 16)
	p.zerosNeed = max(p.zerosNeed, 4*int64(C))
	normalize := r.Normalize
	return step{kernels: 1, name: moeLayerKernel, launch: func(s *driver.Stream) error {
		bb := bufs
		bb.Logits, bb.Act, bb.Logit, bb.Resid = p.scratch.Add(lOff), p.scratch.Add(aOff), p.scratch.Add(gOff), p.zeros
		return b.moe.LaunchLayer(s, mw, q, bb, normalize)
	}}, true
}

// normGroupKernel names the add-and-norm and grouped mat-vec of one token
// in one launch (qmv.cu's qmv_group_norm).
const normGroupKernel = "qmv_group_norm"

// normGroupStep lowers ops[i:i+2] to qmv_group_norm when they are an
// AddRMSNorm of one row and the QLinearGroup of one token that reads its
// output (a layer's input norm and its first projections) and the grouped
// mat-vec takes the matrices, with Options.FusedNorms on. The kernel
// writes all that both ops write, the normed row bit for bit as
// add_rmsnorm does.
func (b *Backend) normGroupStep(p *program, i int) (step, bool) {
	if !b.o.Fused || !b.o.FusedNorms || !b.qmv.GroupedNorm() || i+1 >= len(p.ops) {
		return step{}, false
	}
	n, ok1 := p.ops[i].(*backend.AddRMSNorm)
	g, ok2 := p.ops[i+1].(*backend.QLinearGroup)
	if !ok1 || !ok2 || n.Rows != 1 || g.Rows != 1 || n.Out != g.X || len(g.W) < 2 || len(g.W) > QMVGroupMax {
		return step{}, false
	}
	ch := &checks{b: b}
	ws := make([]*matrix, len(g.W))
	for j, m := range g.W {
		if ws[j] = ch.mat(fmt.Sprintf("matrix %d", j), m); ws[j] == nil {
			return step{}, false
		}
	}
	off := g.Offsets()
	y := ch.buf("y", g.Y, backend.F32, off[len(ws)])
	qn := QMVNorm{H: ch.buf("h", n.H, backend.F32, n.Dim), W: ch.buf("the weight", n.Weight, backend.F32, n.Dim),
		Out: ch.buf("the output", n.Out, backend.F32, n.Dim), Eps: n.Eps, Counter: b.counter}
	if n.Delta.Mem != nil {
		qn.Delta = ch.buf("the delta", n.Delta, backend.F32, n.Dim)
	}
	if ch.err != nil || n.Dim != ws[0].q.Cols || qn.H%16 != 0 {
		return step{}, false
	}
	ys := make([]driver.Ptr, len(ws))
	for j := range ws {
		ys[j] = y.Add(4 * int64(off[j]))
	}
	table, total, cols, ok := groupTable(ws, ys)
	if !ok {
		return step{}, false
	}
	return step{kernels: 1, name: normGroupKernel, launch: func(s *driver.Stream) error {
		return b.qmv.LaunchGroupNorm(s, table, qn, total, cols)
	}}, true
}

// gdnKernel names the fused Gated DeltaNet step.
const gdnKernel = "gdn_step"

// gdnStep lowers ops[i:i+3] to the Gated DeltaNet kernel of one token
// (gdn.cu: conv and SiLU, norms and gates, the delta rule, the gated norm
// in one launch) when they are ConvSiLU, DeltaRule and GatedRMSNorm of one
// row chained through their outputs, with heads of 128, a conv of width 4,
// and no later op of the program reading the two intermediate outputs,
// which the kernel never writes.
func (b *Backend) gdnStep(p *program, i int) (step, bool) {
	if !b.o.Fused {
		return step{}, false
	}
	c, d, g, ok := backend.DeltaNetStep(p.ops, i, GDNHeadDim, GDNConvK)
	if !ok {
		return step{}, false
	}
	ch := &checks{b: b}
	C, Hk, Hv := c.Chans, d.KeyHeads, d.ValueHeads
	bufs := GDNBuffers{
		QKV: ch.buf("qkv", c.X, backend.F32, C), Z: ch.buf("z", g.Z, backend.F32, Hv*GDNHeadDim),
		B: ch.buf("b", d.B, backend.F32, Hv), A: ch.buf("a", d.A, backend.F32, Hv),
		ConvW:     ch.buf("the conv weights", c.Weight, backend.F32, C*GDNConvK),
		ConvState: ch.buf("the conv state", c.State, backend.F32, (GDNConvK-1)*C),
		ALog:      ch.buf("A_log", d.ALog, backend.F32, Hv), DtBias: ch.buf("dt_bias", d.DtBias, backend.F32, Hv),
		NormW: ch.buf("the norm weight", g.Weight, backend.F32, GDNHeadDim),
		State: ch.buf("the state", d.State, backend.F32, Hv*GDNHeadDim*GDNHeadDim),
		Out:   ch.buf("the output", g.Out, backend.F32, Hv*GDNHeadDim),
	}
	if ch.err != nil || bufs.ConvW%16 != 0 || bufs.State%16 != 0 {
		return step{}, false // the plain kernels say what is wrong
	}
	counters, err := b.grow(&b.tickets, 4*int64(Hk+Hv), "Gated DeltaNet tickets")
	if err != nil {
		return step{}, false
	}
	bufs.Counters = counters
	eps := g.Eps
	return step{kernels: 1, name: gdnKernel, launch: func(s *driver.Stream) error {
		return b.gdn.Launch(s, bufs, Hk, Hv, eps)
	}}, true
}
