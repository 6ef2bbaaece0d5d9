package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// attn35B is the 35B model's attention: 16 query heads on 2 KV heads of
// 256 dims, 64 rotary dims, theta 1e7.
func attn35B(maxPos int, kv KVType) AttnShape {
	return AttnShape{QHeads: 16, KVHeads: 2, RotaryDim: 64, RopeTheta: 1e7, Eps: 1e-6, MaxPos: maxPos, KV: kv}
}

// attnCase is one layer's attention on the device with its host copies.
type attnCase struct {
	sh         AttnShape
	qg, k, v   []float32
	qn, kn     []float32
	kc, vc     []float32 // the cache rows as the device holds them, widened
	b          AttnBuffers
	q, out     devBuf
	kcp, vcp   driver.Ptr
	rowFloats  int
	cacheWords int64
}

const bf16NaNPair = 0x7fc07fc0

// newAttnCase makes random inputs and a cache of rows 0..pos-1 (the rest
// poisoned), on the device.
func newAttnCase(t testing.TB, c *driver.Context, s *driver.Stream, k *Attn, rng *rand.Rand, sh AttnShape, pos int) *attnCase {
	t.Helper()
	D := AttnHeadDim
	a := &attnCase{sh: sh, rowFloats: sh.KVHeads * D}
	a.qg = randomVector(rng, sh.QHeads*2*D)
	a.k, a.v = randomVector(rng, sh.KVHeads*D), randomVector(rng, sh.KVHeads*D)
	a.qn, a.kn = randomVector(rng, D), randomVector(rng, D)
	for i := range a.qn {
		a.qn[i] = 1 + 0.1*a.qn[i]
		a.kn[i] = 1 + 0.1*a.kn[i]
	}
	rows := pos + 1
	a.kc = randomVector(rng, rows*a.rowFloats)
	a.vc = randomVector(rng, rows*a.rowFloats)
	a.cacheWords = int64(sh.MaxPos*a.rowFloats*sh.KV.Bytes()) / 4
	alloc := func(label string) driver.Ptr {
		p, err := c.Alloc(4*a.cacheWords, label)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Free(p) })
		return p
	}
	a.kcp, a.vcp = alloc("k cache"), alloc("v cache")
	a.poisonCache(t, s)
	for _, cache := range []struct {
		P driver.Ptr
		v []float32
	}{{a.kcp, a.kc}, {a.vcp, a.vc}} {
		old := cache.v[:pos*a.rowFloats]
		var err error
		if sh.KV == KVF32 {
			err = s.CopyToDevice(cache.P, bytesOf(old))
		} else {
			h := make([]uint16, len(old))
			for i, f := range old {
				h[i] = quant.ToBF16(f)
				old[i] = math.Float32frombits(uint32(h[i]) << 16)
			}
			err = s.CopyToDevice(cache.P, bytesOf(h))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	po, pml := k.PartialsBytes(sh)
	partO, partML := newBuf(t, c, s, int(po/4), "partials o"), newBuf(t, c, s, int(pml/4), "partials m, l")
	a.q, a.out = newBuf(t, c, s, sh.QHeads*D, "q"), newBuf(t, c, s, sh.QHeads*D, "out")
	a.b = AttnBuffers{
		QG: upBuf(t, c, s, a.qg, "qg").P, K: upBuf(t, c, s, a.k, "k").P, V: upBuf(t, c, s, a.v, "v").P,
		QNorm: upBuf(t, c, s, a.qn, "q norm").P, KNorm: upBuf(t, c, s, a.kn, "k norm").P,
		InvFreq: upBuf(t, c, s, sh.InvFreq(), "inv freq").P, Q: a.q.P, KCache: a.kcp, VCache: a.vcp,
		Pos: upBuf(t, c, s, []int32{int32(pos)}, "pos").P, PartO: partO.P, PartML: partML.P, Out: a.out.P,
	}
	return a
}

func (a *attnCase) poisonCache(t testing.TB, s *driver.Stream) {
	for _, p := range []driver.Ptr{a.kcp, a.vcp} {
		if err := s.Fill32(p, map[KVType]uint32{KVF32: nanBits, KVBF16: bf16NaNPair}[a.sh.KV], a.cacheWords); err != nil {
			t.Fatal(err)
		}
	}
}

// cacheRow reads row r of a device cache, widened.
func (a *attnCase) cacheRow(t testing.TB, s *driver.Stream, p driver.Ptr, r int) []float32 {
	t.Helper()
	out := make([]float32, a.rowFloats)
	if a.sh.KV == KVF32 {
		if err := s.CopyToHost(bytesOf(out), p.Add(int64(4*r*a.rowFloats))); err != nil {
			t.Fatal(err)
		}
	} else {
		h := make([]uint16, a.rowFloats)
		if err := s.CopyToHost(bytesOf(h), p.Add(int64(2*r*a.rowFloats))); err != nil {
			t.Fatal(err)
		}
		for i, v := range h {
			out[i] = math.Float32frombits(uint32(v) << 16)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	return out
}

// prepReference is QKPrep of spec 2.4 steps 3-4 in float64: the queries and
// the key row at pos.
func (a *attnCase) prepReference(pos int) (q, key []float64) {
	D := AttnHeadDim
	for h := range a.sh.QHeads {
		x := backendtest.RMSNorm(widen64(a.qg[h*2*D:h*2*D+D]), a.qn, a.sh.Eps)
		backendtest.Rope(x, pos, a.sh.RotaryDim, a.sh.RopeTheta)
		q = append(q, x...)
	}
	for g := range a.sh.KVHeads {
		x := backendtest.RMSNorm(widen64(a.k[g*D:(g+1)*D]), a.kn, a.sh.Eps)
		backendtest.Rope(x, pos, a.sh.RotaryDim, a.sh.RopeTheta)
		key = append(key, x...)
	}
	return q, key
}

func widen64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// checkPrep compares the prepared queries and the cache row at pos with
// the reference, and that row's value with v (rounded as the cache holds it).
func (a *attnCase) checkPrep(t testing.TB, s *driver.Stream, pos int, label string) []float32 {
	t.Helper()
	wantQ, wantK := a.prepReference(pos)
	gotQ := a.q.Floats(t, s, "q")
	gotK, gotV := a.cacheRow(t, s, a.kcp, pos), a.cacheRow(t, s, a.vcp, pos)
	eq := maxRelErr(gotQ, wantQ)
	// A float32 row is held to its largest element, as q is: the rotation's
	// sums of terms near 1 leave an element near 0 a few float32 roundings
	// of 1 off, which against that element alone was up to 1.8e-5 (verify16).
	// A bf16 row is held element by element to bf16's rounding.
	kTol, kHow, ek := 1e-5, "of max|k|", 0.0
	if a.sh.KV == KVBF16 {
		kTol, kHow = 1.0/256, "relative, element by element"
		for i, w := range wantK {
			ek = max(ek, math.Abs(float64(gotK[i])-w)/(math.Abs(w)+1e-3))
		}
	} else {
		ek = maxRelErr(gotK, wantK)
	}
	for i, v := range a.v {
		want := v
		if a.sh.KV == KVBF16 {
			want = math.Float32frombits(uint32(quant.ToBF16(v)) << 16)
		}
		if gotV[i] != want {
			t.Fatalf("%s: v cache row %d [%d] = %v, want %v", label, pos, i, gotV[i], want)
		}
	}
	t.Logf("%-32s prep: q max error %.2g of max|q|; k max error %.2g %s", label, eq, ek, kHow)
	if !(eq <= 1e-5) || !(ek <= kTol) {
		t.Errorf("%s: q off by %.2g (tolerance 1e-5), k by %.2g (tolerance %g)", label, eq, ek, kTol)
	}
	return gotK
}

// TestAttnMatchesReference runs QKPrep and the split attention at contexts
// 1, 17, 1000, 4109 and 32768 with both KV types, and with small splits
// that leave chunks empty, against the float64 references; outputs and the
// cache rows past the context poisoned.
func TestAttnMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	k, err := NewAttn(c, loadModule(t, LoadAttnModule, c))
	if err != nil {
		t.Fatal(err)
	}
	rng := freshRNG(t)
	type split struct{ max, min int }
	def := split{k.MaxSplits, k.MinChunk}
	for _, kv := range []KVType{KVBF16, KVF32} {
		for _, n := range []int{1, 17, 1000, 4096 + 13, 32768} {
			splits := []split{def}
			if n == 17 || n == 1000 {
				splits = append(splits, split{7, 1}, split{3, 300})
			}
			for _, sp := range splits {
				k.MaxSplits, k.MinChunk = sp.max, sp.min
				pos := n - 1
				sh := attn35B(n+5, kv)
				a := newAttnCase(t, c, s, k, rng, sh, pos)
				if err := k.Launch(s, sh, a.b); err != nil {
					t.Fatal(err)
				}
				label := fmt.Sprintf("%v n=%d splits %d/%d", kv, n, sp.max, sp.min)
				gotK := a.checkPrep(t, s, pos, label)
				copy(a.kc[pos*a.rowFloats:], gotK)
				copy(a.vc[pos*a.rowFloats:], a.cacheRow(t, s, a.vcp, pos))
				gotQ := a.q.Floats(t, s, "q")
				want := backendtest.Attention(gotQ, a.qg, a.kc, a.vc, pos, 1, sh.QHeads, sh.KVHeads, AttnHeadDim)
				got := a.out.Floats(t, s, "out")
				e := maxRelErr(got, want)
				t.Logf("%-32s attention: max error %.2g of max|out|, relative L2 %.2g", label, e, relL2(got, want))
				if !(e <= 2e-5) {
					t.Errorf("%s: attention off by %.2g of max|out| (tolerance 2e-5)", label, e)
				}
			}
		}
	}
	k.MaxSplits, k.MinChunk = def.max, def.min
}

// TestQKPrepLongPositions checks RoPE at positions near and past 128K (a
// float32 angle would be off by hundredths of a radian there), and that a
// position past the cache writes nothing.
func TestQKPrepLongPositions(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	k, err := NewAttn(c, loadModule(t, LoadAttnModule, c))
	if err != nil {
		t.Fatal(err)
	}
	rng := freshRNG(t)
	for _, kv := range []KVType{KVF32, KVBF16} {
		for _, pos := range []int{131071, 131072 + 777, 262143} {
			sh := attn35B(pos+1, kv)
			a := newAttnCase(t, c, s, k, rng, sh, 0)
			if err := s.CopyToDevice(a.b.Pos, bytesOf([]int32{int32(pos)})); err != nil {
				t.Fatal(err)
			}
			if err := k.LaunchPrep(s, sh, a.b); err != nil {
				t.Fatal(err)
			}
			a.checkPrep(t, s, pos, fmt.Sprintf("%v pos=%d", kv, pos))
		}
		// Past the cache: the queries are prepared, the cache untouched.
		sh := attn35B(40, kv)
		a := newAttnCase(t, c, s, k, rng, sh, 0)
		if err := s.CopyToDevice(a.b.Pos, bytesOf([]int32{40})); err != nil {
			t.Fatal(err)
		}
		if err := k.LaunchPrep(s, sh, a.b); err != nil {
			t.Fatal(err)
		}
		a.q.Floats(t, s, "q")
		w := make([]uint32, a.cacheWords)
		for _, p := range []driver.Ptr{a.kcp, a.vcp} {
			if err := s.CopyToHost(bytesOf(w), p); err != nil {
				t.Fatal(err)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			for i, x := range w {
				if x != map[KVType]uint32{KVF32: nanBits, KVBF16: bf16NaNPair}[kv] {
					t.Fatalf("%v: position 40 of a 40-row cache wrote word %d", kv, i)
				}
			}
		}
	}
}
