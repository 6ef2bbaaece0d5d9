package cuda

import (
	"fmt"
	"math"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
)

// TestQKRowsMatchPrep: under qkrows=warp a prompt chunk's QKPrep (qk_rows.cu,
// a warp a row) writes the queries, the cache rows and, over a float32
// cache, the bf16 shadow rows of qkrows=block (ops.cu's qk_prep_rows, then
// kv_shadow_rows) bit for bit, at rows off a block's eight and with the
// chunk's last rows past the cache's end (not written), its outputs
// poisoned first; and both are within the reference's bar.
func TestQKRowsMatchPrep(t *testing.T) {
	for _, c := range []struct {
		kv     backend.DType
		shadow bool
		warp   string
	}{{backend.F32, true, "qk_rows_f32_shadow"}, {backend.F32, false, "qk_rows_f32"}, {backend.BF16, false, "qk_rows_bf16"}} {
		t.Run(fmt.Sprintf("%s shadow=%v", c.kv, c.shadow), func(t *testing.T) {
			block, warp := DefaultOptions(), DefaultOptions()
			block.KVShadow, warp.KVShadow = c.shadow, c.shadow
			block.QKRowsWarp, warp.QKRowsWarp = false, true
			if c.kv == backend.BF16 {
				block.KV, warp.KV = backend.BF16, backend.BF16
			}
			rng := freshRNG(t)
			const QH, KVH, D, rot, pos, R = 16, 2, 256, 64, 1000, 45
			kvW, maxPos := KVH*D, pos+R-3 // the last three rows past the cache
			qg, k, v := randoms(rng, R*QH*2*D, 2), randoms(rng, R*kvW, 2), randoms(rng, R*kvW, 1)
			qn, kn := randoms(rng, D, 1), randoms(rng, D, 1)
			kc0, vc0 := randoms(rng, maxPos*kvW, 3), randoms(rng, maxPos*kvW, 1)
			for i := range kc0 {
				kc0[i], vc0[i] = backend.Round(c.kv, kc0[i]), backend.Round(c.kv, vc0[i])
			}
			for i := pos * kvW; i < maxPos*kvW; i++ {
				kc0[i], vc0[i] = float32(math.NaN()), float32(math.NaN())
			}
			var got [2][][]float32
			for j, b := range []*Backend{testBackend(t, block), testBackend(t, warp)} {
				kc, vc := typed(b, c.kv, kc0), typed(b, c.kv, vc0)
				prep := &backend.QKPrep{QG: floats(b, qg), K: floats(b, k), V: floats(b, v), QNorm: floats(b, qn), KNorm: floats(b, kn),
					Q: floats(b, nans(R*QH*D)), KCache: kc, VCache: vc, Pos: ints(b, []int32{pos}), Rows: R,
					QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e7, Eps: 1e-6}
				p, err := b.Compile([]backend.Op{prep})
				if err != nil {
					t.Fatal(err)
				}
				names := fmt.Sprint(p.(*program).kernelNames())
				want := "[[" + c.warp + "]]"
				if j == 0 {
					want = map[backend.DType]string{backend.F32: "[[qk_prep_rows_f32]]", backend.BF16: "[[qk_prep_rows_bf16]]"}[c.kv]
					if c.shadow {
						want = "[[qk_prep_rows_f32 kv_shadow_rows]]"
					}
				}
				if names != want {
					t.Fatalf("kernels %s, want %s", names, want)
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				got[j] = [][]float32{read(t, b, prep.Q), read(t, b, kc), read(t, b, vc)}
				if c.shadow {
					sh := shadowOf(t, b, kc, vc)
					if sh == nil {
						t.Fatal("no shadow of the caches")
					}
					ks, vs := readShadow(t, b, sh, maxPos)
					got[j] = append(got[j], ks[pos*kvW:], vs[pos*kvW:])
				}
				// the reference writes every row: host caches with room for all
				q, keys := backendtest.QKPrep(qg, k, v, qn, kn, make([]float32, (pos+R)*kvW), make([]float32, (pos+R)*kvW),
					pos, R, QH, KVH, D, rot, 1e7, 1e-6)
				within(t, "QKPrep", got[j][0], q)
				bar := 2e-6
				if c.kv == backend.BF16 {
					bar = 1e-2 // one bf16 rounding of each element
				}
				live := (maxPos - pos) * kvW
				withinBar(t, "QKPrep keys", got[j][1][pos*kvW:maxPos*kvW], keys[:live], bar)
				withinBar(t, "QKPrep values", got[j][2][pos*kvW:maxPos*kvW], widen64(v[:live]), bar)
			}
			for i, what := range []string{"queries", "K cache", "V cache", "K shadow", "V shadow"}[:len(got[0])] {
				sameBits(t, what, got[1][i], got[0][i])
			}
		})
	}
}
