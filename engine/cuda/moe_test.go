package cuda

import (
	"math"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
	"petal/engine/quant"
)

// moeShape is a layer's MoE: experts of Inter rows by Hidden columns.
type moeShape struct {
	name                   string
	experts, hidden, inter int
}

var moeShapes = []moeShape{
	{"35B 256x(2048,512)", 256, 2048, 512},
	{"small 16x(192,128)", 16, 192, 128},
	{"odd 9x(2112,576)", 9, 2112, 576},
}

// hostMoE is one layer's MoE weights on the host, in quant's layout.
type hostMoE struct {
	gate, up, down, sGate, sUp, sDown, sExpertGate quant.Matrix
}

func randomMoE(rng *rand.Rand, sh moeShape) *hostMoE {
	E, H, I := sh.experts, sh.hidden, sh.inter
	return &hostMoE{
		gate: quant.RandomMatrix(rng, E, I, H, 4, 64), up: quant.RandomMatrix(rng, E, I, H, 4, 64),
		down:  quant.RandomMatrix(rng, E, H, I, 4, 64),
		sGate: quant.RandomMatrix(rng, 1, I, H, 4, 64), sUp: quant.RandomMatrix(rng, 1, I, H, 4, 64),
		sDown:       quant.RandomMatrix(rng, 1, H, I, 4, 64),
		sExpertGate: quant.RandomMatrix(rng, 1, 1, H, 8, 64),
	}
}

// upload copies the weights to the device with the interleaved scales and
// biases too.
func (hm *hostMoE) upload(t testing.TB, c *driver.Context, up *driver.Uploader, sh moeShape) *MoEWeights {
	t.Helper()
	w := &MoEWeights{Experts: sh.experts, Hidden: sh.hidden, Inter: sh.inter}
	for _, p := range []struct {
		dst **QMatrix
		src *quant.Matrix
	}{{&w.Gate, &hm.gate}, {&w.Up, &hm.up}, {&w.Down, &hm.down}, {&w.SharedGate, &hm.sGate},
		{&w.SharedUp, &hm.sUp}, {&w.SharedDown, &hm.sDown}, {&w.SharedExpertGate, &hm.sExpertGate}} {
		m, err := UploadQMatrix(c, up, p.src, sh.name)
		if err != nil {
			t.Fatal(err)
		}
		if p.src.Bits == 4 {
			if err := m.UploadScaleBias(up, p.src); err != nil {
				t.Fatal(err)
			}
		}
		*p.dst = m
	}
	return w
}

func (w *MoEWeights) free() {
	for _, m := range []*QMatrix{w.Gate, w.Up, w.Down, w.SharedGate, w.SharedUp, w.SharedDown, w.SharedExpertGate} {
		m.Free()
	}
}

// rowDot64 is row r of m (of the whole stack) times x, in float64.
func rowDot64(m *quant.Matrix, r int, x []float64, row []float32) float64 {
	m.DequantizeRow(r, row)
	var s float64
	for c, v := range row {
		s += float64(v) * x[c]
	}
	return s
}

func silu64(v float64) float64    { return v / (1 + math.Exp(-v)) }
func sigmoid64(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

// moeReference is spec 2.8 in float64 for the given routing: the SwiGLU
// activations of the routed slots and the shared expert (as the kernel's
// h), the shared expert gate's logit, and the block's output (before the
// residual).
func moeReference(hm *hostMoE, sh moeShape, x []float32, ids []int32, wts []float32) (h []float64, logit float64, y []float64) {
	H, I := sh.hidden, sh.inter
	x64 := make([]float64, H)
	for i, v := range x {
		x64[i] = float64(v)
	}
	h = make([]float64, (MoETopK+1)*I)
	workers := runtime.GOMAXPROCS(0)
	parallel := func(n int, f func(i int, row []float32)) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				row := make([]float32, max(H, I))
				for i := w; i < n; i += workers {
					f(i, row[:0])
				}
			}()
		}
		wg.Wait()
	}
	parallel(len(h), func(t int, row []float32) {
		slot, r := t/I, t%I
		var g, u float64
		if slot < MoETopK {
			e := int(ids[slot])
			g = rowDot64(&hm.gate, e*I+r, x64, row[:H])
			u = rowDot64(&hm.up, e*I+r, x64, row[:H])
		} else {
			g = rowDot64(&hm.sGate, r, x64, row[:H])
			u = rowDot64(&hm.sUp, r, x64, row[:H])
		}
		h[t] = silu64(g) * u
	})
	logit = rowDot64(&hm.sExpertGate, 0, x64, make([]float32, H))
	sigma := sigmoid64(logit)
	y = make([]float64, H)
	parallel(H, func(r int, row []float32) {
		var acc float64
		for slot := range MoETopK {
			e := int(ids[slot])
			acc += float64(wts[slot]) * rowDot64(&hm.down, e*H+r, h[slot*I:(slot+1)*I], row[:I])
		}
		y[r] = acc + sigma*rowDot64(&hm.sDown, r, h[MoETopK*I:], row[:I])
	})
	return h, logit, y
}

