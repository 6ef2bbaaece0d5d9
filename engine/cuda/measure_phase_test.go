package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/cuda/driver"
)

// phaseBench is a measurement's context, a stream on it and phase.cu's
// functions by name, for the test's life.
func phaseBench(t *testing.T, stream string) (*driver.Context, *driver.Stream, func(string) *driver.Function) {
	c := benchOnly(t)
	s, err := c.NewStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mod, err := loadFamily(c, "phase")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	return c, s, func(name string) *driver.Function {
		f, err := mod.Function(name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}

// allocFor is bytes of device memory freed when the test ends.
func allocFor(t *testing.T, c *driver.Context, bytes int64, label string) driver.Ptr {
	p, err := c.Alloc(bytes, label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(p) })
	return p
}

// TestMeasurePhases times the boundary between dependent phases of a
// decode step (phase.cu): 64 phases shaped like a decode mat-vec (every
// block stages the whole 2048-float vector the phase before wrote; a warp a
// row of the phase's own 2048 x 2048 int8 matrix, 4 MB a phase, 256 MB in
// all, so that each phase reads device memory as a step's layers do), run
// as one kernel a phase replayed in a graph (plain; with programmatic
// dependent launch; with pdl and each kernel's rows asked of L2 before its
// wait) and as one persistent launch whose blocks meet at a grid-wide
// barrier between phases (moe_layer's fenced barrier; one with
// acquire/release atomics and no separate fences; that one with the next
// phase's rows asked of L2 before each barrier; with the next phase's row
// loaded into registers before each barrier, and that with a counter the
// blocks add to and watch as the barrier), and as a kernel a phase letting
// the next launch at its start, its rows asked of L2 or loaded into
// registers before its wait. All must give the same
// bits, within a float64 reference's bound, before and again after their
// timed runs: a barrier that let a block read a vector before every block
// had written it would show. Then µs a phase.
func TestMeasurePhases(t *testing.T) {
	c, s, fn := phaseBench(t, "phases")
	step, stepPre := fn("phase_step"), fn("phase_step_pre")
	runFence, runAcqRel, runAcqRelPre := fn("phase_run_fence"), fn("phase_run_acqrel"), fn("phase_run_acqrel_pre")
	stepPreEarly, stepReg, stepSmem := fn("phase_step_pre_early"), fn("phase_step_reg"), fn("phase_step_smem")
	runAcqRelReg, runCountReg := fn("phase_run_acqrel_reg"), fn("phase_run_count_reg")
	stepRegV4, runFlagsReg := fn("phase_step_reg_v4"), fn("phase_run_flags_reg")
	runClFlagsReg, runClCountReg, runClFlagsRegV4 := fn("phase_run_clflags_reg"), fn("phase_run_clcount_reg"), fn("phase_run_clflags_reg_v4")

	const n, phases = 2048, 64
	rng := rand.New(rand.NewPCG(5, 8))
	w := make([]int8, phases*n*n)
	for i := 0; i < len(w); i += 16 { // 16 values from -7 to 7 a draw, mean 0
		u := rng.Uint64()
		for j := range 16 {
			if q := int8(u >> (4 * j) & 15); q > 0 {
				w[i+j] = q - 8
			}
		}
	}
	x0 := make([]float32, n)
	for i := range x0 {
		x0[i] = rng.Float32()*2 - 1
	}
	// w's spread is sqrt(17.5) = 4.18: a phase keeps the vector's size
	scale := float32(1 / (math.Sqrt(17.5) * math.Sqrt(n)))
	alloc := func(bytes int64, label string) driver.Ptr { return allocFor(t, c, bytes, label) }
	// bar: the barriers' words (phase.cu: four, then a word a block from
	// 64, a word a cluster of 4 from 64 + 1024 and of 8 from 64 + 2048)
	const barWords = 64 + 3*1024
	wd, a, b, bar := alloc(phases*n*n, "w"), alloc(4*n, "a"), alloc(4*n, "b"), alloc(4*barWords, "barrier")
	if err := s.CopyToDevice(wd, bytesOf(w)); err != nil {
		t.Fatal(err)
	}
	if err := s.Fill32(bar, 0, barWords); err != nil {
		t.Fatal(err)
	}
	blocks := 2 * c.Device().SMs // the decode mat-vecs' grid; 256 threads and 8 KB a block fit two a multiprocessor
	grid, block, shared := driver.D1(blocks), driver.D1(256), 4*n

	kernelPhases := func(f *driver.Function, shared int) error {
		for p := range phases {
			x, y := a, b
			if p%2 == 1 {
				x, y = b, a
			}
			var args driver.Args
			args.Ptr(wd.Add(int64(p) * n * n)).Ptr(x).Ptr(y).I32(n).F32(scale)
			if err := s.Launch(f, grid, block, shared, &args); err != nil {
				return err
			}
		}
		return nil
	}
	persistent := func(f *driver.Function) func() error {
		return func() error {
			var args driver.Args
			args.Ptr(wd).Ptr(a).Ptr(b).I32(n).F32(scale).I32(phases).Ptr(bar)
			return s.Launch(f, grid, block, shared, &args)
		}
	}
	graphShared := func(f *driver.Function, programmatic bool, shared int) func() error {
		s.SetProgrammatic(programmatic)
		defer s.SetProgrammatic(false)
		return capturedGraph(t, s, func() error { return kernelPhases(f, shared) })
	}
	graph := func(f *driver.Function, programmatic bool) func() error { return graphShared(f, programmatic, shared) }
	// persistentClusters: the persistent launch in clusters of k blocks, a
	// warp a row (n/8 blocks), nil where the GPU cannot hold them all at once
	persistentClusters := func(f *driver.Function, k int) func() error {
		clusters := n / 8 / k
		fit, err := f.MaxActiveClusters(256, k, shared)
		if err != nil {
			t.Fatal(err)
		}
		if fit < clusters {
			t.Logf("%s in clusters of %d left out: %d clusters fit at once, %d wanted", f.Name, k, fit, clusters)
			return nil
		}
		return func() error {
			var args driver.Args
			args.Ptr(wd).Ptr(a).Ptr(b).I32(n).F32(scale).I32(phases).Ptr(bar)
			return s.LaunchCluster(f, driver.D1(clusters*k), block, driver.D1(k), shared, &args)
		}
	}
	type variant struct {
		name string
		run  func() error
	}
	variants := []variant{
		{"a kernel a phase, graph", graph(step, false)},
		{"a kernel a phase, graph, pdl", graph(step, true)},
		{"the same, rows to L2 before the wait", graph(stepPre, true)},
		{"one launch, fenced barrier", persistent(runFence)},
		{"one launch, acq/rel barrier", persistent(runAcqRel)},
		{"the same, next rows to L2 first", persistent(runAcqRelPre)},
		{"pdl, next let launch at the start, L2", graph(stepPreEarly, true)},
	}
	// the register forms take a warp a row, 64 bytes of it a lane (phase.cu's PHASE_ROW_LOADS)
	if blocks*256/32 >= n && n == 32*16*4 {
		variants = append(variants, []variant{
			{"the same, rows in registers", graph(stepReg, true)},
			{"the same, rows in shared memory", graphShared(stepSmem, true, shared+8*n)},
			{"one launch, acq/rel, next row in regs", persistent(runAcqRelReg)},
			{"one launch, counter, next row in regs", persistent(runCountReg)},
			{"pdl, rows in regs, x in 16-byte loads", graph(stepRegV4, true)},
			{"one launch, a flag a block, row in regs", persistent(runFlagsReg)},
		}...)
		for _, k := range []int{4, 8} {
			for _, v := range []struct {
				name string
				f    *driver.Function
			}{
				{"leaders' flags", runClFlagsReg}, {"leaders' counter", runClCountReg}, {"leaders' flags, x in 16 B", runClFlagsRegV4},
			} {
				if run := persistentClusters(v.f, k); run != nil {
					variants = append(variants, variant{fmt.Sprintf("clusters of %d, %s", k, v.name), run})
				}
			}
		}
	} else {
		t.Logf("the register forms left out: %d warps for %d rows", blocks*256/32, n)
	}

	// the float64 reference of the 64 phases from x0
	ref := make([]float64, n)
	for i, v := range x0 {
		ref[i] = float64(v)
	}
	for p := range phases {
		next := make([]float64, n)
		for r := range n {
			var acc float64
			for k, q := range w[(p*n+r)*n : (p*n+r+1)*n] {
				acc += float64(q) * ref[k]
			}
			next[r] = acc * float64(scale)
		}
		ref = next
	}
	// check runs v once from x0 and holds its result to the reference's
	// bound and to the first variant's bits (after: the timed runs before
	// it, each starting where the last ended and advancing the barriers'
	// words)
	var first []float32
	check := func(v variant, after string) {
		if err := s.CopyToDevice(a, bytesOf(x0)); err != nil {
			t.Fatal(err)
		}
		if err := s.Fill32(b, nanBits, n); err != nil {
			t.Fatal(err)
		}
		if err := v.run(); err != nil {
			t.Fatalf("%s%s: %v", v.name, after, err)
		}
		got := make([]float32, n)
		if err := s.CopyToHost(bytesOf(got), a); err != nil { // an even number of phases ends in a
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatalf("%s%s: %v", v.name, after, err)
		}
		var ss, worst float64
		for i, r := range ref {
			ss += r * r
			worst = max(worst, math.Abs(float64(got[i])-r))
		}
		if rms := math.Sqrt(ss / n); !(worst <= 1e-3*rms) {
			t.Fatalf("%s%s: after %d phases the worst element is %.3g off the float64 reference, %.3g of its RMS %.3g", v.name, after, phases, worst, worst/rms, rms)
		}
		if first == nil {
			first = got
			return
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
				t.Fatalf("%s%s: element %d is %v, %v under %s", v.name, after, i, got[i], first[i], variants[0].name)
			}
		}
	}
	for _, v := range variants {
		check(v, "")
	}
	t.Logf("%d phases, %d blocks of 256 threads, %.1f MB read a phase, a matrix of its own (%s)", phases, blocks, float64(n*n)/1e6, c.Device().Name)
	for _, v := range variants {
		d := timeLaunches(t, c, s, 20, v.run)
		check(v, " after its timed runs")
		us := float64(d.Nanoseconds()) / 1e3 / phases
		t.Logf("%-38s %7.2f µs a phase, %6.0f GB/s", v.name, us, float64(n*n)/us/1e3)
	}
}

