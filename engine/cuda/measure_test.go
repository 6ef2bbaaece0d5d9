package cuda

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
	"petal/engine/quant"
)

// The measurements below run only with PETAL_CUDA_BENCH=1 (on a GPU): they
// take tens of seconds and gigabytes of device memory. They print tables;
// docs/bench/cuda/ keeps the logs.

func benchOnly(t *testing.T) *driver.Context {
	if os.Getenv("PETAL_CUDA_BENCH") == "" {
		t.Skip("measurement: set PETAL_CUDA_BENCH=1 to run")
	}
	return gpu(t)
}

// timeLaunches times n back-to-back runs of launch with an event between
// each pair and returns the median, after a few untimed runs.
func timeLaunches(t *testing.T, c *driver.Context, s *driver.Stream, n int, launch func() error) time.Duration {
	t.Helper()
	for range 3 {
		if err := launch(); err != nil {
			t.Fatal(err)
		}
	}
	ev := make([]*driver.Event, n+1)
	for i := range ev {
		var err error
		if ev[i], err = c.NewEvent(); err != nil {
			t.Fatal(err)
		}
		defer ev[i].Close()
	}
	if err := ev[0].Record(s); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if err := launch(); err != nil {
			t.Fatal(err)
		}
		if err := ev[i].Record(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev[n].Sync(); err != nil {
		t.Fatal(err)
	}
	d := make([]time.Duration, n)
	for i := range d {
		var err error
		if d[i], err = driver.Elapsed(ev[i], ev[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(d)
	return d[n/2]
}

func gbps(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }

// ceilings measures a device-to-device copy (bytes read plus written) and a
// streaming read with the mat-vec's 16-byte load, over 1 GiB each.
func ceilings(t *testing.T, c *driver.Context, s *driver.Stream, probe *driver.Module) (copyGBps, readGBps float64) {
	const size = 1 << 30
	a, err := c.Alloc(size, "copy source")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(a)
	b, err := c.Alloc(size, "copy destination")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(b)
	if err := s.Fill32(a, 0x3f800001, size/4); err != nil {
		t.Fatal(err)
	}
	dCopy := timeLaunches(t, c, s, 10, func() error { return s.Copy(b, a, size) })
	read, err := probe.Function("read_xor")
	if err != nil {
		t.Fatal(err)
	}
	grid := c.Device().SMs * 8
	var args driver.Args
	args.Ptr(a).I64(size / 16).Ptr(b)
	dRead := timeLaunches(t, c, s, 10, func() error { return s.Launch(read, driver.D1(grid), driver.D1(256), 0, &args) })
	copyGBps, readGBps = gbps(2*size, dCopy), gbps(size, dRead)
	t.Logf("ceiling: device-to-device copy of 1 GiB: %v, %.0f GB/s (read + written)", dCopy, copyGBps)
	t.Logf("ceiling: read_xor of 1 GiB (16-byte loads): %v, %.0f GB/s", dRead, readGBps)
	return
}

// altModules reads PETAL_CUDA_QMATVEC_ALT, "label=path,label=path": other
// builds of qmatvec.cu (nvcc's PTX or cubin) to load through the same path.
func altModules(t *testing.T) [][2]string {
	var alts [][2]string
	for _, kv := range strings.Split(os.Getenv("PETAL_CUDA_QMATVEC_ALT"), ",") {
		if label, path, ok := strings.Cut(kv, "="); ok {
			alts = append(alts, [2]string{label, path})
		}
	}
	return alts
}

// TestMeasureMatVecBandwidth times every variant of every build of the
// mat-vec on the model's shapes and compares the weight bytes read per
// second with the ceilings measured in the same run. Each build is checked
// against the float64 reference first.
func TestMeasureMatVecBandwidth(t *testing.T) {
	c := benchOnly(t)
	t.Log(c.Device())
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probePTX, _ := kernels.PTX("probe")
	probe, err := c.LoadModule(probePTX, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	copyGB, readGB := ceilings(t, c, s, probe)

	type build struct {
		label string
		mod   *driver.Module
	}
	start := time.Now()
	clangMod, err := LoadQMatVecModule(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load: clang PTX module qmatvec (driver JIT, cache as found): %v", time.Since(start))
	builds := []build{{"clang", clangMod}}
	for _, alt := range altModules(t) {
		img, err := os.ReadFile(alt[1])
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		mod, err := c.LoadModule(img, alt[0])
		if err != nil {
			t.Fatalf("%s: %v", alt[0], err)
		}
		t.Logf("load: %s module %s: %v", alt[0], alt[1], time.Since(start))
		builds = append(builds, build{alt[0], mod})
	}
	for _, b := range builds {
		defer b.mod.Close()
		for _, v := range MatVecVariants {
			k, err := NewMatVec(c, b.mod, v)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := k.Function().Info()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("resources: %-6s %v: %d registers, %d bytes local (spills), PTX %d, SASS sm_%d",
				b.label, v, fi.Registers, fi.LocalBytes, fi.PTXVersion, fi.SASSVersion)
		}
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
		x := randomVector(rng, sh.cols)
		want, absSum := reference(&m, x)
		dm, err := UploadQMatrix(c, up, &m, sh.name)
		if err != nil {
			t.Fatal(err)
		}
		dv := newDeviceVectors(t, c, s, x, len(want))
		for _, b := range builds {
			variants := MatVecVariants
			if b.label == "clang" {
				variants = append(variants[:len(variants):len(variants)], matVecLab...)
			}
			for _, v := range variants {
				k, err := NewMatVec(c, b.mod, v)
				if err != nil {
					t.Fatal(err)
				}
				dv.Poison(t, s)
				if err := k.Launch(s, dm, dv.x, dv.y); err != nil {
					t.Fatal(err)
				}
				lab := strings.HasPrefix(v.Name, "lab_")
				if worst, at := compareMatVec(dv.read(t, s), want, absSum); !lab && !(worst <= matVecTolerance) {
					t.Fatalf("%s %s %v: row %d off by %.2g of Σ|w·x|", sh.name, b.label, v, at, worst)
				}
				d := timeLaunches(t, c, s, 30, func() error { return k.Launch(s, dm, dv.x, dv.y) })
				g := gbps(dm.Bytes, d)
				table = append(table, fmt.Sprintf("| %-38s | %-11s | %-18v | %8.1f | %6.0f | %5.1f%% | %5.1f%% |",
					sh.name, b.label, v, float64(d.Nanoseconds())/1e3, g, 100*g/readGB, 100*g/copyGB))
			}
		}
		dv.free()
		dm.Free()
	}
	t.Logf("mat-vec, median of 30 launches; GB/s of weight bytes (codes, scales, biases); %% of read_xor (%.0f GB/s) and of copy (%.0f GB/s)", readGB, copyGB)
	t.Logf("%s", "| shape                                  | build       | variant            |       µs |   GB/s | %read | %copy |")
	for _, row := range table {
		t.Log(row)
	}
}

// TestMeasureLaunchAndGraph times the host cost of a launch through purego,
// and the device time per kernel launched directly and replayed in a graph.
func TestMeasureLaunchAndGraph(t *testing.T) {
	c := benchOnly(t)
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	probePTX, _ := kernels.PTX("probe")
	probe, err := c.LoadModule(probePTX, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	empty, err := probe.Function("empty")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	launchAll := func() error {
		for range n {
			if err := s.Launch(empty, driver.D1(1), driver.D1(32), 0, nil); err != nil {
				return err
			}
		}
		return nil
	}
	launchAll()
	s.Sync()
	start := time.Now()
	if err := launchAll(); err != nil {
		t.Fatal(err)
	}
	host := time.Since(start)
	s.Sync()
	direct := timeLaunches(t, c, s, 5, launchAll)
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := launchAll(); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	replay := timeLaunches(t, c, s, 5, func() error { return x.Launch(s) })
	t.Logf("launch: host time per cuLaunchKernel through purego: %.2f µs", float64(host.Nanoseconds())/1e3/n)
	t.Logf("launch: device time per empty kernel, launched one by one: %.2f µs; replayed in a graph of %d: %.2f µs",
		float64(direct.Nanoseconds())/1e3/n, n, float64(replay.Nanoseconds())/1e3/n)
}

// TestMeasureUploads times 1 GiB host-to-device copies: from pageable
// memory, through the pinned double-buffered Uploader, and from memory
// registered with the driver (as a memory-mapped checkpoint would be).
func TestMeasureUploads(t *testing.T) {
	c := benchOnly(t)
	s, err := c.NewStream("bench")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const size = 1 << 30
	dst, err := c.Alloc(size, "upload target")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(dst)
	src, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(src)
	for i := range src {
		src[i] = byte(i * 7)
	}
	timed := func(f func() error) time.Duration {
		start := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	report := func(what string, d time.Duration) {
		t.Logf("upload: %-44s %7.1f ms, %5.1f GB/s", what, float64(d.Microseconds())/1e3, gbps(size, d))
	}
	report("pageable cuMemcpyHtoDAsync", timed(func() error { return s.CopyToDevice(dst, src) }))
	for _, chunk := range []int64{8 << 20, 64 << 20} {
		up, err := c.NewUploader(s, chunk)
		if err != nil {
			t.Fatal(err)
		}
		report(fmt.Sprintf("Uploader, two pinned %d MiB buffers", chunk>>20), timed(func() error { return up.Upload(dst, src) }))
		up.Close()
	}
	reg := timed(func() error { return c.RegisterHost(src, true) })
	report("cuMemHostRegister (the registration alone)", reg)
	report("registered memory, one copy", timed(func() error { return s.CopyToDevice(dst, src) }))
	if err := c.UnregisterHost(src); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 1<<20)
	if err := s.CopyToHost(back, dst.Add(size-1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if string(back) != string(src[size-1<<20:]) {
		t.Fatal("the uploaded data differs from the source")
	}
}

// phaseClock points the clock builds of kernel families (kernels/clock/*.ptx,
// PETAL_MARK in device.h) loaded into a backend at one buffer, 16 points a
// block, and reads it.
type phaseClock struct {
	b      *Backend
	buf    driver.Ptr
	blocks int
}

const phaseSlots = 16 // PETAL_MARK's points a block

func newPhaseClock(t *testing.T, b *Backend) *phaseClock {
	blocks := 4 * b.ctx.Device().SMs
	buf, err := b.alloc(8*phaseSlots*int64(blocks), "phase clock")
	if err != nil {
		t.Fatal(err)
	}
	return &phaseClock{b: b, buf: buf, blocks: blocks}
}

// load loads the clock build of family, its petal_clock pointing at c's
// buffer; the module is closed with the backend, after its programs.
func (c *phaseClock) load(t *testing.T, family string) *driver.Module {
	src, err := os.ReadFile("kernels/clock/" + family + ".ptx")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := c.b.ctx.LoadModule(append(src, 0), family+" clock")
	if err != nil {
		t.Fatal(err)
	}
	c.b.mods = append(c.b.mods, mod)
	g, size, err := mod.Global("petal_clock")
	if err != nil || size != 8 {
		t.Fatalf("%s: petal_clock: %d bytes, %v", family, size, err)
	}
	if err := c.b.s.CopyToDevice(g, binary.LittleEndian.AppendUint64(nil, uint64(c.buf))); err != nil {
		t.Fatal(err)
	}
	return mod
}

// measure compiles ops, replays them 40 times (prep before each) and
// prints, per point of points, the median block's and the last block's
// time after the first block started, medians over the replays after the
// first five.
func (c *phaseClock) measure(t *testing.T, name string, ops []backend.Op, points map[int]string, prep func()) {
	b := c.b
	p, err := b.Compile(ops)
	if err != nil {
		t.Fatal(err)
	}
	const runs, skip = 40, 5
	med, last := map[int][]float64{}, map[int][]float64{}
	raw := make([]byte, 8*phaseSlots*c.blocks)
	for run := range runs {
		if err := b.s.Fill32(c.buf, 0, int64(2*phaseSlots*c.blocks)); err != nil {
			t.Fatal(err)
		}
		prep()
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := b.s.CopyToHost(raw, c.buf); err != nil {
			t.Fatal(err)
		}
		if err := b.s.Sync(); err != nil {
			t.Fatal(err)
		}
		if run < skip {
			continue
		}
		at := func(blk, k int) float64 { return float64(binary.LittleEndian.Uint64(raw[8*(blk*phaseSlots+k):])) }
		t0 := 0.0
		for blk := range c.blocks {
			for k := range points {
				if v := at(blk, k); v != 0 && (t0 == 0 || v < t0) {
					t0 = v
				}
			}
		}
		for k := range points {
			var v []float64
			for blk := range c.blocks {
				if x := at(blk, k); x != 0 {
					v = append(v, (x-t0)/1e3)
				}
			}
			if len(v) == 0 {
				continue
			}
			slices.Sort(v)
			med[k], last[k] = append(med[k], v[len(v)/2]), append(last[k], v[len(v)-1])
		}
	}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	fmt.Printf("%s, medians of %d replays, µs after the first block's start\n%-32s %10s %10s\n", name, runs-skip, "point", "median", "last block")
	for _, k := range slices.Sorted(maps.Keys(med)) {
		fmt.Printf("%-32s %10.2f %10.2f\n", points[k], median(med[k]), median(last[k]))
	}
}

// TestMeasureMoELayerPhases: where the time of one moe_layer launch goes
// at the 35B shape, at two and at one block a multiprocessor, from the
// clock build of moe.cu (PETAL_MARK's points of moe_layer).
func TestMeasureMoELayerPhases(t *testing.T) {
	benchOnly(t)
	o := DefaultOptions()
	o.MoELayer = true
	b := testBackend(t, o)
	c := newPhaseClock(t, b)
	var err error
	if b.moe, err = NewMoE(b.ctx, c.load(t, "moe"), MoEVariant{DefaultQMV.Kind, true}); err != nil {
		t.Fatal(err)
	}
	const E, H, I = 256, 2048, 512
	rng := freshRNG(t)
	h := randoms(rng, H, 2)
	n, r, e := newMoEBlock(t, b, randomMoEMatrices(rng, E, H, I, 8), I, h, randoms(rng, H, 1), randoms(rng, H, 1))
	points := map[int]string{0: "start", 1: "x copied and normed", 2: "x staged", 3: "phase 1 done", 4: "barrier 1 passed",
		5: "phase 2 done (gate/up)", 6: "barrier 2 passed", 7: "activations copied", 8: "activations staged", 9: "end",
		10: "router: last ticket", 11: "router: selection done"}
	for _, perSM := range []int{2, 1} {
		b.moe.layerPerSM = perSM
		c.measure(t, fmt.Sprintf("moe_layer at E=%d H=%d I=%d, %d blocks a multiprocessor", E, H, I, perSM), []backend.Op{n, r, e}, points,
			func() {
				if err := b.Write(n.H, h); err != nil {
					t.Fatal(err)
				}
			})
	}
}

// TestMeasureDecodePhases: where the time of a decoded token's main
// kernels goes at the 35B shapes, from the clock builds of their families,
// run as a decode step runs them, one graph a program: a Gated DeltaNet
// layer's input norm and first projections (qmv_group_norm, 12352 rows),
// its output projection (qmv, 2048 rows of 4096), the post-attention norm
// and the router (route_norm8), and the experts (moe_gate_up, then
// moe_down).
func TestMeasureDecodePhases(t *testing.T) {
	benchOnly(t)
	b := testBackend(t, DefaultOptions())
	c := newPhaseClock(t, b)
	var err error
	if b.qmv, err = NewQMV(b.ctx, c.load(t, "qmv"), DefaultQMV); err != nil {
		t.Fatal(err)
	}
	if b.route, err = NewRoute(c.load(t, "route")); err != nil {
		t.Fatal(err)
	}
	if b.moe, err = NewMoE(b.ctx, c.load(t, "moe"), MoEVariant{DefaultQMV.Kind, true}); err != nil {
		t.Fatal(err)
	}

	rng := freshRNG(t)
	const E, H, I = 256, 2048, 512
	random4 := func(rows, cols int) backend.Matrix {
		u, err := b.Upload(quant.RandomMatrix(rng, 1, rows, cols, 4, 64))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	h := randoms(rng, H, 2)
	n := &backend.AddRMSNorm{H: floats(b, h), Delta: floats(b, randoms(rng, H, 1)), Weight: floats(b, randoms(rng, H, 1)),
		Out: floats(b, nans(H)), Rows: 1, Dim: H, Eps: 1e-6}
	grp := &backend.QLinearGroup{X: n.Out, W: []backend.Matrix{random4(8192, H), random4(4096, H), random4(32, H), random4(32, H)},
		Y: floats(b, nans(8192+4096+64)), Rows: 1}
	out := &backend.QLinear{X: floats(b, randoms(rng, 4096, 1)), W: random4(H, 4096), Y: floats(b, nans(H)), Rows: 1}
	mn, r, e := newMoEBlock(t, b, randomMoEMatrices(rng, E, H, I, 8), I, h, randoms(rng, H, 1), randoms(rng, H, 1))
	var ids []int32
	for _, x := range rng.Perm(E)[:MoETopK] {
		ids = append(ids, int32(x))
	}
	if err := b.WriteInts(r.Idx, ids); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(r.Weights, randoms(rng, MoETopK, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(mn.Out, randoms(rng, H, 1)); err != nil {
		t.Fatal(err)
	}
	prep := func() { // the norms add delta to h in place
		for _, buf := range []backend.Buffer{n.H, mn.H} {
			if err := b.Write(buf, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	qmvPoints := map[int]string{0: "start", 1: "first weights asked", 2: "x copied (and normed)", 3: "x staged",
		4: "step 1 done", 5: "step 2 done", 6: "step 3 done", 7: "step 4 done", 14: "rows done", 15: "norm written back (last block)"}
	c.measure(t, "qmv_group_norm: a Gated DeltaNet layer's norm and in_proj (12352 x 2048)", []backend.Op{n, grp}, qmvPoints, prep)
	c.measure(t, "qmv: out_proj (2048 x 4096)", []backend.Op{out}, qmvPoints, prep)
	c.measure(t, "route_norm8: the post-attention norm and the router (256 x 2048, 8-bit)", []backend.Op{mn, r},
		map[int]string{0: "start", 1: "x staged (normed)", 2: "logits written", 3: "ticket taken", 4: "selection done (last block)"}, prep)
	c.measure(t, "moe_gate_up, moe_down: the experts (8 of 256 and the shared one)", []backend.Op{e},
		map[int]string{0: "gate/up: start", 1: "gate/up: x copied", 2: "gate/up: x staged", 3: "gate/up: done",
			8: "down: start", 9: "down: routing read", 10: "down: h copied", 11: "down: h staged", 12: "down: done"}, prep)
}
