package cuda

import (
	"fmt"
	"slices"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/quant"
)

// TestAttnOutArgsMatchKernel: the bytes Launch passes by value are as many
// as every attn_combine_out entry point of the PTX takes (AttnOutArgs in
// attn_out.cu), and attnOutArgs packs that many.
func TestAttnOutArgsMatchKernel(t *testing.T) {
	checkStructArgs(t, "attn_out", "attn_combine_out_", 2, attnOutArgsSize)
	if n := len(attnOutArgs(AttnOutBuffers{OutProj: &QMatrix{Rows: 2048, Cols: 4096}}, 66, 64)); n != attnOutArgsSize {
		t.Errorf("attnOutArgs packs %d bytes, want %d", n, attnOutArgsSize)
	}
}

// TestParseAttnOut: attnout=on and off choose attn_out.cu's launch or the
// two kernels, off the default (not yet measured); the backend names
// attn_out among the families it loads only under on.
func TestParseAttnOut(t *testing.T) {
	checkOnOffForm(t, "attnout", "attn_out", "fused", "until it is measured", func(o Options) bool { return o.AttnOut })
}

// TestAttnOutMatchesApart: under attnout=on a decoded token's Attention and
// the QLinear of its output (the output projection) run as attn_split and
// attn_combine_out: the attention's output bit for bit as attn_combine
// leaves it, the projection within the mat-vec's float32 bar of qmv's and
// of the float64 reference over that output; at the 35B shape (16 query
// heads on 2 KV heads, hidden 2048) and the embedded model's (8 on 1,
// hidden 256), a few positions (one chunk, many, the most), over replays
// of the captured graph, fresh random inputs each run of the test, outputs
// poisoned.
func TestAttnOutMatchesApart(t *testing.T) {
	o := DefaultOptions()
	o.AttnOut = true
	matchAttnOut(t, testBackend(t, o), testBackend(t, DefaultOptions()), attnOutKernel)
}

// TestAttnSplitMatchesApart: under attnsplit=on the same as
// TestAttnOutMatchesApart of attn_split and attn_combine_split, over
// replays that reuse the sums each launch leaves zero, with the sums in one
// copy and spread over 8 (splitcopies=8).
func TestAttnSplitMatchesApart(t *testing.T) {
	apart := testBackend(t, DefaultOptions())
	for _, copies := range []int{1, 8} { // splitcopies=N
		t.Run(fmt.Sprintf("copies=%d", copies), func(t *testing.T) {
			o := DefaultOptions()
			o.AttnSplit, o.SplitCopies = true, copies
			matchAttnOut(t, testBackend(t, o), apart, attnSplitKernel)
		})
	}
}

// matchAttnOut runs a decoded token's Attention and its output projection
// as attn_split and kernel on fused and as the kernels apart on apart
// (TestAttnOutMatchesApart says what is compared).
func matchAttnOut(t *testing.T, fused, apart *Backend, kernel string) {
	type shape struct{ QH, KVH, H int }
	for _, sh := range []shape{{16, 2, 2048}, {8, 1, 256}} {
		for _, pos := range []int{5, 1000, 5000} {
			t.Run(fmt.Sprintf("%dq/%dkv H=%d pos=%d", sh.QH, sh.KVH, sh.H, pos), func(t *testing.T) {
				rng := freshRNG(t)
				const D = AttnHeadDim
				kvW, n := sh.KVH*D, pos+1
				q, qg := randoms(rng, sh.QH*D, 1), randoms(rng, sh.QH*2*D, 2)
				kc, vc := append(randoms(rng, n*kvW, 3), nans(3*kvW)...), append(randoms(rng, n*kvW, 1), nans(3*kvW)...)
				m := quant.RandomMatrix(rng, 1, sh.H, sh.QH*D, 4, 64)
				run := func(b *Backend) (att, y []float32, kernels []string) {
					w, err := b.Upload(m)
					if err != nil {
						t.Fatal(err)
					}
					a := &backend.Attention{Q: floats(b, q), QG: floats(b, qg), KCache: floats(b, kc), VCache: floats(b, vc),
						Out: floats(b, nans(sh.QH*D)), Pos: ints(b, []int32{int32(pos)}), Rows: 1, QHeads: sh.QH, KVHeads: sh.KVH, HeadDim: D}
					l := &backend.QLinear{X: a.Out, W: w, Y: floats(b, nans(sh.H)), Rows: 1}
					p, err := b.Compile([]backend.Op{a, l})
					if err != nil {
						t.Fatal(err)
					}
					runWith(t, b, p, 3, map[backend.Buffer][]float32{a.Out: nans(sh.QH * D), l.Y: nans(sh.H)})
					return read(t, b, a.Out), read(t, b, l.Y), slices.Concat(p.(*program).kernelNames()...)
				}
				fa, fy, fk := run(fused)
				aa, ay, ak := run(apart)
				if !slices.Equal(fk, []string{"attn_split", kernel}) || slices.Contains(ak, kernel) {
					t.Fatalf("kernels %v fused, %v apart", fk, ak)
				}
				sameBits(t, "the attention's output", fa, aa)
				bar := backendtest.Tolerances["QLinear"][backend.F32]
				withinBar(t, "the output projection, against the mat-vec's", fy, widen64(ay), bar)
				withinBar(t, "the output projection, against the reference", fy, backendtest.Linear(backendtest.Dequantize(&m), sh.H, sh.QH*D, aa, 1), bar)
			})
		}
	}
}