// TestMeasureSplitReduce times what summing blocks' partial vectors with
// atomics costs (into one set of sums, and spread over 8 and 32 copies of
// them, each sum taking 1/copies of the blocks) (phase.cu's phase_reduce_*): tasks blocks each add a
// partial of 2048 floats, as a mat-vec split over its inner dimension would
// (the experts' down projection, 9 x 512 hidden rows in tasks slices),
// against the same launch storing its partials (the loads and a store, no
// sum). The fixed-point sum must be the float64 reference's to its
// 2^-32 units exactly (integer sums), the float32 one within rounding.
func TestMeasureSplitReduce(t *testing.T) {
	c, s, fn := phaseBench(t, "reduce")
	store, u64, f32 := fn("phase_reduce_store"), fn("phase_reduce_u64"), fn("phase_reduce_f32")
	const n, maxTasks, launches = 2048, 288, 16
	rng := rand.New(rand.NewPCG(7, 9))
	part := make([]float32, maxTasks*n)
	for i := range part {
		part[i] = float32(rng.NormFloat64())
	}
	alloc := func(bytes int64, label string) driver.Ptr { return allocFor(t, c, bytes, label) }
	const maxCopies = 32
	pd, out, acc := alloc(4*maxTasks*n, "partials"), alloc(4*maxTasks*n, "stored"), alloc(8*maxCopies*n, "sums")
	if err := s.CopyToDevice(pd, bytesOf(part)); err != nil {
		t.Fatal(err)
	}
	copies := 1 // phase_reduce_u64's copies of the sums
	launch := func(f *driver.Function, dst driver.Ptr, tasks int) error {
		var args driver.Args
		args.Ptr(pd).Ptr(dst).I32(n)
		if f == u64 {
			args.I32(int32(copies))
		}
		return s.Launch(f, driver.D1(tasks), driver.D1(256), 0, &args)
	}
	for _, tasks := range []int{72, 144, 288} {
		// the sums of one launch against float64's
		want := make([]float64, n)
		wantFixed := make([]int64, n)
		for b := range tasks {
			for i, v := range part[b*n : (b+1)*n] {
				want[i] += float64(v)
				wantFixed[i] += int64(math.RoundToEven(float64(v) * (1 << 32)))
			}
		}
		if err := s.Fill32(acc, 0, 2*n); err != nil {
			t.Fatal(err)
		}
		if err := launch(u64, acc, tasks); err != nil {
			t.Fatal(err)
		}
		gotFixed := make([]int64, n)
		if err := s.CopyToHost(bytesOf(gotFixed), acc); err != nil {
			t.Fatal(err)
		}
		if err := s.Fill32(acc, 0, n); err != nil {
			t.Fatal(err)
		}
		if err := launch(f32, acc, tasks); err != nil {
			t.Fatal(err)
		}
		gotF32 := make([]float32, n)
		if err := s.CopyToHost(bytesOf(gotF32), acc); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if gotFixed[i] != wantFixed[i] {
				t.Fatalf("%d tasks: fixed-point sum %d is %d, want %d", tasks, i, gotFixed[i], wantFixed[i])
			}
			if d := math.Abs(float64(gotF32[i]) - want[i]); d > 1e-5*math.Sqrt(float64(tasks)) {
				t.Fatalf("%d tasks: float32 sum %d is %v, %.3g off float64's %v", tasks, i, gotF32[i], d, want[i])
			}
		}
		// launches back to back in a graph with pdl, µs a launch
		graph := func(f *driver.Function, dst driver.Ptr) func() error {
			s.SetProgrammatic(true)
			defer s.SetProgrammatic(false)
			return capturedGraph(t, s, func() error {
				for range launches {
					if err := launch(f, dst, tasks); err != nil {
						return err
					}
				}
				return nil
			})
		}
		for _, v := range []struct {
			name   string
			f      *driver.Function
			dst    driver.Ptr
			copies int
		}{{"store partials (baseline)", store, out, 1}, {"red.add.u64 fixed point", u64, acc, 1},
			{"red.add.u64, 8 copies", u64, acc, 8}, {"red.add.u64, 32 copies", u64, acc, maxCopies}, {"red.add.f32", f32, acc, 1}} {
			copies = v.copies
			d := timeLaunches(t, c, s, 20, graph(v.f, v.dst))
			t.Logf("%3d tasks x %d floats, %-26s %6.2f µs a launch", tasks, n, v.name, float64(d.Nanoseconds())/1e3/launches)
		}
		copies = 1
	}
}