// randomRouting picks MoETopK distinct experts and weights that sum to 1
// (a softmax over random logits, as the renormalised top-k is).
func randomRouting(rng *rand.Rand, experts int) ([]int32, []float32) {
	ids := make([]int32, MoETopK)
	for i, e := range rng.Perm(experts)[:MoETopK] {
		ids[i] = int32(e)
	}
	wts := make([]float32, MoETopK)
	var sum float64
	p := make([]float64, MoETopK)
	for i := range p {
		p[i] = math.Exp(rng.NormFloat64())
		sum += p[i]
	}
	for i := range p {
		wts[i] = float32(p[i] / sum)
	}
	return ids, wts
}

// moeTolerance bounds max|out - ref| / max|ref| of the block's output.
func moeTolerance(k QKind) float64 {
	switch k {
	case QF32, QI8x3:
		return 1e-5
	default:
		return 1e-3
	}
}

// deviceMoE holds a test's MoE vectors on the device, each with guard
// elements that must stay poisoned.
type deviceMoE struct {
	c    *driver.Context
	bufs MoEBuffers
	n    map[driver.Ptr]int // elements of each poisoned buffer, before its guard
}

const moeGuard = 64

func newDeviceMoE(t testing.TB, c *driver.Context, s *driver.Stream, sh moeShape, x, resid []float32, ids []int32, wts []float32) *deviceMoE {
	t.Helper()
	d := &deviceMoE{c: c, n: map[driver.Ptr]int{}}
	alloc := func(n int, label string) driver.Ptr {
		p, err := c.Alloc(int64(4*(n+moeGuard)), label)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := &d.bufs
	b.X, b.Resid = alloc(sh.hidden, "x"), alloc(sh.hidden, "resid")
	b.IDs, b.Weights = alloc(MoETopK, "ids"), alloc(MoETopK, "weights")
	b.H, b.Logit, b.Out = alloc((MoETopK+1)*sh.inter, "h"), alloc(1, "logit"), alloc(sh.hidden, "out")
	d.n[b.H], d.n[b.Logit], d.n[b.Out] = (MoETopK+1)*sh.inter, 1, sh.hidden
	for _, cp := range []struct {
		dst driver.Ptr
		src []byte
	}{{b.X, bytesOf(x)}, {b.Resid, bytesOf(resid)}, {b.IDs, bytesOf(ids)}, {b.Weights, bytesOf(wts)}} {
		if err := s.CopyToDevice(cp.dst, cp.src); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func (d *deviceMoE) Poison(t testing.TB, s *driver.Stream) {
	t.Helper()
	for p, n := range d.n {
		if err := s.Fill32(p, nanBits, int64(n+moeGuard)); err != nil {
			t.Fatal(err)
		}
	}
}

// read returns a poisoned buffer's elements, failing if its guard was written.
func (d *deviceMoE) read(t testing.TB, s *driver.Stream, p driver.Ptr, what string) []float32 {
	t.Helper()
	n := d.n[p]
	v := make([]float32, n+moeGuard)
	if err := s.CopyToHost(bytesOf(v), p); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := n; i < len(v); i++ {
		if math.Float32bits(v[i]) != nanBits {
			t.Fatalf("%s[%d], past its %d elements, was written: %v", what, i, n, v[i])
		}
	}
	return v[:n]
}

func (d *deviceMoE) free() {
	b := d.bufs
	for _, p := range []driver.Ptr{b.X, b.IDs, b.Weights, b.H, b.Logit, b.Resid, b.Out} {
		d.c.Free(p)
	}
}

// TestMoEMatchesReference runs every MoE variant on each shape against the
// float64 reference of spec 2.8: fresh random weights, input, residual and
// routing, the outputs poisoned before each run, guards checked.
func TestMoEMatchesReference(t *testing.T) {
	c := gpu(t)
	s, err := c.NewStream("test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, err := c.NewUploader(s, 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	mod, err := LoadMoEModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	rng := freshRNG(t)
	for _, sh := range moeShapes {
		hm := randomMoE(rng, sh)
		w := hm.upload(t, c, up, sh)
		x := randomVector(rng, sh.hidden)
		ids, wts := randomRouting(rng, sh.experts)
		wantH, wantLogit, wantY := moeReference(hm, sh, x, ids, wts)
		// A residual of the block's own size, so that the output's rounding
		// does not hide the block's error.
		var rms float64
		for _, v := range wantY {
			rms += v * v
		}
		rms = math.Sqrt(rms / float64(len(wantY)))
		resid := randomVector(rng, sh.hidden)
		want := make([]float64, sh.hidden)
		for i := range resid {
			resid[i] *= float32(rms)
			want[i] = float64(resid[i]) + wantY[i]
		}
		d := newDeviceMoE(t, c, s, sh, x, resid, ids, wts)
		for _, v := range MoEVariants {
			k, err := NewMoE(c, mod, v)
			if err != nil {
				t.Fatal(err)
			}
			d.Poison(t, s)
			if err := k.Launch(s, w, d.bufs); err != nil {
				t.Fatal(err)
			}
			gotH := d.read(t, s, d.bufs.H, "h")
			gotLogit := d.read(t, s, d.bufs.Logit, "logit")
			got := d.read(t, s, d.bufs.Out, "out")
			errOut := make([]float64, len(got))
			var worst, maxY float64
			for i := range got {
				errOut[i] = math.Abs(float64(got[i]) - want[i])
				worst = max(worst, errOut[i])
				maxY = max(maxY, math.Abs(wantY[i]))
			}
			rel := worst / maxY
			tol := moeTolerance(v.Kind)
			t.Logf("%-20s %-8v out: max error %.2g of max|moe|, relative L2 of moe %.2g; h relative L2 %.2g; logit %v (want %.6g)",
				sh.name, v, rel, relL2Shift(got, resid, wantY), relL2(gotH, wantH), gotLogit[0], wantLogit)
			if !(rel <= tol) {
				t.Errorf("%s %v: output off by %.2g of max|moe| (tolerance %g)", sh.name, v, rel, tol)
			}
			if e := math.Abs(float64(gotLogit[0])-wantLogit) / (1 + math.Abs(wantLogit)); !(e <= 1e-5) {
				t.Errorf("%s %v: shared expert gate logit %v, want %v", sh.name, v, gotLogit[0], wantLogit)
			}
		}
		d.free()
		w.free()
	}
}

// relL2Shift is ‖(got - base) - want‖ / ‖want‖.
func relL2Shift(got, base []float32, want []float64) float64 {
	var d, n float64
	for i := range want {
		e := float64(got[i]) - float64(base[i]) - want[i]
		d += e * e
		n += want[i] * want[i]
	}
	return math.Sqrt(d / n)
}

// TestMoELayerArgsMatchKernel: the bytes LaunchLayer passes by value are
// as many as every moe_layer entry point of the PTX takes (MoELayerArgs in
// moe.cu), so that a field added on one side only is caught without a GPU.
func TestMoELayerArgsMatchKernel(t *testing.T) {
	ptx, err := kernels.PTX("moe")
	if err != nil {
		t.Fatal(err)
	}
	params := regexp.MustCompile(`\.entry (moe_layer_\w+)\(\s*\.param \.align 8 \.b8 \w+\[(\d+)\]\s*\)`).FindAllStringSubmatch(string(ptx), -1)
	if len(params) != 2 {
		t.Fatalf("%d moe_layer entry points with one struct parameter in moe.ptx, want 2", len(params))
	}
	for _, p := range params {
		if n, _ := strconv.Atoi(p[2]); n != moeLayerArgsSize {
			t.Errorf("%s takes %d bytes; LaunchLayer passes %d", p[1], n, moeLayerArgsSize)
		}
	}
}
