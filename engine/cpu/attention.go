package cpu

import (
	"fmt"
	"math"

	"petal/engine/backend"
	"petal/engine/parallel"
)

// prepTask: q/k RMSNorm, partial RoPE at the chunk's positions, K and V
// into the caches. One task per (token, head), query heads first.
type prepTask struct {
	o                           *backend.QKPrep
	pos0                        int
	qg, k, v, q, qn, kn, kc, vc []float32
	kh, vh                      []uint16      // 16-bit caches instead of kc, vc
	cacheType                   backend.DType // of the caches
	cos, sin                    []float64     // [Rows][RotaryDim/2]: the rotations of the chunk's positions
}

// maxWideHead is the longest head a 16-bit KV cache may have on the CPU:
// its rows are widened into buffers on the kernels' stacks.
const maxWideHead = 512

func (b *Backend) qkPrep(o *backend.QKPrep) error {
	t := &b.tasks.prep
	t.o, t.qg, t.k, t.v, t.q = o, F(o.QG), F(o.K), F(o.V), F(o.Q)
	t.qn, t.kn = F(o.QNorm), F(o.KNorm)
	t.cacheType = o.KCache.Type
	var err error
	if t.pos0, err = position(o.Pos, o.Rows, o.KVHeads*o.HeadDim, o.KCache.Len, o.VCache.Len); err != nil {
		return err
	}
	if t.cacheType == backend.F32 {
		t.kc, t.vc, t.kh, t.vh = F(o.KCache), F(o.VCache), nil, nil
	} else {
		t.kc, t.vc, t.kh, t.vh = nil, nil, H(o.KCache), H(o.VCache)
	}
	t.ropeTables()
	parallel.For(o.Rows*(o.QHeads+o.KVHeads), 8, b.tasks.prepFn)
	return nil
}

// position reads the position of a chunk's first row and checks that its
// rows fit caches of the given lengths (width values a row).
func position(pos backend.Buffer, rows, width int, caches ...int) (int, error) {
	p := int(I(pos)[0])
	for _, n := range caches {
		if p < 0 || (p+rows)*width > n {
			return 0, fmt.Errorf("%d tokens at position %d do not fit a cache of %d", rows, p, n/width)
		}
	}
	return p, nil
}

// ropeTables computes the rotation of pair i at position pos,
// pos·theta^(-2i/rot), once per chunk rather than once per head.
func (t *prepTask) ropeTables() {
	o := t.o
	half := o.RotaryDim / 2
	if n := o.Rows * half; cap(t.cos) < n {
		t.cos, t.sin = make([]float64, n), make([]float64, n)
	}
	t.cos, t.sin = t.cos[:o.Rows*half], t.sin[:o.Rows*half]
	for i := range half {
		inv := math.Pow(o.RopeTheta, -float64(2*i)/float64(o.RotaryDim))
		for r := range o.Rows {
			t.sin[r*half+i], t.cos[r*half+i] = math.Sincos(float64(t.pos0+r) * inv)
		}
	}
}

func (t *prepTask) run(lo, hi int) {
	o := t.o
	D, kvW, heads := o.HeadDim, o.KVHeads*o.HeadDim, o.QHeads+o.KVHeads
	half := o.RotaryDim / 2
	for i := lo; i < hi; i++ {
		r, h := i/heads, i%heads
		pos := t.pos0 + r
		cos, sin := t.cos[r*half:][:half], t.sin[r*half:][:half]
		if h < o.QHeads {
			dst := t.q[r*o.QHeads*D+h*D:][:D]
			rmsNorm(t.qg[r*o.QHeads*2*D+h*2*D:][:D], t.qn, dst, o.Eps)
			rope(dst, cos, sin)
			continue
		}
		h -= o.QHeads
		if t.kh != nil {
			t.cacheRow16(pos*kvW+h*D, r*kvW+h*D, cos, sin)
			continue
		}
		dst := t.kc[pos*kvW+h*D:][:D]
		rmsNorm(t.k[r*kvW+h*D:][:D], t.kn, dst, o.Eps)
		rope(dst, cos, sin)
		copy(t.vc[pos*kvW+h*D:][:D], t.v[r*kvW+h*D:][:D])
	}
}

// cacheRow16 is the K and V rows of one head into 16-bit caches: the key
// computed in float32 as for a float32 cache, then both rounded once.
func (t *prepTask) cacheRow16(at, from int, cos, sin []float64) {
	D := t.o.HeadDim
	var row [maxWideHead]float32
	k := row[:D]
	rmsNorm(t.k[from:][:D], t.kn, k, t.o.Eps)
	rope(k, cos, sin)
	narrow16(k, t.kh[at:][:D], t.cacheType)
	narrow16(t.v[from:][:D], t.vh[at:][:D], t.cacheType)
}

