package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

func TestParseAttnOption(t *testing.T) {
	if d := DefaultOptions(); !d.FlashAttention || !d.FlashWide || !d.FlashWG {
		t.Fatal("attn=wg is not the default")
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "wg"}}); err != nil || !o.FlashAttention || !o.FlashWide || !o.FlashWG || o.FlashWGPipe {
		t.Fatalf("attn=wg: %+v, %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "wgp"}}); err != nil || !o.FlashWG || !o.FlashWGPipe || o.FlashWGOver {
		t.Fatalf("attn=wgp: %+v, %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "wgo"}}); err != nil || !o.FlashWG || !o.FlashWGPipe || !o.FlashWGOver {
		t.Fatalf("attn=wgo: %+v, %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "wgo"}, {Key: "attn", Value: "plain"}}); err != nil || o.FlashWG || o.FlashWGOver {
		t.Fatalf("attn=wgo then attn=plain: %+v, %v", o, err)
	}
	if fams := noticeFamilies(DefaultOptions()); slices.Contains(fams, "attn_prefill_wgo") {
		t.Errorf("the defaults load attn_prefill_wgo: %v", fams)
	}
	if o, _ := ParseOptions([]backend.Option{{Key: "attn", Value: "wgo"}}); !slices.Contains(noticeFamilies(o), "attn_prefill_wgo") {
		t.Errorf("attn=wgo does not name attn_prefill_wgo among its families: %v", noticeFamilies(o))
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "flash"}}); err != nil || !o.FlashAttention {
		t.Fatalf("attn=flash: %+v, %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "wide"}}); err != nil || !o.FlashAttention || !o.FlashWide || o.FlashWG {
		t.Fatalf("attn=wide: %+v, %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attn", Value: "plain"}}); err != nil || o.FlashAttention || o.FlashWide {
		t.Fatalf("attn=plain: %+v, %v", o, err)
	}
	if _, err := ParseOptions([]backend.Option{{Key: "attn", Value: "fast"}}); err == nil {
		t.Fatal("attn=fast accepted")
	}
}

func TestFlashShapeCheck(t *testing.T) {
	ok := FlashShape{Rows: 7, QHeads: 16, KVHeads: 2, HeadDim: 256, MaxPos: 100, KV: KVBF16}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	if g := ok.grid(); g.X != 1 || g.Y != 2 {
		t.Fatalf("grid of 7 rows, 8 tokens a block: %+v", g)
	}
	for _, bad := range []FlashShape{
		{Rows: 7, QHeads: 15, KVHeads: 2, HeadDim: 256, MaxPos: 100},
		{Rows: 7, QHeads: 6, KVHeads: 2, HeadDim: 256, MaxPos: 100}, // 3 heads a group: not a divisor of 64
		{Rows: 7, QHeads: 16, KVHeads: 2, HeadDim: 72, MaxPos: 100},
		{Rows: 7, QHeads: 16, KVHeads: 0, HeadDim: 256, MaxPos: 100},
		{Rows: 7, QHeads: 16, KVHeads: 2, HeadDim: 256, MaxPos: 0},
	} {
		if bad.Check() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// flashRef is the float64 reference of attention (backendtest.Attention),
// one row at a time over all CPUs.
func flashRef(q, qg, kc, vc []float32, pos, rows, QH, KVH, D int) []float64 {
	out := make([]float64, rows*QH*D)
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				w := QH * D
				y := backendtest.Attention(q[r*w:(r+1)*w], qg[2*r*w:2*(r+1)*w], kc, vc, pos+r, 1, QH, KVH, D)
				copy(out[r*w:], y)
			}
		}()
	}
	for r := range rows {
		next <- r
	}
	close(next)
	wg.Wait()
	return out
}

func roundBF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, f := range x {
		y[i] = math.Float32frombits(uint32(quant.ToBF16(f)) << 16)
	}
	return y
}

