package cuda

import (
	"fmt"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// capturedGraph captures launch's queued work on s into a graph (with the
// stream's programmatic setting as it is) and returns a replay of it; the
// graph lives until the test ends.
func capturedGraph(t *testing.T, s *driver.Stream, launch func() error) func() error {
	t.Helper()
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := launch(); err != nil {
		s.EndCapture()
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	gx, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gx.Close() })
	return func() error { return gx.Launch(s) }
}

// timeGraph captures launch once into a graph, replays it, and returns
// the median replay time in µs.
func timeGraph(t *testing.T, c *driver.Context, s *driver.Stream, launch func() error) float64 {
	t.Helper()
	return float64(timeLaunches(t, c, s, 10, capturedGraph(t, s, launch)).Nanoseconds()) / 1e3
}

// cloneQMatrix copies q to new device memory (the same weights at other
// addresses, so that layers do not share L2 lines).
func cloneQMatrix(t *testing.T, c *driver.Context, s *driver.Stream, q *QMatrix) *QMatrix {
	t.Helper()
	align := func(n int64) int64 { return (n + 255) &^ 255 }
	groups := int64(q.Rows) * int64(q.Cols/q.GroupSize)
	wb, sb := int64(q.Rows)*int64(q.Cols*q.Bits/8), 2*groups
	total := align(wb) + 2*align(sb)
	mem, err := c.Alloc(total, "clone")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(mem, q.Words, total); err != nil {
		t.Fatal(err)
	}
	n := *q
	n.mem, n.sb, n.Words = mem, 0, mem
	n.Scales = mem.Add(align(wb))
	n.Biases = n.Scales.Add(align(sb))
	n.ScaleBias = 0
	if q.ScaleBias != 0 {
		if n.sb, err = c.Alloc(4*groups, "clone scale/bias"); err != nil {
			t.Fatal(err)
		}
		if err := s.Copy(n.sb, q.ScaleBias, 4*groups); err != nil {
			t.Fatal(err)
		}
		n.ScaleBias = n.sb
	}
	t.Cleanup(func() { n.Free() })
	return &n
}

