package cuda

import (
	"fmt"
	"testing"
	"time"

	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
	"petal/engine/quant"
)

func loadProbe(t *testing.T, c *driver.Context) *driver.Module {
	probePTX, err := kernels.PTX("probe")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := c.LoadModule(probePTX, "probe")
	if err != nil {
		t.Fatal(err)
	}
	return probe
}

// TestMeasureQMV times the old mat-vec (qmatvec r4u1) and every qmv variant
// side by side on the model's shapes, with each one's error against float64
// on Gaussian inputs and on inputs with outliers.
func TestMeasureQMV(t *testing.T) {
	c := benchOnly(t)
	t.Log(c.Device())
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probe := loadProbe(t, c)
	defer probe.Close()
	copyGB, readGB := ceilings(t, c, s, probe)
	oldMod, err := LoadQMatVecModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer oldMod.Close()
	old, err := NewMatVec(c, oldMod, DefaultMatVec)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mod, err := LoadQMVModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	t.Logf("load: qmv module (driver JIT, cache as found): %v", time.Since(start))
	type launcher struct {
		name string
		kind QKind
		run  func(m *QMatrix, x, y driver.Ptr) error
	}
	ls := []launcher{{"qmatvec r4u1 (old default)", QF32, func(m *QMatrix, x, y driver.Ptr) error { return old.Launch(s, m, x, y) }}}
	for _, v := range QMVVariants {
		k, err := NewQMV(c, mod, v)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := k.Function().Info()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("resources: qmv %-12v %d registers, %d bytes local (spills)", v, fi.Registers, fi.LocalBytes)
		ls = append(ls, launcher{"qmv " + v.String(), v.Kind, func(m *QMatrix, x, y driver.Ptr) error { return k.Launch(s, m, x, y) }})
	}

	up, err := c.NewUploader(s, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	rng := freshRNG(t)
	shapes := []matVecShape{
		{"lm_head 248320x2048", 1, 248320, 2048},
		{"experts.gate_up 256x512x2048", 256, 512, 2048},
		{"experts.down 256x2048x512", 256, 2048, 512},
		{"o_proj 2048x4096 (L2-resident)", 1, 2048, 4096},
		{"expert.gate_up 512x2048 (L2-resident)", 1, 512, 2048},
	}
	var table []string
	for _, sh := range shapes {
		m := quant.RandomMatrix(rng, sh.experts, sh.rows, sh.cols, 4, 64)
		dm, err := UploadQMatrix(c, up, &m, sh.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := dm.UploadScaleBias(up, &m); err != nil {
			t.Fatal(err)
		}
		xs := [][]float32{randomVector(rng, sh.cols), outlierVector(rng, sh.cols)}
		var dvs []*deviceVectors
		var wants, absSums [][]float64
		for _, x := range xs {
			want, absSum := reference(&m, x)
			wants, absSums = append(wants, want), append(absSums, absSum)
			dvs = append(dvs, newDeviceVectors(t, c, s, x, len(want)))
		}
		for _, l := range ls {
			var errs []string
			for i, dv := range dvs {
				dv.Poison(t, s)
				if err := l.run(dm, dv.x, dv.y); err != nil {
					t.Fatal(err)
				}
				got := dv.read(t, s)
				worst, at := compareMatVec(got, wants[i], absSums[i])
				if !(worst <= qmvTolerance(l.kind)) {
					t.Fatalf("%s %s: row %d off by %.2g of Σ|w·x|", sh.name, l.name, at, worst)
				}
				errs = append(errs, fmt.Sprintf("%8.1e | %8.1e", relL2(got, wants[i]), worst))
			}
			d := timeLaunches(t, c, s, 30, func() error { return l.run(dm, dvs[0].x, dvs[0].y) })
			g := gbps(dm.Bytes, d)
			table = append(table, fmt.Sprintf("| %-38s | %-26s | %7.1f | %5.0f | %5.1f%% | %s | %s |",
				sh.name, l.name, float64(d.Nanoseconds())/1e3, g, 100*g/readGB, errs[0], errs[1]))
		}
		for _, dv := range dvs {
			dv.free()
		}
		dm.Free()
	}
	t.Logf("mat-vec, median of 30 launches; GB/s of weight bytes (codes, scales, biases); %% of read_xor (%.0f GB/s; copy %.0f GB/s); errors against float64: relative L2 and worst |err|/Σ|w·x| of a row, for Gaussian x and for x with outliers (one in 64 ×50)", readGB, copyGB)
	t.Log("| shape                                  | kernel                     |      µs |  GB/s | %read | relL2 N  | worst N  | relL2 out | worst out |")
	for _, row := range table {
		t.Log(row)
	}
}

// TestMeasureMoE times one token's MoE block (both kernels) on the 35B
// shapes: once launched directly with the same experts each time (their
// weights then sit in L2), and as 32 layers captured in one graph, each
// layer with its own 8 experts (a permutation of the 256) and its own
// shared expert, so that no weight is read twice from L2.
func TestMeasureMoE(t *testing.T) {
	c := benchOnly(t)
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probe := loadProbe(t, c)
	defer probe.Close()
	_, readGB := ceilings(t, c, s, probe)
	mod, err := LoadMoEModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
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
	// The shared experts of all layers, as stacks of `layers`.
	hm.sGate = quant.RandomMatrix(rng, layers, I, H, 4, 64)
	hm.sUp = quant.RandomMatrix(rng, layers, I, H, 4, 64)
	hm.sDown = quant.RandomMatrix(rng, layers, H, I, 4, 64)
	hm.sExpertGate = quant.RandomMatrix(rng, layers, 1, H, 8, 64)
	stack := hm.upload(t, c, up, moeShape{"35B stacks", E, H, I})
	defer stack.free()
	layer := func(l int) *MoEWeights {
		return &MoEWeights{Experts: E, Hidden: H, Inter: I, Gate: stack.Gate, Up: stack.Up, Down: stack.Down,
			SharedGate: stack.SharedGate.RowRange(l*I, I), SharedUp: stack.SharedUp.RowRange(l*I, I),
			SharedDown: stack.SharedDown.RowRange(l*H, H), SharedExpertGate: stack.SharedExpertGate.RowRange(l, 1)}
	}
	perm := rng.Perm(E)
	ids := make([]int32, layers*MoETopK)
	wts := make([]float32, layers*MoETopK)
	for l := range layers {
		_, w := randomRouting(rng, E)
		for k := range MoETopK {
			ids[l*MoETopK+k] = int32(perm[(l*MoETopK+k)%E])
			wts[l*MoETopK+k] = w[k]
		}
	}
	x, resid := randomVector(rng, H), randomVector(rng, H)
	d := newDeviceMoE(t, c, s, sh, x, resid, ids[:MoETopK], wts[:MoETopK])
	defer d.free()
	allIDs, err := c.Alloc(int64(4*len(ids)), "ids")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(allIDs)
	allW, err := c.Alloc(int64(4*len(wts)), "weights")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(allW)
	if err := s.CopyToDevice(allIDs, bytesOf(ids)); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToDevice(allW, bytesOf(wts)); err != nil {
		t.Fatal(err)
	}
	bytes := layer(0).Bytes()
	floor := float64(bytes) / readGB / 1e3 // µs
	t.Logf("MoE of one token, one layer: %d weight bytes (8 experts × 3 matrices + shared expert + its gate); floor at read_xor's %.0f GB/s: %.2f µs", bytes, readGB, floor)
	for _, v := range MoEVariants {
		k, err := NewMoE(c, mod, v)
		if err != nil {
			t.Fatal(err)
		}
		d.Poison(t, s)
		for _, f := range []*driver.Function{k.up, k.down} {
			fi, err := f.Info()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("resources: %-22s %d registers, %d bytes local (spills)", f.Name, fi.Registers, fi.LocalBytes)
		}
		bufs := func(l int) MoEBuffers {
			b := d.bufs
			b.IDs, b.Weights = allIDs.Add(int64(4*MoETopK*l)), allW.Add(int64(4*MoETopK*l))
			return b
		}
		direct := timeLaunches(t, c, s, 30, func() error { return k.Launch(s, layer(0), bufs(0)) })
		// graphOf times `layers` layers of launch captured in one graph.
		graphOf := func(launch func(l int) error) float64 {
			if err := s.BeginCapture(); err != nil {
				t.Fatal(err)
			}
			for l := range layers {
				if err := launch(l); err != nil {
					t.Fatal(err)
				}
			}
			g, err := s.EndCapture()
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			gx, err := g.Instantiate()
			if err != nil {
				t.Fatal(err)
			}
			defer gx.Close()
			return float64(timeLaunches(t, c, s, 10, func() error { return gx.Launch(s) }).Nanoseconds()) / 1e3 / layers
		}
		per := graphOf(func(l int) error { return k.Launch(s, layer(l), bufs(l)) })
		perUp := graphOf(func(l int) error { return k.LaunchGateUp(s, layer(l), bufs(l)) })
		perDown := graphOf(func(l int) error { return k.LaunchDown(s, layer(l), bufs(l)) })
		out := d.read(t, s, d.bufs.Out, "out")
		for i, v := range out {
			if v != v {
				t.Fatalf("%v: out[%d] is NaN", v, i)
			}
		}
		t.Logf("MoE %-8v direct launches, same experts (L2-warm): %6.2f µs/token; graph of %d layers, distinct experts: %6.2f µs/layer = %5.0f GB/s, %4.1f%% of read_xor (floor %.2f µs); gate_up alone %.2f µs, down alone %.2f µs",
			v, float64(direct.Nanoseconds())/1e3, layers, per, float64(bytes)/per/1e3, 100*floor/per, floor, perUp, perDown)
	}
}