// TestFlashAttnMatchesReference runs the flash kernels on chunks of 1, 7,
// 64, 100 and 512 rows starting at positions 0, 37 and 4096, both KV
// types, against float64. The cache holds 3 NaN rows past the chunk's last
// position (never read), the output is NaN-poisoned with guards.
//
// Bound: from the inputs rounded to bf16 as the kernel rounds them (q, and
// the f32 cache's rows), the scores are float32 sums of exact products, so
// the error is P's rounding to bf16 going into P·V: at most 2⁻⁹·Σp|v|/Σp ≤
// 2⁻⁹·max|v| per element; the test allows 2⁻⁸·max|v|. Against the exact
// inputs it reports the relative L2 error and allows 1e-2 (the q and k
// rounding moves the scores by about 3e-3).
func TestFlashAttnMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	f := testFlashAttn(t, c)
	rng := freshRNG(t)
	type shape struct{ QH, KVH, D int }
	for _, kind := range append([]string{"flash", "wide"}, flashWGKinds()...) {
		wg := strings.HasPrefix(kind, "flash_wg")
		if wg && f.fn[kind] == nil {
			t.Logf("%s: not on this GPU (compute capability 9.0 only)", kind)
			continue
		}
		for _, kv := range []KVType{KVF32, KVBF16} {
			for _, hs := range []shape{{16, 2, 256}, {8, 2, 128}} {
				for _, start := range []int{0, 37, 4096} {
					for _, rows := range []int{1, 7, 64, 100, 512} {
						if hs.D == 128 && rows == 512 {
							continue // the 35B shape covers the long chunk
						}
						if kind == "wide" && hs.D == 128 && (start != 37 || rows != 100) {
							continue // the wide kernels' loads differ by type and D, not by head count
						}
						if wg && (hs.D != 256 || kv != KVBF16) {
							continue // built for heads of 256 over bf16
						}
						name := fmt.Sprintf("%s/%v/h%d-%d-d%d/start%d/rows%d", kind, kv, hs.QH, hs.KVH, hs.D, start, rows)
						t.Run(name, func(t *testing.T) {
							flashCase(t, c, s, f, rng, kv, hs.QH, hs.KVH, hs.D, start, rows, kind)
						})
					}
				}
			}
		}
	}
}