// narrow16 rounds src into the 16-bit values dst of type t.
func narrow16(src []float32, dst []uint16, t backend.DType) {
	if t == backend.BF16 {
		for i, v := range src {
			dst[i] = backend.BF16FromFloat32(v)
		}
		return
	}
	for i, v := range src {
		dst[i] = backend.F16FromFloat32(v)
	}
}

// widen16 sets dst to the 16-bit values src of type t.
func widen16(src []uint16, dst []float32, t backend.DType) {
	if t == backend.BF16 {
		for i, h := range src {
			dst[i] = math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	for i, h := range src {
		dst[i] = backend.Float32FromF16(h)
	}
}

// rope rotates pairs (i, i+len(cos)) of x by the angles whose cosines and
// sines are given.
func rope(x []float32, cos, sin []float64) {
	half := len(cos)
	x1s, x2s := x[:half], x[half:2*half]
	for i := range half {
		x1, x2 := float64(x1s[i]), float64(x2s[i])
		x1s[i] = float32(x1*cos[i] - x2*sin[i])
		x2s[i] = float32(x1*sin[i] + x2*cos[i])
	}
}

// attnTask: causal GQA, then the sigmoid output gate. One task per (token,
// KV head, part of that head's query group): the heads of a part are done
// together, so each K and V row is loaded once for all of them. A part is
// the whole group unless there are too few tasks to keep every core busy
// (decode) or the group has more than attnMaxHeads heads.
type attnTask struct {
	o                  *backend.Attention
	pos0               int
	q, qg, kc, vc, out []float32
	kh, vh             []uint16      // 16-bit caches instead of kc, vc
	cacheType          backend.DType // of the caches
	heads, parts       int           // query heads per part, parts per KV head
}

func (b *Backend) attention(o *backend.Attention) error {
	t := &b.tasks.attn
	t.o, t.q, t.qg, t.out = o, F(o.Q), F(o.QG), F(o.Out)
	t.cacheType = o.KCache.Type
	var err error
	if t.pos0, err = position(o.Pos, o.Rows, o.KVHeads*o.HeadDim, o.KCache.Len, o.VCache.Len); err != nil {
		return err
	}
	if t.cacheType == backend.F32 {
		t.kc, t.vc, t.kh, t.vh = F(o.KCache), F(o.VCache), nil, nil
	} else {
		t.kc, t.vc, t.kh, t.vh = nil, nil, H(o.KCache), H(o.VCache)
	}
	t.heads, t.parts = attnSplit(o.QHeads/o.KVHeads, o.Rows*o.KVHeads, parallel.Workers())
	parallel.For(o.Rows*o.KVHeads*t.parts, 1, b.tasks.attnFn)
	return nil
}

// attnSplit divides a group of query heads into parts (heads each, the last
// part possibly fewer) so that tasks (token, KV head) pairs make work for
// every worker where the group allows.
func attnSplit(group, tasks, workers int) (heads, parts int) {
	parts = ceilDiv(group, attnMaxHeads)
	if tasks < workers {
		parts = max(parts, min(group, ceilDiv(workers, tasks)))
	}
	heads = ceilDiv(group, parts)
	return heads, ceilDiv(group, heads)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (t *attnTask) run(lo, hi int) {
	var s attnScratch
	o := t.o
	D, QH, group := o.HeadDim, o.QHeads, o.QHeads/o.KVHeads
	for i := lo; i < hi; i++ {
		r, kv, part := i/(o.KVHeads*t.parts), i/t.parts%o.KVHeads, i%t.parts
		h0 := kv*group + part*t.heads
		nh := min(t.heads, (kv+1)*group-h0)
		out := t.out[(r*QH+h0)*D:][:nh*D]
		if t.kh != nil {
			t.attend16(&s, t.q[(r*QH+h0)*D:][:nh*D], out, kv, t.pos0+r+1)
		} else {
			t.attend(&s, t.q[(r*QH+h0)*D:][:nh*D], out, kv, t.pos0+r+1)
		}
		for h := range nh {
			gateRow(out[h*D:][:D], t.qg[(r*QH+h0+h)*2*D+D:][:D], s.sums[h])
		}
	}
}

// Keys are scored attnBlock at a time for all heads of a part, into
// scratch on the stack, so the softmax needs no heap memory and takes each
// exponential once: against the running maximum, which a block raises
// (rescaling the head's sums) only when it holds a larger score.
const (
	attnBlock    = 64
	attnMaxHeads = 16
)

type attnScratch struct {
	scores      [attnMaxHeads][attnBlock]float32
	maxes, sums [attnMaxHeads]float32
}

// attend sets out (the heads of q, D floats each) to Σ p·V over the first n
// cache rows of KV head kv, and s.sums to Σ p, where p = exp(score - the
// head's maximum score).
func (t *attnTask) attend(s *attnScratch, q, out []float32, kv, n int) {
	D := t.o.HeadDim
	kvW, nh := t.o.KVHeads*D, len(q)/D
	keys, values := t.kc[kv*D:], t.vc[kv*D:]
	scale := float32(1 / math.Sqrt(float64(D)))
	clear(out)
	for h := range nh {
		s.maxes[h], s.sums[h] = float32(math.Inf(-1)), 0
	}
	for b0 := 0; b0 < n; b0 += attnBlock {
		nb := min(attnBlock, n-b0)
		for j := range nb {
			s.score(q, keys[(b0+j)*kvW:][:D], j, scale)
		}
		for h := range nh {
			s.exponentiate(h, nb, out[h*D:][:D])
		}
		j := 0
		for ; j+4 <= nb; j += 4 {
			v := values[(b0+j)*kvW:]
			for h := range nh {
				p := [4]float32{s.scores[h][j], s.scores[h][j+1], s.scores[h][j+2], s.scores[h][j+3]}
				axpy4(&p, v, kvW, out[h*D:][:D])
			}
		}
		for ; j < nb; j++ {
			v := values[(b0+j)*kvW:][:D]
			for h := range nh {
				axpy(s.scores[h][j], v, out[h*D:][:D])
			}
		}
	}
}

// attend16 is attend over 16-bit caches: each K and V row is widened to
// float32 (exactly) on the stack, and the arithmetic is attend's, so the
// result is that of a float32 cache holding the same values.
func (t *attnTask) attend16(s *attnScratch, q, out []float32, kv, n int) {
	D := t.o.HeadDim
	kvW, nh := t.o.KVHeads*D, len(q)/D
	keys, values := t.kh[kv*D:], t.vh[kv*D:]
	scale := float32(1 / math.Sqrt(float64(D)))
	var krow [maxWideHead]float32
	var vrows [4 * maxWideHead]float32
	k, v4 := krow[:D], vrows[:4*D]
	clear(out)
	for h := range nh {
		s.maxes[h], s.sums[h] = float32(math.Inf(-1)), 0
	}
	for b0 := 0; b0 < n; b0 += attnBlock {
		nb := min(attnBlock, n-b0)
		for j := range nb {
			widen16(keys[(b0+j)*kvW:][:D], k, t.cacheType)
			s.score(q, k, j, scale)
		}
		for h := range nh {
			s.exponentiate(h, nb, out[h*D:][:D])
		}
		j := 0
		for ; j+4 <= nb; j += 4 {
			for c := range 4 {
				widen16(values[(b0+j+c)*kvW:][:D], v4[c*D:][:D], t.cacheType)
			}
			for h := range nh {
				p := [4]float32{s.scores[h][j], s.scores[h][j+1], s.scores[h][j+2], s.scores[h][j+3]}
				axpy4(&p, v4, D, out[h*D:][:D])
			}
		}
		for ; j < nb; j++ {
			widen16(values[(b0+j)*kvW:][:D], v4[:D], t.cacheType)
			for h := range nh {
				axpy(s.scores[h][j], v4[:D], out[h*D:][:D])
			}
		}
	}
}

// score sets column j of the scores of the heads of q to k·q_h*scale. Every
// score comes from a row of dot4, whose arithmetic per row is the same
// whatever the other rows are: a head left over from the fours is scored
// again with the three before it, or, in parts of fewer than four heads,
// as four copies of itself. So a score does not depend on how the group
// was split, and neither do the results on the number of cores.
func (s *attnScratch) score(q, k []float32, j int, scale float32) {
	D := len(k)
	nh := len(q) / D
	var d [4]float32
	h := 0
	for ; h+4 <= nh; h += 4 {
		dot4(q[h*D:], D, k, &d)
		for c, v := range d {
			s.scores[h+c][j] = v * scale
		}
	}
	if h < nh && nh >= 4 {
		dot4(q[(nh-4)*D:], D, k, &d)
		for c, v := range d[4-(nh-h):] {
			s.scores[h+c][j] = v * scale
		}
		return
	}
	for ; h < nh; h++ {
		dot4(q[h*D:], 0, k, &d)
		s.scores[h][j] = d[0] * scale
	}
}

// exponentiate turns head h's first nb scores into p = exp(score - max),
// adding them to its sum; a new maximum first rescales the sum and acc.
func (s *attnScratch) exponentiate(h, nb int, acc []float32) {
	sc := s.scores[h][:nb]
	m := max(s.maxes[h], maxOf(sc))
	if m > s.maxes[h] && s.sums[h] != 0 {
		c := float32(math.Exp(float64(s.maxes[h] - m)))
		s.sums[h] *= c
		for j := range acc {
			acc[j] *= c
		}
	}
	s.maxes[h] = m
	s.sums[h] += expShiftSum(sc, m)
}
