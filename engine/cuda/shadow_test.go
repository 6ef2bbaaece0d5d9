package cuda

import (
	"fmt"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
)

// readShadow is a shadow's K and V rows 0..rows-1, widened to float32.
func readShadow(t *testing.T, b *Backend, sh *kvShadow, rows int) (k, v []float32) {
	t.Helper()
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	widen := func(p driver.Ptr) []float32 {
		h := make([]uint16, rows*sh.width)
		if err := b.s.CopyToHost(bytesOf(h), p); err != nil {
			t.Fatal(err)
		}
		if err := b.s.Sync(); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, len(h))
		backend.Widen(backend.BF16, h, out)
		return out
	}
	return widen(sh.ks), widen(sh.vs)
}

// checkShadow fails t unless sh's rows 0..rows-1 are the float32 caches'
// rows rounded to bf16, bit for bit.
func checkShadow(t *testing.T, b *Backend, sh *kvShadow, kc, vc backend.Buffer, rows int, when string) {
	t.Helper()
	ks, vs := readShadow(t, b, sh, rows)
	for i, c := range []backend.Buffer{kc, vc} {
		f := read(t, b, c)[:rows*sh.width]
		got := [][]float32{ks, vs}[i]
		for j := range f {
			if want := backend.Round(backend.BF16, f[j]); got[j] != want && !(want != want && got[j] != got[j]) {
				t.Fatalf("%s: %s shadow element %d (row %d) is %g, the cache's %g rounds to %g", when, "KV"[i:i+1], j, j/sh.width, got[j], f[j], want)
			}
		}
	}
}

// decodeAttention is a decoded token's QKPrep and Attention at pos over
// the caches kc and vc (heads of 256), their outputs poisoned.
func decodeAttention(b *Backend, qg, k, v, qn, kn []float32, kc, vc backend.Buffer, pos, QH, KVH, rot int) (*backend.QKPrep, *backend.Attention) {
	const D = AttnHeadDim
	prep := &backend.QKPrep{QG: floats(b, qg), K: floats(b, k), V: floats(b, v), QNorm: floats(b, qn), KNorm: floats(b, kn),
		Q: floats(b, nans(QH*D)), KCache: kc, VCache: vc, Pos: ints(b, []int32{int32(pos)}), Rows: 1,
		QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e7, Eps: 1e-6}
	att := &backend.Attention{Q: prep.Q, QG: prep.QG, KCache: kc, VCache: vc, Out: floats(b, nans(QH*D)), Pos: prep.Pos,
		Rows: 1, QHeads: QH, KVHeads: KVH, HeadDim: D}
	return prep, att
}