// TestFlashWGOMatchesWGP: attn=wgo's flash_wgo_bf16_d256 is
// flash_wgp_bf16_d256's arithmetic in the same order, so its outputs are
// flash_wgp's bit for bit, on fresh random inputs at the 35B model's heads
// over a bf16 cache: chunks of one tile and several, starts at and off the
// 64-key tiles, each output poisoned before its kernel runs.
func TestFlashWGOMatchesWGP(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	f := testFlashAttn(t, c)
	if f.fn[flashWGOKernel] == nil {
		t.Skipf("%s: not on this GPU (compute capability 9.0 only)", flashWGOKernel)
	}
	rng := freshRNG(t)
	const QH, KVH, D = 16, 2, 256
	for _, cs := range []struct{ start, rows int }{{0, 8}, {0, 64}, {37, 100}, {0, 300}, {4096, 512}, {1000, 1}} {
		t.Run(fmt.Sprintf("start%d/rows%d", cs.start, cs.rows), func(t *testing.T) {
			n := cs.start + cs.rows
			maxPos := n + 5
			kh, vh := make([]uint16, maxPos*KVH*D), make([]uint16, maxPos*KVH*D)
			for i := range kh {
				kh[i], vh[i] = quant.ToBF16(float32(rng.NormFloat64())), quant.ToBF16(float32(rng.NormFloat64()))
			}
			kb, vb := upBuf(t, c, s, kh, "k cache"), upBuf(t, c, s, vh, "v cache")
			qb := upBuf(t, c, s, randomVector(rng, cs.rows*QH*D), "q")
			qgb := upBuf(t, c, s, randomVector(rng, cs.rows*QH*2*D), "qg")
			pb := upBuf(t, c, s, []int32{int32(cs.start)}, "pos")
			outs := map[string][]float32{}
			for _, kind := range []string{flashWGKernels[1], flashWGOKernel} {
				sh := flashKindShape(kind)
				sh.Rows, sh.QHeads, sh.KVHeads, sh.HeadDim, sh.MaxPos, sh.KV = cs.rows, QH, KVH, D, maxPos, KVBF16
				out := newBuf(t, c, s, cs.rows*QH*D, "out")
				if err := f.Launch(s, sh, FlashBuffers{Q: qb.P, QG: qgb.P, KCache: kb.P, VCache: vb.P, Pos: pb.P, Out: out.P}); err != nil {
					t.Fatal(err)
				}
				outs[kind] = out.Floats(t, s, kind)
			}
			want, got := outs[flashWGKernels[1]], outs[flashWGOKernel]
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.IsNaN(float64(got[i])) {
					t.Fatalf("out[%d] (row %d, head %d) = %g (%#08x), %s gave %g (%#08x)", i, i/(QH*D), i/D%QH,
						got[i], math.Float32bits(got[i]), flashWGKernels[1], want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

// testFlashAttn loads the flash attention kernels, and on a GPU of compute
// capability 9.0 flash_wg too.
func testFlashAttn(t *testing.T, c *driver.Context) *FlashAttn {
	t.Helper()
	f, err := NewFlashAttn(c, loadModule(t, LoadFlashAttnModule, c))
	if err != nil {
		t.Fatal(err)
	}
	if wgmmaGPU(c) {
		m := loadModule(t, LoadFlashWGModule, c)
		if err := f.AddWG(c, m); err != nil {
			t.Fatal(err)
		}
		if err := f.AddWGO(c, loadModule(t, LoadFlashWGOModule, c)); err != nil {
			t.Fatal(err)
		}
		for _, k := range flashWGKinds() {
			if fi, err := f.fn[k].Info(); err == nil {
				t.Logf("%s: %d registers, %d bytes local", k, fi.Registers, fi.LocalBytes)
			}
		}
	}
	return f
}

// flashWGKinds are the wgmma flash kernels by entry point: attn_prefill_wg's
// and attn_prefill_wgo's.
func flashWGKinds() []string { return append(slices.Clone(flashWGKernels), flashWGOKernel) }

func flashCase(t *testing.T, c *driver.Context, s *driver.Stream, f *FlashAttn, rng *rand.Rand, kv KVType, QH, KVH, D, start, rows int, kind string) {
	kvW, n := KVH*D, start+rows
	maxPos := n + 3
	q := randomVector(rng, rows*QH*D)
	qg := randomVector(rng, rows*QH*2*D)
	kc, vc := randomVector(rng, n*kvW), randomVector(rng, n*kvW)
	if kv == KVBF16 {
		kc, vc = roundBF16(kc), roundBF16(vc)
	}
	upCache := func(x []float32, label string) devBuf {
		if kv == KVF32 {
			full := append(slices.Clone(x), make([]float32, 3*kvW)...)
			for i := len(x); i < len(full); i++ {
				full[i] = math.Float32frombits(nanBits)
			}
			return upBuf(t, c, s, full, label)
		}
		h := make([]uint16, maxPos*kvW)
		for i := range h {
			h[i] = 0x7fc0
		}
		for i, v := range x {
			h[i] = quant.ToBF16(v)
		}
		return upBuf(t, c, s, h, label)
	}
	kb, vb := upCache(kc, "k cache"), upCache(vc, "v cache")
	qb, qgb := upBuf(t, c, s, q, "q"), upBuf(t, c, s, qg, "qg")
	pb := upBuf(t, c, s, []int32{int32(start)}, "pos")
	out := newBuf(t, c, s, rows*QH*D, "out")
	sh := flashKindShape(kind)
	sh.Rows, sh.QHeads, sh.KVHeads, sh.HeadDim, sh.MaxPos, sh.KV = rows, QH, KVH, D, maxPos, kv
	if err := f.Launch(s, sh, FlashBuffers{Q: qb.P, QG: qgb.P, KCache: kb.P, VCache: vb.P, Pos: pb.P, Out: out.P}); err != nil {
		t.Fatal(err)
	}
	got := out.Floats(t, s, "out")

	var vmax float64
	for _, v := range vc {
		vmax = max(vmax, math.Abs(float64(v)))
	}
	rounded := flashRef(roundBF16(q), qg, roundBF16(kc), roundBF16(vc), start, rows, QH, KVH, D)
	var worst float64
	worstAt := 0
	for i, w := range rounded {
		if e := math.Abs(float64(got[i]) - w); e > worst {
			worst, worstAt = e, i
		}
	}
	exact := flashRef(q, qg, kc, vc, start, rows, QH, KVH, D)
	var num, den float64
	for i, w := range exact {
		d := float64(got[i]) - w
		num += d * d
		den += w * w
	}
	rel := math.Sqrt(num / den)
	t.Logf("worst |Δ| %.3g of max|v| (from bf16 inputs; bound %.3g), rel L2 %.3g against the exact inputs", worst/vmax, 1.0/256, rel)
	if worst > vmax/256 {
		t.Errorf("out[%d] (row %d) = %g, want %g (from bf16 inputs): |Δ| %.3g > 2⁻⁸·max|v| = %.3g",
			worstAt, worstAt/(QH*D), got[worstAt], rounded[worstAt], worst, vmax/256)
	}
	if rel > 1e-2 {
		t.Errorf("relative L2 error %.3g against the exact inputs, want <= 1e-2", rel)
	}
}

// TestKVToBF16: kv_to_bf16 rounds rows 0 .. min(pos+rows, maxPos)-1 of
// both float32 caches to bf16 as quant.ToBF16 does (nearest even), and
// leaves the rest of the poisoned copies (and their guards) as they were.
func TestKVToBF16(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	f, err := NewFlashAttn(c, loadModule(t, LoadFlashAttnModule, c))
	if err != nil {
		t.Fatal(err)
	}
	rng := freshRNG(t)
	const width, maxPos = 512, 300
	kc, vc := randomVector(rng, maxPos*width), randomVector(rng, maxPos*width)
	for i := 0; i < len(kc); i += 97 {
		kc[i] *= 1e30 // large, tiny and halfway values too
		vc[i] = math.Float32frombits(math.Float32bits(vc[i])&0xffff0000 | 0x8000)
	}
	kb, vb := upBuf(t, c, s, kc, "k cache"), upBuf(t, c, s, vc, "v cache")
	for _, cs := range []struct{ pos, rows int }{{0, 7}, {37, 100}, {250, 100}, {0, 0}} {
		t.Run(fmt.Sprintf("pos%d/rows%d", cs.pos, cs.rows), func(t *testing.T) {
			pb := upBuf(t, c, s, []int32{int32(cs.pos)}, "pos")
			k, v := newBuf(t, c, s, maxPos*width/2, "k copy"), newBuf(t, c, s, maxPos*width/2, "v copy")
			b := KVCopyBuffers{KCache: kb.P, VCache: vb.P, Pos: pb.P, K: k.P, V: v.P}
			if err := f.LaunchKVCopy(s, c.Device().SMs, cs.rows, maxPos, width, b); err != nil {
				t.Fatal(err)
			}
			n := min(cs.pos+cs.rows, maxPos) * width
			for which, pair := range [][2]any{{k, kc}, {v, vc}} {
				buf, src := pair[0].(devBuf), pair[1].([]float32)
				words := buf.Words(t, s, "copy")
				for i := range 2 * len(words) {
					got := uint16(words[i/2] >> (16 * (i % 2)))
					want := quant.ToBF16(src[i])
					if i >= n {
						want = uint16(uint32(nanBits) >> (16 * (i % 2)))
					}
					if got != want {
						t.Fatalf("cache %d, element %d (row %d, %d rows copied): %#04x, want %#04x", which, i, i/width, n/width, got, want)
					}
				}
			}
		})
	}
}

// TestFlashAttnInBackend: with attn=flash a prefill chunk's Attention
// compiles to the flash kernel and matches the reference within its bound
// (TestFlashAttnMatchesReference's); attn=plain keeps the plain kernel.
func TestFlashAttnInBackend(t *testing.T) {
	const QH, KVH, D, start, rows = 16, 2, 256, 37, 100
	kvW, maxPos := KVH*D, 256
	for _, kvt := range []backend.DType{backend.F32, backend.BF16} {
		for _, mode := range []string{"flash", "wide", "wg", "wgp", "wgo", "plain", "wide,kvcopy=off"} {
			flash := mode != "plain"
			// over an f32 cache the flash kernels read kv_to_bf16's copy
			copied := flash && kvt == backend.F32 && mode != "wide,kvcopy=off"
			t.Run(fmt.Sprintf("%v/attn=%s", kvt, mode), func(t *testing.T) {
				o := DefaultOptions()
				o.FlashAttention, o.FlashWide, o.KVCopy = flash, mode != "flash", mode != "wide,kvcopy=off"
				o.FlashWG, o.FlashWGPipe, o.FlashWGOver = mode == "wg" || mode == "wgp" || mode == "wgo", mode == "wgp" || mode == "wgo", mode == "wgo"
				o.KVShadow = false // kvcopy's copy here; the shadow's reads are TestKVShadow's
				b := testBackend(t, o)
				rng := rand.New(rand.NewPCG(3, 5))
				q, qg := randomVector(rng, rows*QH*D), randomVector(rng, rows*QH*2*D)
				kc, vc := randomVector(rng, maxPos*kvW), randomVector(rng, maxPos*kvW)
				for i := range kc {
					kc[i], vc[i] = backend.Round(kvt, kc[i]), backend.Round(kvt, vc[i])
				}
				alloc := func(dt backend.DType, x []float32) backend.Buffer {
					buf, err := backend.AllocFloats(b, dt, x)
					if err != nil {
						t.Fatal(err)
					}
					return buf
				}
				pos, err := backend.AllocInts(b, []int32{start})
				if err != nil {
					t.Fatal(err)
				}
				outBuf := alloc(backend.F32, slices.Repeat([]float32{float32(math.NaN())}, rows*QH*D))
				op := &backend.Attention{Q: alloc(backend.F32, q), QG: alloc(backend.F32, qg), KCache: alloc(kvt, kc),
					VCache: alloc(kvt, vc), Out: outBuf, Pos: pos, Rows: rows, QHeads: QH, KVHeads: KVH, HeadDim: D}
				p, err := b.Compile([]backend.Op{op})
				if err != nil {
					t.Fatal(err)
				}
				names := p.(*program).kernelNames()[0]
				kernel := map[string]string{"flash": "flash_attn_", "wide": "flash_wide_", "wg": "flash_wg_", "wgp": "flash_wgp_", "wgo": "flash_wgo_", "plain": "attn_rows_", "wide,kvcopy=off": "flash_wide_"}[mode]
				if o.FlashWG && !wgmmaGPU(b.ctx) {
					kernel = "flash_wide_" // attn=wg is attn=wide on other GPUs
				}
				switch {
				case copied && (len(names) != 2 || names[0] != kvCopyKernel || !strings.HasPrefix(names[1], kernel+"bf16_")):
					t.Fatalf("kernels %v with attn=%s over an f32 cache, want %s then %sbf16_*", names, mode, kvCopyKernel, kernel)
				case !copied && (len(names) != 1 || !strings.HasPrefix(names[0], kernel)):
					t.Fatalf("kernels %v with attn=%s, want one %s*", names, mode, kernel)
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, rows*QH*D)
				if err := b.Read(outBuf, got); err != nil {
					t.Fatal(err)
				}
				want := flashRef(roundBF16(q), qg, roundBF16(kc[:(start+rows)*kvW]), roundBF16(vc[:(start+rows)*kvW]), start, rows, QH, KVH, D)
				if !flash {
					want = flashRef(q, qg, kc[:(start+rows)*kvW], vc[:(start+rows)*kvW], start, rows, QH, KVH, D)
				}
				var worst, vmax float64
				for i := range want {
					if math.IsNaN(float64(got[i])) {
						t.Fatalf("out[%d] is NaN (not written?)", i)
					}
					worst = max(worst, math.Abs(float64(got[i])-want[i]))
				}
				for _, v := range vc {
					vmax = max(vmax, math.Abs(float64(v)))
				}
				bound := vmax / 256
				if !flash {
					bound = 1e-4 * vmax
				}
				t.Logf("kernels %v: worst |Δ| %.3g of max|v|", names, worst/vmax)
				if worst > bound {
					t.Errorf("worst |Δ| %.3g > %.3g", worst, bound)
				}
			})
		}
	}
}

// TestMeasureFlash times the flash kernel on the 35B model's attention (16
// query heads on 2 KV heads of 256) for a chunk of 4096 rows at several
// positions, both KV element types, in TFLOP/s of the causal products
// (QKᵀ and PV: 4·D per query head per key seen) (PETAL_CUDA_BENCH=1).
func TestMeasureFlash(t *testing.T) {
	c := benchOnly(t)
	s := newTestStream(t, c)
	f := testFlashAttn(t, c)
	rng := freshRNG(t)
	const QH, KVH, D, rows, maxPos = 16, 2, 256, 4096, 128 << 10
	kvW := KVH * D
	q, qg := upBuf(t, c, s, randomVector(rng, rows*QH*D), "q"), upBuf(t, c, s, randomVector(rng, rows*QH*2*D), "qg")
	out := newBuf(t, c, s, rows*QH*D, "out")
	caches := map[KVType][2]devBuf{
		KVF32: {upBuf(t, c, s, randomVector(rng, maxPos*kvW), "k f32"), upBuf(t, c, s, randomVector(rng, maxPos*kvW), "v f32")},
	}
	kh, vh := make([]uint16, maxPos*kvW), make([]uint16, maxPos*kvW)
	for i := range kh {
		kh[i], vh[i] = quant.ToBF16(float32(rng.NormFloat64())), quant.ToBF16(float32(rng.NormFloat64()))
	}
	caches[KVBF16] = [2]devBuf{upBuf(t, c, s, kh, "k bf16"), upBuf(t, c, s, vh, "v bf16")}
	for _, kv := range []KVType{KVF32, KVBF16} {
		for _, start := range []int{0, 28 << 10, maxPos - rows} {
			for _, kind := range append([]string{"flash", "wide"}, flashWGKinds()...) {
				sh := flashKindShape(kind)
				if sh.WG && (kv != KVBF16 || f.fn[kind] == nil) {
					continue
				}
				pb := upBuf(t, c, s, []int32{int32(start)}, "pos")
				sh.Rows, sh.QHeads, sh.KVHeads, sh.HeadDim, sh.MaxPos, sh.KV = rows, QH, KVH, D, maxPos, kv
				b := FlashBuffers{Q: q.P, QG: qg.P, KCache: caches[kv][0].P, VCache: caches[kv][1].P, Pos: pb.P, Out: out.P}
				d := timeLaunches(t, c, s, 5, func() error { return f.Launch(s, sh, b) })
				keys := float64(rows)*float64(start) + float64(rows)*float64(rows+1)/2
				flop := 4 * D * QH * keys
				t.Logf("flash %v %-19s: %d rows at position %6d: %8.1f µs, %5.1f TFLOP/s", kv, kind, rows, start, d.Seconds()*1e6, flop/d.Seconds()/1e12)
			}
			if kv == KVF32 { // kvcopy's copy of the rows those read, and the bf16 kernel's time above
				pb := upBuf(t, c, s, []int32{int32(start)}, "pos")
				kb, vb := newBuf(t, c, s, maxPos*kvW/2, "k copy"), newBuf(t, c, s, maxPos*kvW/2, "v copy")
				b := KVCopyBuffers{KCache: caches[KVF32][0].P, VCache: caches[KVF32][1].P, Pos: pb.P, K: kb.P, V: vb.P}
				d := timeLaunches(t, c, s, 5, func() error { return f.LaunchKVCopy(s, c.Device().SMs, rows, maxPos, kvW, b) })
				n := float64(start+rows) * float64(kvW) * 2 * 6 // bytes read and written
				t.Logf("kv_to_bf16: %d rows at position %6d: %8.1f µs, %5.0f GB/s", rows, start, d.Seconds()*1e6, n/d.Seconds()/1e9)
			}
		}
	}
}
