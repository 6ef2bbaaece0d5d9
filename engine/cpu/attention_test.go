package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
)

// TestAttentionMatchesPlain covers groups that split into parts (decode,
// more than attnMaxHeads heads), leftover heads outside dot4's fours,
// keys past one block and head sizes off the vector width.
func TestAttentionMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ rows, pos0, qh, kvh, d int }{
		{1, 0, 8, 1, 256},   // first decode step
		{1, 200, 8, 2, 64},  // decode over several blocks
		{5, 60, 6, 2, 33},   // chunk crossing a block edge, groups of 3
		{3, 130, 34, 2, 16}, // groups of 17: parts of 9 and 8 heads
		{70, 0, 4, 4, 8},    // one head per group, a prompt longer than a block
		{2, 9, 7, 1, 7},     // seven heads, odd head size
		{1, 5, 7, 1, 24},    // decode: parts of 4 and 3 heads on two or more cores
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			n, D := c.pos0+c.rows, c.d
			o := &backend.Attention{Rows: c.rows, QHeads: c.qh, KVHeads: c.kvh, HeadDim: D}
			q := randomVec(rng, c.rows*c.qh*D)
			qg := randomVec(rng, c.rows*c.qh*2*D)
			kc, vc := randomVec(rng, n*c.kvh*D), randomVec(rng, n*c.kvh*D)
			for i := range kc {
				kc[i] *= 4 // peaked softmaxes: the block maximum matters
			}
			b := New()
			buf := func(x []float32) backend.Buffer {
				return mustBuf(b, x)
			}
			o.Q, o.QG, o.KCache, o.VCache, o.Pos = buf(q), buf(qg), buf(kc), buf(vc), mustInts(b, int32(c.pos0))
			got := make([]float32, c.rows*c.qh*D)
			for i := range got {
				got[i] = float32(math.NaN())
			}
			o.Out = buf(got)
			if err := b.Run(o); err != nil {
				t.Fatal(err)
			}
			b.Read(o.Out, got)
			want := backendtest.Attention(q, qg, kc, vc, c.pos0, c.rows, c.qh, c.kvh, D)
			for i := range got {
				if d := math.Abs(float64(got[i]) - want[i]); !(d <= 1e-5) {
					t.Fatalf("out[%d] = %v, plain form %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestAttnSplit: parts cover the group, hold at most attnMaxHeads heads,
// and make work for idle cores.
func TestAttnSplit(t *testing.T) {
	for _, c := range []struct{ group, tasks, workers, heads, parts int }{
		{8, 1, 2, 4, 2}, {8, 1, 3, 3, 3}, {8, 1, 16, 1, 8}, {8, 64, 16, 8, 1},
		{16, 2, 8, 4, 4}, {32, 100, 4, 16, 2}, {17, 3, 2, 9, 2}, {1, 1, 8, 1, 1},
	} {
		heads, parts := attnSplit(c.group, c.tasks, c.workers)
		if heads != c.heads || parts != c.parts {
			t.Errorf("group %d, %d tasks, %d workers: %d parts of %d heads, want %d of %d",
				c.group, c.tasks, c.workers, parts, heads, c.parts, c.heads)
		}
		if heads*parts < c.group || heads*(parts-1) >= c.group || heads > attnMaxHeads {
			t.Errorf("group %d: %d parts of %d heads do not split it", c.group, parts, heads)
		}
	}
}

// TestAttentionSplitsAgree: however a group is split into parts (as on
// machines with more or fewer cores), the outputs are the same bits.
func TestAttentionSplitsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	const rows, pos0, qh, kvh, D = 2, 70, 14, 2, 40
	n := pos0 + rows
	o := &backend.Attention{Rows: rows, QHeads: qh, KVHeads: kvh, HeadDim: D}
	q, qg := randomVec(rng, rows*qh*D), randomVec(rng, rows*qh*2*D)
	kc, vc := randomVec(rng, n*kvh*D), randomVec(rng, n*kvh*D)
	var want []float32
	for _, heads := range []int{7, 6, 4, 3, 2, 1} {
		a := attnTask{o: o, pos0: pos0, q: q, qg: qg, kc: kc, vc: vc, out: poison(rows * qh * D)}
		a.heads, a.parts = heads, ceilDiv(qh/kvh, heads)
		a.run(0, rows*kvh*a.parts)
		if want == nil {
			want = a.out
			continue
		}
		sameBits(t, fmt.Sprintf("parts of %d heads against parts of 7", heads), a.out, want)
	}
}

// TestRopeTablesMatchPlain: the per-chunk tables rotate exactly as angles
// computed on the spot (the reference of backendtest, rounded once).
func TestRopeTablesMatchPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const rows, rot, D = 5, 24, 40
	for _, pos0 := range []int{0, 1, 4093} {
		p := prepTask{pos0: pos0, o: &backend.QKPrep{Rows: rows, RotaryDim: rot, RopeTheta: 1e7}}
		p.ropeTables()
		for r := range rows {
			got := randomVec(rng, D)
			plain := make([]float64, D)
			for i, v := range got {
				plain[i] = float64(v)
			}
			rope(got[:rot], p.cos[r*rot/2:][:rot/2], p.sin[r*rot/2:][:rot/2])
			backendtest.Rope(plain, pos0+r, rot, 1e7)
			want := make([]float32, D)
			for i, v := range plain {
				want[i] = float32(v)
			}
			sameBits(t, fmt.Sprintf("position %d", pos0+r), got, want)
		}
	}
}

// BenchmarkAttention: the oracle model's attention (8 query heads on one
// KV head of 256) for the last 256-token chunk of a 1024-token prompt, and
// for one decoded token after it.
func BenchmarkAttention(b *testing.B) {
	for _, c := range []struct {
		name       string
		rows, pos0 int
	}{{"chunk256", 256, 768}, {"decode", 1, 1024}} {
		b.Run(c.name, func(b *testing.B) {
			const qh, D = 8, 256
			n := c.pos0 + c.rows
			rng := rand.New(rand.NewPCG(1, 7))
			be := New()
			buf := func(x []float32) backend.Buffer {
				return mustBuf(be, x)
			}
			o := &backend.Attention{Q: buf(randomVec(rng, c.rows*qh*D)), QG: buf(randomVec(rng, c.rows*qh*2*D)),
				KCache: buf(randomVec(rng, n*D)), VCache: buf(randomVec(rng, n*D)), Out: buf(make([]float32, c.rows*qh*D)),
				Pos: mustInts(be, int32(c.pos0)), Rows: c.rows, QHeads: qh, KVHeads: 1, HeadDim: D}
			for range b.N {
				if err := be.Run(o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