// TestKVShadow: under kvshadow=on a decoded token's QKPrep writes its row
// to the float32 caches and their bf16 shadows, and its attention reads the
// shadows (attn.cu's bf16 kernels: the reference over the caches rounded to
// bf16, to the bf16 bar); a prefill chunk's rows reach the shadows too, and
// its flash attention over them gives kvshadow=off's outputs (kvcopy's copy)
// bit for bit; a host write into a cache is followed by the shadow, and
// freeing a cache drops its shadow.
func TestKVShadow(t *testing.T) {
	o := DefaultOptions()
	o.KVShadow = true
	b := testBackend(t, o)
	o.KVShadow = false // the default is on: the comparison needs it off
	off := testBackend(t, o)
	rng := freshRNG(t)
	const QH, KVH, D, rot, pos, R = 16, 2, 256, 64, 1000, 64
	kvW, maxPos := KVH*D, pos+R+3
	kc0 := append(randoms(rng, pos*kvW, 3), nans((maxPos-pos)*kvW)...)
	vc0 := append(randoms(rng, pos*kvW, 1), nans((maxPos-pos)*kvW)...)
	qn, kn := randoms(rng, D, 1), randoms(rng, D, 1)

	// decode: QKPrep and Attention of one token at pos
	t.Run("decode", func(t *testing.T) {
		qg, k, v := randoms(rng, QH*2*D, 2), randoms(rng, kvW, 2), randoms(rng, kvW, 1)
		kc, vc := floats(b, kc0), floats(b, vc0)
		prep, att := decodeAttention(b, qg, k, v, qn, kn, kc, vc, pos, QH, KVH, rot)
		p, err := b.Compile([]backend.Op{prep, att})
		if err != nil {
			t.Fatal(err)
		}
		names := p.(*program).kernelNames()
		if fmt.Sprint(names) != "[[qk_prep_f32_shadow] [attn_split+attn_combine]]" {
			t.Errorf("kernels %v", names)
		}
		sh := shadowOf(t, b, kc, vc)
		if sh == nil {
			t.Fatalf("no shadow of the caches (%d shadows)", len(b.shadows))
		}
		check := func(when string, kcHost, vcHost []float32) {
			runWith(t, b, p, 2, nil)
			q, keys := backendtest.QKPrep(qg, k, v, qn, kn, kcHost, vcHost, pos, 1, QH, KVH, D, rot, 1e7, 1e-6)
			within(t, "QKPrep", read(t, b, prep.Q), q)
			gotK := read(t, b, kc)
			withinBar(t, when+": the key row", gotK[pos*kvW:(pos+1)*kvW], keys, 2e-6)
			checkShadow(t, b, sh, kc, vc, pos+1, when)
			// the reference over the caches as attention read them: rounded
			rk, rv := roundBF16(read(t, b, kc)[:(pos+1)*kvW]), roundBF16(read(t, b, vc)[:(pos+1)*kvW])
			withinBar(t, when+": attention", read(t, b, att.Out), backendtest.Attention(read(t, b, prep.Q), qg, rk, rv, pos, 1, QH, KVH, D),
				backendtest.Tolerances["Attention"][backend.BF16])
		}
		check("first runs", kc0, vc0)
		// a session restored: the host writes the caches, the shadows follow
		kc1 := append(randoms(rng, pos*kvW, 3), nans((maxPos-pos)*kvW)...)
		if err := b.Write(kc, kc1); err != nil {
			t.Fatal(err)
		}
		check("after a write", kc1, vc0)
		b.Free(kc)
		if len(b.shadows) != 0 {
			t.Errorf("%d shadows after the K cache was freed", len(b.shadows))
		}
	})

	// prefill: a chunk of R tokens at pos through the flash kernels
	t.Run("prefill", func(t *testing.T) {
		qg, k, v := randoms(rng, R*QH*2*D, 2), randoms(rng, R*kvW, 2), randoms(rng, R*kvW, 1)
		run := func(b *Backend) (out, kcOut []float32, names [][]string, sh *kvShadow, kc, vc backend.Buffer) {
			kc, vc = floats(b, kc0), floats(b, vc0)
			prep := &backend.QKPrep{QG: floats(b, qg), K: floats(b, k), V: floats(b, v), QNorm: floats(b, qn), KNorm: floats(b, kn),
				Q: floats(b, nans(R*QH*D)), KCache: kc, VCache: vc, Pos: ints(b, []int32{pos}), Rows: R,
				QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e7, Eps: 1e-6}
			att := &backend.Attention{Q: prep.Q, QG: prep.QG, KCache: kc, VCache: vc, Out: floats(b, nans(R*QH*D)), Pos: prep.Pos,
				Rows: R, QHeads: QH, KVHeads: KVH, HeadDim: D}
			p, err := b.Compile([]backend.Op{prep, att})
			if err != nil {
				t.Fatal(err)
			}
			runWith(t, b, p, 2, nil)
			return read(t, b, att.Out), read(t, b, kc), p.(*program).kernelNames(), shadowOf(t, b, kc, vc), kc, vc
		}
		got, gotK, names, sh, kc, vc := run(b)
		want, wantK, offNames, _, _, _ := run(off)
		t.Logf("kernels %v, kvshadow=off %v", names, offNames)
		if sh == nil {
			t.Fatal("no shadow of the caches")
		}
		sameBits(t, "the K cache", gotK, wantK)
		sameBits(t, "flash attention over the shadows", got, want)
		checkShadow(t, b, sh, kc, vc, pos+R, "after the chunk")
	})
}

// shadowOf is b's shadow of the caches kc and vc, nil where none.
func shadowOf(t *testing.T, b *Backend, kc, vc backend.Buffer) *kvShadow {
	t.Helper()
	k, err := b.addr(kc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.addr(vc)
	if err != nil {
		t.Fatal(err)
	}
	return b.shadows[[2]driver.Ptr{k, v}]
}