// TestMeasureMoELayer times the MoE of one token with the router on the
// device: 32 layers in one graph, each with its own 8-bit router and its
// own copy of the expert stacks (so no expert comes from L2), the router
// alone and router + gate/up + down, per MoE variant, plain and under pdl.
func TestMeasureMoELayer(t *testing.T) {
	c := benchOnly(t)
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probe := loadProbe(t, c)
	defer probe.Close()
	_, readGB := ceilings(t, c, s, probe)
	moeMod := loadModule(t, LoadMoEModule, c)
	rk, err := NewRoute(loadModule(t, LoadRouteModule, c))
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.NewUploader(s, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	rng := freshRNG(t)
	const layers = 32
	sh := moeShape{"35B", 256, 2048, 512}
	E, H, I := sh.experts, sh.hidden, sh.inter
	hm := randomMoE(rng, sh)
	base := hm.upload(t, c, up, sh)
	defer base.free()
	ws := make([]*MoEWeights, layers)
	routers := make([]*QMatrix, layers)
	for l := range layers {
		w := &MoEWeights{Experts: E, Hidden: H, Inter: I}
		w.Gate, w.Up, w.Down = cloneQMatrix(t, c, s, base.Gate), cloneQMatrix(t, c, s, base.Up), cloneQMatrix(t, c, s, base.Down)
		w.SharedGate, w.SharedUp = cloneQMatrix(t, c, s, base.SharedGate), cloneQMatrix(t, c, s, base.SharedUp)
		w.SharedDown, w.SharedExpertGate = cloneQMatrix(t, c, s, base.SharedDown), cloneQMatrix(t, c, s, base.SharedExpertGate)
		ws[l] = w
		rm := quant.RandomMatrix(rng, 1, E, H, 8, 64)
		if routers[l], err = UploadQMatrix(c, up, &rm, "router"); err != nil {
			t.Fatal(err)
		}
		defer routers[l].Free()
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	x := randomVector(rng, H)
	d := newDeviceMoE(t, c, s, sh, x, randomVector(rng, H), make([]int32, MoETopK), make([]float32, MoETopK))
	defer d.free()
	d.Poison(t, s)
	logits := newBuf(t, c, s, E, "logits")
	counter := newBuf(t, c, s, 1, "counter")
	if err := s.Fill32(counter.P, 0, 1); err != nil {
		t.Fatal(err)
	}
	allIDs := newBuf(t, c, s, layers*MoETopK, "ids")
	allW := newBuf(t, c, s, layers*MoETopK, "weights")
	rb := func(l int) RouteBuffers {
		return RouteBuffers{X: d.bufs.X, Logits: logits.P, Counter: counter.P,
			IDs: allIDs.P.Add(int64(4 * MoETopK * l)), Weights: allW.P.Add(int64(4 * MoETopK * l))}
	}
	mb := func(l int) MoEBuffers {
		b := d.bufs
		b.IDs, b.Weights = rb(l).IDs, rb(l).Weights
		return b
	}
	routeAll := func() error {
		for l := range layers {
			if err := rk.Launch(s, routers[l], rb(l), MoETopK, true); err != nil {
				return err
			}
		}
		return nil
	}
	perRoute := timeGraph(t, c, s, routeAll) / layers
	ids := allIDs.Ints(t, s, "ids")
	distinct := map[int32]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	rBytes := routers[0].Bytes
	t.Logf("router 256x2048 8-bit (%d bytes): %.2f µs per layer in a graph of %d (floor %.2f µs at read_xor); %d distinct experts over %d layers",
		rBytes, perRoute, layers, float64(rBytes)/readGB/1e3, len(distinct), layers)
	bytes := ws[0].Bytes() + rBytes
	floor := float64(bytes) / readGB / 1e3
	for _, v := range MoEVariants {
		k, err := NewMoE(c, moeMod, v)
		if err != nil {
			t.Fatal(err)
		}
		// as plain launches and with programmatic dependent launch (pdl=on)
		for _, pdl := range []bool{false, true} {
			s.SetProgrammatic(pdl)
			per := timeGraph(t, c, s, func() error {
				for l := range layers {
					if err := rk.Launch(s, routers[l], rb(l), MoETopK, true); err != nil {
						return err
					}
					if err := k.Launch(s, ws[l], mb(l)); err != nil {
						return err
					}
				}
				return nil
			}) / layers
			s.SetProgrammatic(false)
			out := d.read(t, s, d.bufs.Out, "out")
			for i, f := range out {
				if f != f {
					t.Fatalf("%v: out[%d] is NaN", v, i)
				}
			}
			t.Logf("MoE layer %-8v router + gate_up + down pdl=%-5v graph of %d layers, each its own router and expert copies: %6.2f µs/layer (floor %.2f µs for %d bytes: %4.1f%%)",
				v, pdl, layers, per, floor, bytes, 100*floor/per)
		}
	}
}

// TestMeasureGDN times the Gated DeltaNet step kernel per split over 64
// layers' states in one graph (128 MB of state: none of it from L2), and a
// whole layer: the qkv/z/b/a projections as one mat-vec, the step, and
// out_proj, over 30 layers with their own weights.
func TestMeasureGDN(t *testing.T) {
	c := benchOnly(t)
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probe := loadProbe(t, c)
	defer probe.Close()
	_, readGB := ceilings(t, c, s, probe)
	k, err := NewGDN(loadModule(t, LoadGDNModule, c))
	if err != nil {
		t.Fatal(err)
	}
	rng := freshRNG(t)
	const layers, hk, hv, eps = 64, 16, 32, 1e-6
	D := GDNHeadDim
	L := randomGDNLayer(rng, hk, hv)
	tok := randomGDNToken(rng, L)
	qkvz := newBuf(t, c, s, L.chans+hv*D+2*hv, "qkv z b a")
	qkvz.Set(t, s, append(append(append(append([]float32(nil), tok.qkv...), tok.z...), tok.b...), tok.a...))
	zp := qkvz.P.Add(int64(4 * L.chans))
	bp := zp.Add(int64(4 * hv * D))
	ap := bp.Add(int64(4 * hv))
	convW := upBuf(t, c, s, L.convW, "conv w")
	aLog, dtBias, normW := upBuf(t, c, s, L.aLog, "A_log"), upBuf(t, c, s, L.dtBias, "dt_bias"), upBuf(t, c, s, L.normW, "norm w")
	out := newBuf(t, c, s, hv*D, "out")
	bufs := make([]GDNBuffers, layers)
	for l := range bufs {
		st := upBuf(t, c, s, L.state, "state")
		cs := upBuf(t, c, s, L.convState, "conv state")
		cnt := newBuf(t, c, s, hk+hv, "counters")
		if err := s.Fill32(cnt.P, 0, int64(cnt.N)); err != nil {
			t.Fatal(err)
		}
		bufs[l] = GDNBuffers{QKV: qkvz.P, Z: zp, B: bp, A: ap, ConvW: convW.P, ConvState: cs.P, ALog: aLog.P,
			DtBias: dtBias.P, NormW: normW.P, State: st.P, Out: out.P, Counters: cnt.P}
	}
	stateBytes := int64(2 * hv * D * D * 4)
	floor := float64(stateBytes) / readGB / 1e3
	for _, split := range GDNSplits {
		k.Split = split
		per := timeGraph(t, c, s, func() error {
			for l := range layers {
				if err := k.Launch(s, bufs[l], hk, hv, eps); err != nil {
					return err
				}
			}
			return nil
		}) / layers
		out.Floats(t, s, "out")
		t.Logf("GDN step split %2d: %5.2f µs per layer in a graph of %d (state read + written %d bytes: floor %.2f µs, %4.1f%%)",
			split, per, layers, stateBytes, floor, 100*floor/per)
	}
	k.Split = DefaultGDNSplit

	// The whole layer with its projections, DefaultQMV.
	qmvMod := loadModule(t, LoadQMVModule, c)
	mv, err := NewQMV(c, qmvMod, DefaultQMV)
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.NewUploader(s, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	const wl = 30
	inM := quant.RandomMatrix(rng, 1, L.chans+hv*D+2*hv, 2048, 4, 64)
	outM := quant.RandomMatrix(rng, 1, 2048, hv*D, 4, 64)
	in0, err := UploadQMatrix(c, up, &inM, "in_proj")
	if err != nil {
		t.Fatal(err)
	}
	defer in0.Free()
	out0, err := UploadQMatrix(c, up, &outM, "out_proj")
	if err != nil {
		t.Fatal(err)
	}
	defer out0.Free()
	if err := in0.UploadScaleBias(up, &inM); err != nil {
		t.Fatal(err)
	}
	if err := out0.UploadScaleBias(up, &outM); err != nil {
		t.Fatal(err)
	}
	ins, outs := make([]*QMatrix, wl), make([]*QMatrix, wl)
	for l := range wl {
		ins[l], outs[l] = cloneQMatrix(t, c, s, in0), cloneQMatrix(t, c, s, out0)
	}
	a := upBuf(t, c, s, randomVector(rng, 2048), "a")
	r := newBuf(t, c, s, 2048, "r")
	wBytes := in0.Bytes + out0.Bytes
	lFloor := float64(wBytes+stateBytes) / readGB / 1e3
	per := timeGraph(t, c, s, func() error {
		for l := range wl {
			if err := mv.Launch(s, ins[l], a.P, qkvz.P); err != nil {
				return err
			}
			if err := k.Launch(s, bufs[l], hk, hv, eps); err != nil {
				return err
			}
			if err := mv.Launch(s, outs[l], out.P, r.P); err != nil {
				return err
			}
		}
		return nil
	}) / wl
	r.Floats(t, s, "r")
	t.Logf("GDN layer (in_proj %dx2048 + step split %d + out_proj 2048x%d, %v): %5.2f µs per layer in a graph of %d (floor %.2f µs for %d bytes: %4.1f%%)",
		inM.Rows, k.Split, hv*D, DefaultQMV, per, wl, lFloor, wBytes+stateBytes, 100*lFloor/per)
}

// TestMeasureAttn times QKPrep + split attention + combine at contexts 4K,
// 32K and 128K over 10 layers' caches in one graph, for both KV types and a
// few split settings, against the KV bytes read.
func TestMeasureAttn(t *testing.T) {
	c := benchOnly(t)
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probe := loadProbe(t, c)
	defer probe.Close()
	_, readGB := ceilings(t, c, s, probe)
	k, err := NewAttn(c, loadModule(t, LoadAttnModule, c))
	if err != nil {
		t.Fatal(err)
	}
	rng := freshRNG(t)
	const layers = 10
	def := [2]int{k.MaxSplits, k.MinChunk}
	// A random block the caches are tiled with.
	tile := randomVector(rng, 4<<20)
	for i := range tile {
		tile[i] *= 0.5
	}
	tileF32 := upBuf(t, c, s, tile, "tile")
	tile16 := make([]uint16, len(tile))
	for i, f := range tile {
		tile16[i] = quant.ToBF16(f)
	}
	tileBF16 := upBuf(t, c, s, tile16, "tile")
	for _, kv := range []KVType{KVBF16, KVF32} {
		tileDev := tileF32
		if kv == KVBF16 {
			tileDev = tileBF16
		}
		for _, n := range []int{4096, 32768, 131072} {
			sh := attn35B(n, kv)
			rowBytes := int64(sh.KVHeads * AttnHeadDim * kv.Bytes())
			cacheBytes := rowBytes * int64(n)
			cases := make([]AttnBuffers, layers)
			one := newAttnCase(t, c, s, k, rng, attn35B(1, kv), 0)
			for l := range cases {
				b := one.b
				for _, p := range []*driver.Ptr{&b.KCache, &b.VCache} {
					mem, err := c.Alloc(cacheBytes, "cache")
					if err != nil {
						t.Fatal(err)
					}
					defer c.Free(mem)
					for off := int64(0); off < cacheBytes; off += 8 << 20 {
						if err := s.Copy(mem.Add(off), tileDev.P, min(8<<20, cacheBytes-off)); err != nil {
							t.Fatal(err)
						}
					}
					*p = mem
				}
				b.Pos = upBuf(t, c, s, []int32{int32(n - 1)}, "pos").P
				cases[l] = b
			}
			floor := float64(2*cacheBytes) / readGB / 1e3
			for _, sp := range [][2]int{def, {2 * def[0], 64}, {def[0], 256}} {
				k.MaxSplits, k.MinChunk = sp[0], sp[1]
				po, pml := k.PartialsBytes(sh)
				partO, partML := newBuf(t, c, s, int(po/4), "po"), newBuf(t, c, s, int(pml/4), "pml")
				for l := range cases {
					cases[l].PartO, cases[l].PartML = partO.P, partML.P
				}
				per := timeGraph(t, c, s, func() error {
					for l := range cases {
						if err := k.Launch(s, sh, cases[l]); err != nil {
							return err
						}
					}
					return nil
				}) / layers
				split := timeGraph(t, c, s, func() error {
					for l := range cases {
						if err := k.LaunchAttention(s, sh, cases[l]); err != nil {
							return err
						}
					}
					return nil
				}) / layers
				one.out.Floats(t, s, "out")
				t.Logf("attention %v n=%6d splits %3d/%3d: prep+split+combine %6.2f µs/layer, split+combine %6.2f (KV %s: floor %.2f µs, %4.1f%%)",
					kv, n, sp[0], sp[1], per, split, mib(2*cacheBytes), floor, 100*floor/per)
			}
		}
	}
	k.MaxSplits, k.MinChunk = def[0], def[1]
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
