package cuda

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
	"petal/engine/quant"
)

// TestGEMMTilesFit: every tile's shared memory fits a Hopper
// multiprocessor (227 KiB a block) twice, or as many times as the blocks it
// is built for, and the tile picks are tiles.
func TestGEMMTilesFit(t *testing.T) {
	for _, tile := range GEMMTiles {
		if s := tile.shared(); 2*s > 227<<10 {
			t.Errorf("tile %s takes %d bytes of shared memory: two blocks do not fit", tile, s)
		}
	}
	for _, tile := range slices.Concat(WGMMATiles, FitTiles, WidthTiles, DenseOnlyTiles, MoERegTiles, MoEStreamTiles) {
		if s := tile.shared(); tile.Blocks*s > 227<<10 {
			t.Errorf("tile %s takes %d bytes of shared memory: %d blocks do not fit", tile, s, tile.Blocks)
		}
	}
	for _, c := range []struct {
		tokens int
		kernel MoEKernel
		want   string
	}{{512, MoESmem, "m32"}, {1024, MoESmem, "m64"}, {4096, MoESmem, "m128"}, {100, MoESmem, "m16"}, {512, MoEReg, "r32"},
		{1024, MoEReg, "m64"}, {100, MoEReg, "r16"}, {2048, MoEReg, "m64"}, {4096, MoEReg, "m128"}, {100, MoEStream, "s16"},
		{512, MoEStream, "s16"}, {1024, MoEStream, "m64"}, {2048, MoEStream, "m64"}} {
		if got := MoETile(c.tokens, 256, c.kernel); got.Name != c.want {
			t.Errorf("MoE tile of %d tokens on 256 experts (moe=%s): %v, want %s", c.tokens, c.kernel, got, c.want)
		}
	}
	// Under UseWGMMA the wgmma tiles take m128's and m64's places, and
	// only theirs; without the tiles loaded UseWGMMA refuses.
	g := &GEMM{}
	if err := g.UseWGMMA(false); err == nil {
		t.Error("UseWGMMA without the wgmma tiles loaded: no error")
	}
	g = &GEMM{wg: slices.Concat(WGMMATiles, FitTiles)}
	if err := g.UseWGMMA(false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tokens int
		kernel MoEKernel
		want   string
	}{{4096, MoEStream, "w128o2"}, {2048, MoEStream, "w128o2"}, {1024, MoESmem, "w64o"}, {1024, MoEStream, "w64o"}, {512, MoEStream, "s16"}, {512, MoESmem, "m32"}, {100, MoESmem, "m16"}} {
		if got := g.MoETile(c.tokens, 256, c.kernel); got.Name != c.want {
			t.Errorf("MoE tile of %d tokens on 256 experts (moe=%s, wgmma): %v, want %s", c.tokens, c.kernel, got, c.want)
		}
	}
	if err := g.UseWGMMA(true); err != nil {
		t.Fatal(err)
	}
	// moeTiles checks the MoE's tile at each number of tokens on 256 experts.
	moeTiles := func(setting string, kernel MoEKernel, want map[int]string) {
		t.Helper()
		for tokens, name := range want {
			if got := g.MoETile(tokens, 256, kernel); got.Name != name {
				t.Errorf("MoE tile of %d tokens (%s): %v, want %s", tokens, setting, got, name)
			}
		}
	}
	// register-A: 64-row tiles up to 56 rows an expert (1792 tokens), 128 above
	moeTiles("gemm=wgr", MoEStream, map[int]string{4096: "w128r", 2048: "w128r", 1824: "w128r", 1792: "w64r", 1152: "w64r", 1024: "w64r", 512: "s16"})
	moeTiles("gemm=wgr, moe=wg", MoEWG, map[int]string{4096: "w128r", 2048: "w128r", 1024: "w64r", 512: "w32r", 256: "w32r", 100: "s16"})
	g.UndrainedTiles()
	moeTiles("gemm=wgrp", MoEStream, map[int]string{4096: "w128rp", 1024: "w64r", 512: "s16"})
	g.FitMoETiles(true, false)
	moeTiles("gemm=wgrp, moefit=on", MoEWG, map[int]string{8192: "w128rp", 4096: "w160rp", 3072: "w128rp", 2048: "w128rp", 1024: "w64r", 512: "w32r"})
	g.FitMoETiles(true, true)
	moeTiles("gemm=wgrp, moefit=all", MoEWG, map[int]string{8192: "w128rp", 4096: "w160rp", 3072: "w128rp", 2048: "w80rp", 1024: "w64r", 512: "w32r"})
	// gemm=wgrs and wgr3: w256rs or w256r3 in w256rp's place for the dense
	// GEMMs, once its kernels are there
	rp, _ := GEMMTileByName("w256rp")
	rp128, _ := GEMMTileByName("w128rp")
	for _, name := range []string{"w256rs", "w256r3"} {
		g.DenseIn256(name)
		if got := g.in256(rp); got.Name != "w256rp" {
			t.Errorf("DenseIn256(%q) before its kernels are loaded: %v, want w256rp", name, got)
		}
		g.tiles = map[string]gemmKernels{name: {dense: &driver.Function{}}}
		if got := g.in256(rp); got.Name != name {
			t.Errorf("DenseIn256(%q): %v in w256rp's place, want %s", name, got, name)
		}
		if got := g.in256(rp128); got.Name != "w128rp" {
			t.Errorf("DenseIn256(%q): %v in w128rp's place, want w128rp", name, got)
		}
		g.tiles = nil
	}
	g.DenseIn256("")
	// moefit=width: w160rw in w160rp's place, once its kernels are there
	g.FitMoETiles(true, false)
	g.WidthMoETiles(true)
	moeTiles("gemm=wgrp, moefit=width, w160rw not loaded", MoEWG, map[int]string{4096: "w160rp", 2048: "w128rp"})
	g.tiles = map[string]gemmKernels{"w160rw": {gateUp: &driver.Function{}}}
	moeTiles("gemm=wgrp, moefit=width", MoEWG, map[int]string{8192: "w128rp", 4096: "w160rw", 3072: "w128rp", 2048: "w128rp"})
	g.tiles = nil
	g.WidthMoETiles(false)
	g.FitMoETiles(false, false)
	if got := g.undrain(denseTile(4096, 8192, 132, true, true)); got.Name != "w256rp" {
		t.Errorf("dense tile of 4096x8192 (gemm=wgrp): %v, want w256rp", got)
	}
	if _, err := GEMMTileByName("m99"); err == nil {
		t.Error("tile m99 was found")
	}
	// The dense tiles on an H100's 132 multiprocessors at the shapes of
	// TestMeasureGEMM, each the fastest measured there (2026-12-06-wg3)
	// but at 512 x 512, where m16 (split) was.
	for _, c := range []struct {
		M, N   int
		wg, mm string
	}{{512, 8192, "w256o", "m128"}, {512, 4096, "w128o2", "m128"}, {512, 2048, "w64o", "m64"}, {512, 512, "m16", "m16"},
		{4096, 8192, "w256o", "m128"}, {4096, 512, "w128o2", "m128"}, {16, 2048, "m16", "m16"}} {
		if got := denseTile(c.M, c.N, 132, true, false); got.Name != c.wg {
			t.Errorf("dense tile of %dx%d (gemm=wg): %v, want %s", c.M, c.N, got, c.wg)
		}
		if got, want := denseTile(c.M, c.N, 132, true, true).Name, strings.NewReplacer("w256o", "w256r", "w128o2", "w128r", "w64o", "w64r").Replace(c.wg); got != want {
			t.Errorf("dense tile of %dx%d (gemm=wgr): %v, want %s", c.M, c.N, got, want)
		}
		if got := denseTile(c.M, c.N, 132, false, false); got.Name != c.mm {
			t.Errorf("dense tile of %dx%d (gemm=tc): %v, want %s", c.M, c.N, got, c.mm)
		}
	}
}

func bf16r(f float32) float32 { return quant.BF16(quant.ToBF16(f)) }

// parallelFor runs f(i) for i in [0, n) on every CPU.
func parallelFor(n int, f func(i int)) {
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// dequantAll expands m (all rows) to float32 as quant does, and to the
// bf16 the kernels round each weight to.
func dequantAll(m *quant.Matrix) (w, wb []float32) {
	rows := m.Rows * m.Experts
	w, wb = make([]float32, rows*m.Cols), make([]float32, rows*m.Cols)
	parallelFor(rows, func(r int) {
		row := w[r*m.Cols : (r+1)*m.Cols]
		m.DequantizeRow(r, row)
		for c, v := range row {
			wb[r*m.Cols+c] = bf16r(v)
		}
	})
	return w, wb
}

// gemmErrors compares y (rows of the kernel's output) with three references
// of the same rows: float64 of the bf16-rounded inputs (what the tensor
// cores compute; err is max |y - ref| / Σ|w·x| of the row), float64 of the
// exact inputs and the float32 product of the exact inputs (relative L2).
type gemmErrors struct {
	bf, l2_64, l2_32 float64
}

// denseRef holds, for the checked rows, y from bf16-rounded inputs in
// float64 with Σ|w·x|, from exact inputs in float64, and in float32.
type denseRef struct {
	rows         []int
	N            int
	bf, abs, y64 []float64
	y32          []float32
}

func denseReference(w, wb, x, xb []float32, K, N int, rows []int) *denseRef {
	r := &denseRef{rows: rows, N: N}
	n := len(rows) * N
	r.bf, r.abs, r.y64, r.y32 = make([]float64, n), make([]float64, n), make([]float64, n), make([]float32, n)
	parallelFor(len(rows), func(i int) {
		m := rows[i]
		xr, xbr := x[m*K:(m+1)*K], xb[m*K:(m+1)*K]
		for o := range N {
			wr, wbr := w[o*K:(o+1)*K], wb[o*K:(o+1)*K]
			var s64, sb, ab float64
			var s32 float32
			for k := range K {
				s64 += float64(wr[k]) * float64(xr[k])
				p := float64(wbr[k]) * float64(xbr[k])
				sb += p
				ab += math.Abs(p)
				s32 += wr[k] * xr[k]
			}
			r.bf[i*N+o], r.abs[i*N+o], r.y64[i*N+o], r.y32[i*N+o] = sb, ab, s64, s32
		}
	})
	return r
}

func (r *denseRef) compare(got func(m, n int) float32) gemmErrors {
	var e gemmErrors
	var d64, n64, d32, n32 float64
	for i, m := range r.rows {
		for o := range r.N {
			j := i*r.N + o
			y := float64(got(m, o))
			if y != y {
				e.bf = math.Inf(1)
			}
			if r.abs[j] > 0 {
				e.bf = max(e.bf, math.Abs(y-r.bf[j])/r.abs[j])
			} else if y != 0 {
				e.bf = math.Inf(1)
			}
			d64 += (y - r.y64[j]) * (y - r.y64[j])
			n64 += r.y64[j] * r.y64[j]
			y32 := float64(r.y32[j])
			d32 += (y - y32) * (y - y32)
			n32 += y32 * y32
		}
	}
	e.l2_64, e.l2_32 = math.Sqrt(d64/n64), math.Sqrt(d32/n32)
	return e
}

// checkRows picks the rows of an M-row output a reference is computed for:
// all of a small one, else the first, the last and random ones.
func checkRows(rng *rand.Rand, M int) []int {
	if M <= 128 {
		rows := make([]int, M)
		for i := range rows {
			rows[i] = i
		}
		return rows
	}
	set := map[int]bool{0: true, M - 1: true, M - 2: true}
	for len(set) < 40 {
		set[rng.IntN(M)] = true
	}
	var rows []int
	for r := range set {
		rows = append(rows, r)
	}
	sort.Ints(rows)
	return rows
}

func newGEMM(t testing.TB, c *driver.Context) *GEMM {
	t.Helper()
	mod := loadModule(t, LoadGEMMModule, c)
	g, err := NewGEMM(c, mod)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Device(); d.Major == 9 && d.Minor == 0 { // the wgmma tiles too
		if err := g.AddWGMMA(loadModule(t, LoadGEMMWGModule, c)); err != nil {
			t.Fatal(err)
		}
		if err := g.AddFitTiles(loadModule(t, LoadGEMMFitModule, c)); err != nil {
			t.Fatal(err)
		}
		if err := g.AddDownBF(loadModule(t, LoadGEMMDownBFModule, c)); err != nil {
			t.Fatal(err)
		}
		if err := g.AddWidthTiles(loadModule(t, LoadGEMMFitWModule, c)); err != nil {
			t.Fatal(err)
		}
		if err := g.AddDenseOnlyTiles(loadModule(t, LoadGEMMWSModule, c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.AddMoEGroup(loadModule(t, LoadMoEGroupModule, c)); err != nil {
		t.Fatal(err)
	}
	return g
}

func uploadGEMMWeights(t testing.TB, c *driver.Context, up *driver.Uploader, m *quant.Matrix, label string) *QMatrix {
	t.Helper()
	q, err := UploadQMatrix(c, up, m, label)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.UploadScaleBias(up, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Free() })
	return q
}

// gemmHarness is what the GEMM tests share: a stream on c, the GEMM
// kernels, a fresh random source and an uploader of weights.
func gemmHarness(t *testing.T, c *driver.Context) (*driver.Context, *driver.Stream, *GEMM, *rand.Rand, *driver.Uploader) {
	t.Helper()
	s := newTestStream(t, c)
	up, err := c.NewUploader(s, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	return c, s, newGEMM(t, c), freshRNG(t), up
}

// gemmDenseShapes are the (N, K) shapes tested: the tile-boundary set and
// the 35B model's projections.
var gemmDenseShapes = []struct {
	name string
	N, K int
}{
	{"512x2048", 512, 2048}, {"2048x2048", 2048, 2048}, {"4160x2048", 4160, 2048},
	{"512x576", 512, 576}, {"2048x576", 2048, 576}, {"4160x576", 4160, 576},
	{"q_proj/in_proj_qkv 8192x2048", 8192, 2048}, {"in_proj_z 4096x2048", 4096, 2048},
	{"in_proj_a/b 32x2048", 32, 2048}, {"o_proj/out_proj 2048x4096", 2048, 4096},
	{"shared expert down 2048x512", 2048, 512},
}

var gemmMs = []int{1, 7, 100, 513, 4096}

// TestGEMMProducerMatchesUndrained: gemm=wgrs's w256rs (a producer warp,
// mbarriers a stage) and gemm=wgr3's w256r3 (three warpgroups, 192 weight
// rows a block) give w256rp's bits, dense, split over K and grouped, on
// shapes off the tiles' boundaries, outputs poisoned before each run.
func TestGEMMProducerMatchesUndrained(t *testing.T) {
	c, s, g, rng, up := gemmHarness(t, gpu(t))
	if _, ok := g.tiles["w256rs"]; !ok {
		t.Skip("no wgmma tiles on this GPU")
	}
	rp, _ := GEMMTileByName("w256rp")
	const maxM, K = 4096, 2048
	x := randomVector(rng, maxM*K)
	xd := upBuf(t, c, s, x, "x")
	xh := newBuf(t, c, s, maxM*K/2, "x bf16")
	if err := g.ToBF16(s, xd.P, xh.P, maxM*K); err != nil {
		t.Fatal(err)
	}
	ma, mb := quant.RandomMatrix(rng, 1, 4160, K, 4, 64), quant.RandomMatrix(rng, 1, 520, K, 4, 64)
	qa, qb := uploadGEMMWeights(t, c, up, &ma, "a"), uploadGEMMWeights(t, c, up, &mb, "b")
	ya, yb := newBuf(t, c, s, maxM*4160, "ya"), newBuf(t, c, s, maxM*520, "yb")
	parts := newBuf(t, c, s, 3*maxM*(4160+520), "partials")
	for _, ws := range DenseOnlyTiles {
		for _, M := range []int{1, 100, 300, 4096} {
			for _, kind := range []string{"dense", "grouped", "split 3"} {
				var out [2][]uint32
				for i, tile := range []GEMMTile{ws, rp} {
					ya.Poison(t, s)
					yb.Poison(t, s)
					parts.Poison(t, s)
					var err error
					switch kind {
					case "dense":
						err = g.Dense(s, tile, qa, xh.P, ya.P, M)
					case "grouped":
						err = g.DenseGroup(s, tile, []*QMatrix{qa, qb}, []driver.Ptr{ya.P, yb.P}, xh.P, M)
					default:
						err = g.DenseSplit(s, tile, []*QMatrix{qa, qb}, []driver.Ptr{ya.P, yb.P}, parts.P, xh.P, M, 3)
					}
					if err != nil {
						t.Fatalf("%s M=%d %s: %v", tile, M, kind, err)
					}
					what := fmt.Sprintf("%s M=%d %s", tile, M, kind)
					a := ya.Words(t, s, "ya")
					checkWritten(t, what, a, M*4160)
					out[i] = a[:M*4160]
					if kind != "dense" {
						b := yb.Words(t, s, "yb")
						checkWritten(t, what+", second matrix", b, M*520)
						out[i] = append(out[i], b[:M*520]...)
					}
				}
				for j := range out[0] {
					if out[0][j] != out[1][j] {
						t.Fatalf("M=%d %s, element %d: %#x with %s, %#x with w256rp", M, kind, j, out[0][j], ws, out[1][j])
					}
				}
			}
		}
	}
}

// TestGEMMDenseMatchesReference: every tile on every shape and token count,
// fresh random weights and inputs, outputs poisoned, guards checked, against
// float64 references of the bf16-rounded and of the exact inputs.
func TestGEMMDenseMatchesReference(t *testing.T) {
	c, s, g, rng, up := gemmHarness(t, gpu(t))
	maxM := gemmMs[len(gemmMs)-1]
	xs := map[int][]float32{} // the inputs of each K, maxM rows
	worst := map[string]gemmErrors{}
	for _, sh := range gemmDenseShapes {
		N, K := sh.N, sh.K
		x, ok := xs[K]
		if !ok {
			x = randomVector(rng, maxM*K)
			xs[K] = x
		}
		xb := make([]float32, len(x))
		for i, v := range x {
			xb[i] = bf16r(v)
		}
		m := quant.RandomMatrix(rng, 1, N, K, 4, 64)
		w, wb := dequantAll(&m)
		qm := uploadGEMMWeights(t, c, up, &m, sh.name)
		xd := upBuf(t, c, s, x, "x")
		xh := newBuf(t, c, s, maxM*K/2, "x bf16")
		if err := g.ToBF16(s, xd.P, xh.P, maxM*K); err != nil {
			t.Fatal(err)
		}
		hb := xh.Words(t, s, "x bf16")
		for i := 0; i < len(x); i += 2 {
			if want := uint32(quant.ToBF16(x[i])) | uint32(quant.ToBF16(x[i+1]))<<16; hb[i/2] != want {
				t.Fatalf("bf16 of x[%d:%d] = %#x, want %#x", i, i+2, hb[i/2], want)
			}
		}
		y := newBuf(t, c, s, maxM*N, "y")
		parts := newBuf(t, c, s, 8*513*N, "partials")
		for _, M := range gemmMs {
			ref := denseReference(w, wb, x, xb, K, N, checkRows(rng, M))
			for _, tile := range g.DenseTiles() {
				y.Poison(t, s)
				if err := g.Dense(s, tile, qm, xh.P, y.P, M); err != nil {
					t.Fatal(err)
				}
				e := checkDenseOutput(t, fmt.Sprintf("%s M=%d tile %s", sh.name, M, tile), y.Words(t, s, "y"), M, N, ref)
				t.Logf("%-30s M=%-4d %-7s err/Σ|wx| vs bf16-input f64 %.2e; rel L2 vs f64 %.2e, vs f32 %.2e", sh.name, M, tile, e.bf, e.l2_64, e.l2_32)
				key := tile.Name
				wv := worst[key]
				worst[key] = gemmErrors{max(wv.bf, e.bf), max(wv.l2_64, e.l2_64), max(wv.l2_32, e.l2_32)}
			}
			// Split-K (DenseSplit): the columns split 2, 3 (unevenly) and
			// up to 8 ways, the partials poisoned too.
			for _, splits := range []int{2, 3, 8} {
				if splits > K/64 || M > 513 {
					continue
				}
				tile, _ := GEMMTileByName("m16")
				y.Poison(t, s)
				parts.Poison(t, s)
				if err := g.DenseSplit(s, tile, []*QMatrix{qm}, []driver.Ptr{y.P}, parts.P, xh.P, M, splits); err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("%s M=%d split %d", sh.name, M, splits)
				checkWritten(t, what+": partials", parts.Words(t, s, "partials"), splits*M*N)
				checkDenseOutput(t, what, y.Words(t, s, "y"), M, N, ref)
			}
		}
	}
	for _, tile := range g.DenseTiles() {
		e := worst[tile.Name]
		t.Logf("worst %-7s: err/Σ|wx| vs bf16-input f64 %.2e; rel L2 vs f64 %.2e, vs f32 %.2e", tile, e.bf, e.l2_64, e.l2_32)
	}
}

// checkWritten fails unless the first n words of all (a poisoned buffer)
// were written and none after them.
func checkWritten(t *testing.T, what string, all []uint32, n int) {
	t.Helper()
	for i := range all {
		if (all[i] == nanBits) != (i >= n) {
			t.Fatalf("%s: word %d of %d written %v, want %v", what, i, n, all[i] != nanBits, i < n)
		}
	}
}

// checkDenseOutput checks an M×N GEMM's output words all: written exactly
// over the output (checkWritten), and within the dense GEMM's bars of ref:
// 2e-5 of Σ|w·x| against the bf16-input reference, a relative L2 of 1e-2
// against float64's.
func checkDenseOutput(t *testing.T, what string, all []uint32, M, N int, ref *denseRef) gemmErrors {
	t.Helper()
	checkWritten(t, what+": y", all, M*N)
	e := ref.compare(func(r, n int) float32 { return math.Float32frombits(all[r*N+n]) })
	if e.bf > 2e-5 || e.l2_64 > 1e-2 || !(e.l2_64 >= 0) {
		t.Errorf("%s: error %.3g of Σ|w·x| against the bf16-input reference (bound 2e-5), rel L2 %.3g against float64 (bound 1e-2)", what, e.bf, e.l2_64)
	}
	return e
}

// TestGEMMGroupSplitMatchesReference: DenseSplit of a group (in_proj's
// four matrices at a smaller width: 1040, 512, 32 and 32 rows of 2048
// columns) at 7 and 16 rows, split 2, 4 and 8 ways, the outputs and the
// partials poisoned, each matrix against float64 references as in
// TestGEMMDenseMatchesReference.
func TestGEMMGroupSplitMatchesReference(t *testing.T) {
	c, s, g, rng, up := gemmHarness(t, gpu(t))
	const K, maxM = 2048, 16
	Ns := []int{1040, 512, 32, 32}
	x := randomVector(rng, maxM*K)
	xb := make([]float32, len(x))
	for i, v := range x {
		xb[i] = bf16r(v)
	}
	xd := upBuf(t, c, s, x, "x")
	xh := newBuf(t, c, s, maxM*K/2, "x bf16")
	if err := g.ToBF16(s, xd.P, xh.P, maxM*K); err != nil {
		t.Fatal(err)
	}
	var qs []*QMatrix
	var ws, wbs [][]float32
	var ys []devBuf
	var ptrs []driver.Ptr
	total := 0
	for i, N := range Ns {
		m := quant.RandomMatrix(rng, 1, N, K, 4, 64)
		w, wb := dequantAll(&m)
		qs, ws, wbs = append(qs, uploadGEMMWeights(t, c, up, &m, fmt.Sprintf("matrix %d", i))), append(ws, w), append(wbs, wb)
		y := newBuf(t, c, s, maxM*N, "y")
		ys, ptrs = append(ys, y), append(ptrs, y.P)
		total += N
	}
	parts := newBuf(t, c, s, 8*maxM*total, "partials")
	tile, _ := GEMMTileByName("m16")
	for _, M := range []int{7, 16} {
		refs := make([]*denseRef, len(Ns))
		for i, N := range Ns {
			refs[i] = denseReference(ws[i], wbs[i], x, xb, K, N, checkRows(rng, M))
		}
		for _, splits := range []int{2, 4, 8} {
			for _, y := range ys {
				y.Poison(t, s)
			}
			parts.Poison(t, s)
			if err := g.DenseSplit(s, tile, qs, ptrs, parts.P, xh.P, M, splits); err != nil {
				t.Fatal(err)
			}
			checkWritten(t, fmt.Sprintf("M=%d split %d: partials", M, splits), parts.Words(t, s, "partials"), splits*M*total)
			for i, N := range Ns {
				checkDenseOutput(t, fmt.Sprintf("M=%d split %d matrix %d (%d rows)", M, splits, i, N), ys[i].Words(t, s, "y"), M, N, refs[i])
			}
		}
	}
}

// TestMeasureDenseSplit: the dense GEMM of a few rows on the 16-row tile,
// its columns in one piece (Dense) and split 2 to 16 ways (DenseSplit,
// both launches), at the 35B model's projections.
func TestMeasureDenseSplit(t *testing.T) {
	c, s, g, rng, up := gemmHarness(t, benchOnly(t))
	tile, _ := GEMMTileByName("m16")
	for _, sh := range []struct {
		name string
		N, K int
	}{{"in_proj_qkv 8192x2048", 8192, 2048}, {"in_proj_z 4096x2048", 4096, 2048}, {"out_proj 2048x4096", 2048, 4096}, {"shared down 2048x512", 2048, 512}} {
		m := quant.RandomMatrix(rng, 1, sh.N, sh.K, 4, 64)
		qm := uploadGEMMWeights(t, c, up, &m, sh.name)
		const maxM = 16
		xh := upBuf(t, c, s, randomVector(rng, maxM*sh.K/2), "x bf16") // any bits: timing only
		y := newBuf(t, c, s, maxM*sh.N, "y")
		parts := newBuf(t, c, s, 16*maxM*sh.N, "partials")
		for _, M := range []int{4, 16} {
			line := fmt.Sprintf("dense %-22s M=%2d:", sh.name, M)
			for _, splits := range []int{1, 2, 4, 8, 16} {
				if splits > sh.K/64/2 {
					continue
				}
				d := timeLaunches(t, c, s, 20, func() error {
					if splits == 1 {
						return g.Dense(s, tile, qm, xh.P, y.P, M)
					}
					return g.DenseSplit(s, tile, []*QMatrix{qm}, []driver.Ptr{y.P}, parts.P, xh.P, M, splits)
				})
				line += fmt.Sprintf("  %2d: %6.1f µs", splits, d.Seconds()*1e6)
			}
			t.Log(line)
		}
	}
}

// hostRouting is random top-k routing of T tokens: ids and weights
// [T·MoETopK].
func hostRouting(rng *rand.Rand, T, E int) ([]int32, []float32) {
	ids, wts := make([]int32, 0, T*MoETopK), make([]float32, 0, T*MoETopK)
	for range T {
		i, w := randomRouting(rng, E)
		ids, wts = append(ids, i...), append(wts, w...)
	}
	return ids, wts
}

// skewedRouting is top-k routing of T tokens over E experts whose
// popularity falls as a zipf law of exponent skew over a random order of
// the experts: each token's MoETopK distinct experts drawn in proportion
// to it (the Gumbel top-k), as a trained router favours some experts.
func skewedRouting(rng *rand.Rand, T, E int, skew float64) []int32 {
	logw := make([]float64, E)
	for rank, e := range rng.Perm(E) {
		logw[e] = -skew * math.Log(float64(rank+1))
	}
	ids := make([]int32, 0, T*MoETopK)
	keys := make([]float64, E)
	order := make([]int, E)
	for range T {
		for e := range keys {
			keys[e] = logw[e] - math.Log(-math.Log(1-rng.Float64())) // a Gumbel draw
			order[e] = e
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(keys[b], keys[a]) })
		for _, e := range order[:MoETopK] {
			ids = append(ids, int32(e))
		}
	}
	return ids
}

// checkGroups checks the device grouping of ids against its definition.
func checkGroups(t *testing.T, s *driver.Stream, grp *MoEGroups, ids []int32, T int) (pos []int32) {
	t.Helper()
	E, BM := grp.Experts, grp.Tile.BM
	read := func(p driver.Ptr, n int) []int32 {
		v := make([]int32, n)
		if err := s.CopyToHost(bytesOf(v), p); err != nil {
			t.Fatal(err)
		}
		return v
	}
	counts, offsets := read(grp.Counts, E), read(grp.Offsets, E+1)
	pos, rowTok := read(grp.Pos, T*MoETopK), read(grp.RowTok, T*MoETopK)
	ntiles, status := read(grp.NTiles, 1), read(grp.Status, 1)
	tiles := read(grp.Tiles, 2*grp.MaxTiles)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if status[0] != 0 {
		t.Fatalf("route status %d for valid ids", status[0])
	}
	want := make([]int32, E)
	for _, e := range ids {
		want[e]++
	}
	var off, nt int32
	for e := range E {
		if counts[e] != want[e] || offsets[e] != off {
			t.Fatalf("expert %d: count %d offset %d, want %d and %d", e, counts[e], offsets[e], want[e], off)
		}
		for j := int32(0); j*int32(BM) < want[e]; j++ {
			if tiles[2*nt] != int32(e) || tiles[2*nt+1] != off+j*int32(BM) {
				t.Fatalf("tile %d is (%d, %d), want (%d, %d)", nt, tiles[2*nt], tiles[2*nt+1], e, off+j*int32(BM))
			}
			nt++
		}
		off += want[e]
	}
	if offsets[E] != off || ntiles[0] != nt {
		t.Fatalf("offsets[E] %d, tiles %d; want %d and %d", offsets[E], ntiles[0], off, nt)
	}
	seen := make([]bool, T*MoETopK)
	for i, p := range pos {
		e := ids[i]
		if p < offsets[e] || p >= offsets[e+1] || seen[p] || rowTok[p] != int32(i/MoETopK) {
			t.Fatalf("pair %d (expert %d): row %d outside [%d, %d), taken twice, or of token %d", i, e, p, offsets[e], offsets[e+1], rowTok[p])
		}
		seen[p] = true
	}
	return pos
}

// TestMoERouteGroups: moe_route, moe_route8 (GEMM.RouteAhead) and
// moe_group.cu's three kernels (GEMM.RouteBlocks) group the (token, slot)
// pairs by expert, every group buffer poisoned first, for a few pairs to a
// 16K-token chunk's 131,072; ids outside the stack are counted in the
// status and get no row.
func TestMoERouteGroups(t *testing.T) {
	c, s, g, rng, _ := gemmHarness(t, gpu(t))
	defer g.RouteAhead(true)
	defer g.RouteBlocks(false)
	const E = 256
	tile, _ := GEMMTileByName("m128")
	poison := func(grp *MoEGroups, T int) {
		pairs := T * MoETopK
		for _, b := range []struct {
			p driver.Ptr
			n int
		}{{grp.Counts, E}, {grp.Offsets, E + 1}, {grp.Pos, pairs}, {grp.RowTok, pairs}, {grp.Tiles, 2 * grp.MaxTiles}, {grp.NTiles, 1}, {grp.Status, 1}} {
			if err := s.Fill32(b.p, 0x7FFFFFF0, int64(b.n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, form := range []struct{ ahead, blocks bool }{{false, false}, {true, false}, {true, true}} {
		ahead := form.ahead
		g.RouteAhead(ahead)
		g.RouteBlocks(form.blocks)
		if form.blocks && g.RouteKernels() != 3 {
			t.Fatal("RouteBlocks(true) without moe_group.cu's kernels")
		}
		for _, T := range []int{1, 7, 100, 255, 256, 257, 512, 4096, 16384} {
			ids, _ := hostRouting(rng, T, E)
			grp, err := NewMoEGroups(c, T, E, tile)
			if err != nil {
				t.Fatal(err)
			}
			idd := upBuf(t, c, s, ids, "ids")
			poison(grp, T)
			if err := g.Route(s, grp, idd.P, T); err != nil {
				t.Fatal(err)
			}
			checkGroups(t, s, grp, ids, T)
			// three ids outside the stack: counted, and their pairs get no row
			bad := slices.Clone(ids)
			bad[0], bad[len(bad)/2], bad[len(bad)-1] = E, -1, E+7
			badd := upBuf(t, c, s, bad, "bad ids")
			poison(grp, T)
			if err := g.Route(s, grp, badd.P, T); err != nil {
				t.Fatal(err)
			}
			status, pos := make([]int32, 1), make([]int32, T*MoETopK)
			if err := s.CopyToHost(bytesOf(status), grp.Status); err != nil {
				t.Fatal(err)
			}
			if err := s.CopyToHost(bytesOf(pos), grp.Pos); err != nil {
				t.Fatal(err)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			want := int32(3)
			if T*MoETopK < 3 {
				want = int32(T * MoETopK)
			}
			if status[0] != want || pos[0] != -1 || pos[len(pos)-1] != -1 {
				t.Errorf("moe_route (ahead %v, blocks %v), %d tokens with bad ids: status %d, want %d; rows %d and %d, want -1", ahead, form.blocks, T, status[0], want, pos[0], pos[len(pos)-1])
			}
			grp.Free()
		}
	}
}

// TestMoEGroupedMatchesReference: the device grouping, the grouped gate/up
// GEMM with the SwiGLU, the grouped down GEMM and the weighted combine of
// 256 experts × (2048, 512) against float64 references, for each token
// count (every tile at 100 and 512 tokens, the chosen one elsewhere).
func TestMoEGroupedMatchesReference(t *testing.T) {
	c, s, g, rng, up := gemmHarness(t, gpu(t))
	const E, H, I = 256, 2048, 512
	gate, upm := quant.RandomMatrix(rng, E, I, H, 4, 64), quant.RandomMatrix(rng, E, I, H, 4, 64)
	down := quant.RandomMatrix(rng, E, H, I, 4, 64)
	gq, uq, dq := uploadGEMMWeights(t, c, up, &gate, "gate"), uploadGEMMWeights(t, c, up, &upm, "up"), uploadGEMMWeights(t, c, up, &down, "down")
	for _, T := range []int{1, 7, 100, 512, 2048, 4096} {
		x := randomVector(rng, T*H)
		ids, wts := hostRouting(rng, T, E)
		xd, idd, wd := upBuf(t, c, s, x, "x"), upBuf(t, c, s, ids, "ids"), upBuf(t, c, s, wts, "weights")
		xh := newBuf(t, c, s, T*H/2, "x bf16")
		if err := g.ToBF16(s, xd.P, xh.P, T*H); err != nil {
			t.Fatal(err)
		}
		hs := newBuf(t, c, s, T*MoETopK*I/2, "h")
		ys := newBuf(t, c, s, T*MoETopK*H, "ys")
		out := newBuf(t, c, s, T*H, "out")
		ysb, outb := newBuf(t, c, s, T*MoETopK*H/2, "ys bf16"), newBuf(t, c, s, T*H, "out from bf16 ys")
		tiles := []GEMMTile{MoETile(T, E, MoEStream)}
		if T == 100 || T == 512 {
			tiles = g.AllTiles()
		}
		for _, name := range []string{"w80rp", "w160rp", "w160rw"} { // moefit's tiles where they run, beside MoETile's (w160rw: 64 to 96 rows wide at 2048 tokens, 112 to 160 at 4096)
			if w, err := GEMMTileByName(name); err == nil && T >= 2048 && slices.Contains(g.AllTiles(), w) {
				tiles = append(tiles, w)
			}
		}
		// Reference tokens: all of a few, else a sample.
		toks := checkRows(rng, T)
		if len(toks) > 16 {
			toks = append(toks[:14], toks[len(toks)-2:]...)
		}
		ref := moeGroupedReference(&gate, &upm, &down, H, I, x, ids, wts, toks)
		for _, tile := range tiles {
			grp, err := NewMoEGroups(c, T, E, tile)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Route(s, grp, idd.P, T); err != nil {
				t.Fatal(err)
			}
			pos := checkGroups(t, s, grp, ids, T)
			if err := s.Fill32(hs.P, bf16NaNPair, int64(hs.N+guardElems)); err != nil {
				t.Fatal(err)
			}
			ys.Poison(t, s)
			out.Poison(t, s)
			if err := g.MoEGateUp(s, grp, gq, uq, I, H, xh.P, hs.P); err != nil {
				t.Fatal(err)
			}
			if err := g.MoEDown(s, grp, dq, H, I, hs.P, ys.P); err != nil {
				t.Fatal(err)
			}
			if err := g.MoECombine(s, grp, ys.P, wd.P, out.P, T, H, false); err != nil {
				t.Fatal(err)
			}
			hw := make([]uint32, hs.N+guardElems)
			if err := s.CopyToHost(bytesOf(hw), hs.P); err != nil {
				t.Fatal(err)
			}
			yv := ys.Floats(t, s, "ys")
			ov := out.Floats(t, s, "out")
			if g.DownBF(tile) {
				checkDownBF(t, s, g, grp, dq, H, I, T, hs, ysb, outb, wd, yv, wts, pos)
			}
			for i := hs.N; i < len(hw); i++ {
				if hw[i] != bf16NaNPair {
					t.Fatalf("T=%d %s: h word %d past the end was written", T, tile, i)
				}
			}
			h := make([]float32, T*MoETopK*I)
			for i, v := range hw[:hs.N] {
				h[2*i], h[2*i+1] = quant.BF16(uint16(v)), quant.BF16(uint16(v>>16))
				if h[2*i] != h[2*i] || h[2*i+1] != h[2*i+1] {
					t.Fatalf("T=%d %s: h[%d] is NaN (not written?)", T, tile, 2*i)
				}
			}
			e := ref.compare(h, ov, pos, I, H, &down, ids, wts)
			t.Logf("T=%-4d %-7s h: rel L2 vs bf16-input f64 %.2e (max %.2f bf16 ulp), vs f64 %.2e; out: err/Σ| | vs f64 of the kernel's h %.2e, vs bf16-input f64 %.2e, rel L2 vs f64 %.2e, vs f32 %.2e",
				T, tile, e.hBF, e.hULP, e.h64, e.own, e.bf, e.l2_64, e.l2_32)
			// The end-to-end bound against the bf16-input reference is
			// looser (5e-4): where h sits near a rounding boundary the
			// kernel's float32 h and the float64 one round to neighbouring
			// bf16 values.
			if e.hBF > 3e-3 || e.hULP > 1.01 || e.own > 2e-5 || e.bf > 5e-4 || e.l2_64 > 2e-2 || !(e.l2_64 >= 0) {
				t.Errorf("T=%d tile %s: h rel L2 %.3g (bound 3e-3), %.3g ulp (bound 1.01); out error %.3g (bound 2e-5) from the kernel's h, %.3g of Σ| | (bound 5e-4), rel L2 %.3g against float64 (bound 2e-2)",
					T, tile, e.hBF, e.hULP, e.own, e.bf, e.l2_64)
			}
			grp.Free()
		}
	}
}

// checkDownBF runs grp's down GEMM with bf16 outputs (moeys=bf16) and its
// combine: each output must be the float32 form's (yv, the same products
// in the same order) rounded to bf16, bit for bit, nothing past the end
// written; the combine within 1e-6 of Σ|w·y| of the float64 sum of the
// rounded outputs in slot order.
func checkDownBF(t *testing.T, s *driver.Stream, g *GEMM, grp *MoEGroups, dq *QMatrix, H, I, T int, hs, ysb, outb devBuf,
	wd devBuf, yv []float32, wts []float32, pos []int32) {
	t.Helper()
	tile := grp.Tile
	if err := s.Fill32(ysb.P, bf16NaNPair, int64(ysb.N+guardElems)); err != nil {
		t.Fatal(err)
	}
	outb.Poison(t, s)
	if err := g.MoEDownBF(s, grp, dq, H, I, hs.P, ysb.P); err != nil {
		t.Fatal(err)
	}
	if err := g.MoECombineBF(s, grp, ysb.P, wd.P, outb.P, T, H, false); err != nil {
		t.Fatal(err)
	}
	words := make([]uint32, ysb.N+guardElems)
	if err := s.CopyToHost(bytesOf(words), ysb.P); err != nil {
		t.Fatal(err)
	}
	ob := outb.Floats(t, s, "out from bf16 ys")
	for i := ysb.N; i < len(words); i++ {
		if words[i] != bf16NaNPair {
			t.Fatalf("T=%d %s: bf16 ys word %d past the end was written", T, tile, i)
		}
	}
	yb := make([]float32, len(yv))
	for i, w := range words[:ysb.N] {
		for half, bits := range []uint16{uint16(w), uint16(w >> 16)} {
			j := 2*i + half
			if want := quant.ToBF16(yv[j]); bits != want {
				t.Fatalf("T=%d %s: bf16 ys[%d] is %#04x, want %#04x (%g rounded)", T, tile, j, bits, want, yv[j])
			}
			yb[j] = quant.BF16(bits)
		}
	}
	var worst float64
	for tok := range T {
		for n := range H {
			var sum, abs float64
			for k := range MoETopK {
				w, y := float64(wts[tok*MoETopK+k]), float64(yb[int(pos[tok*MoETopK+k])*H+n])
				sum += w * y
				abs += math.Abs(w * y)
			}
			if abs > 0 {
				worst = max(worst, math.Abs(float64(ob[tok*H+n])-sum)/abs)
			}
		}
	}
	t.Logf("T=%-4d %-7s bf16 ys: the float32 outputs rounded, bit for bit; combine %.2e of Σ|w·y| from float64", T, tile, worst)
	if worst > 1e-6 {
		t.Errorf("T=%d %s: moe_combine_bf %.3g of Σ|w·y| from the float64 sum of the bf16 outputs (bound 1e-6)", T, tile, worst)
	}
}

// TestMoERouteCountsBadIDs: an expert id outside [0, E) is counted in the
// status word, left out of every group, and its combine slot skipped.
func TestMoERouteCountsBadIDs(t *testing.T) {
	c := gpu(t)
	s := newTestStream(t, c)
	g := newGEMM(t, c)
	ids := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 300, -1}
	idd := upBuf(t, c, s, ids, "ids")
	grp, err := NewMoEGroups(c, 2, 16, GEMMTiles[len(GEMMTiles)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer grp.Free()
	if err := g.Route(s, grp, idd.P, 2); err != nil {
		t.Fatal(err)
	}
	v := make([]int32, 2*MoETopK+1)
	if err := s.CopyToHost(bytesOf(v[:1]), grp.Status); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToHost(bytesOf(v[1:]), grp.Pos); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if v[0] != 2 || v[1+14] != -1 || v[1+15] != -1 {
		t.Fatalf("status %d, positions of the bad ids %d %d; want 2, -1, -1", v[0], v[15], v[16])
	}
}

// moeRef holds float64 references of the sampled tokens: the SwiGLU
// activations of each (token, slot) from bf16-rounded inputs, and the
// block's output from bf16 inputs (h rounded to bf16 as the kernel feeds
// it), from exact inputs in float64, and in float32.
type moeRef struct {
	toks         []int
	hBF          [][]float64 // [tok][slot*I+j]
	h64          [][]float64
	outBF, absBF [][]float64
	out64        [][]float64
	out32        [][]float32
}

// hULP is max |h - hBF| over (2^-8·|hBF| + 1e-5·rms(hBF)): at most 1 when
// h is hBF rounded to bf16 (up to float32 rounding); own is max |out -
// ref| / Σ| | of the down GEMM and combine against float64 from the
// kernel's own h, so that neither GEMM's check carries the other's bf16
// rounding of h.
type moeErrors struct{ hBF, h64, hULP, own, bf, l2_64, l2_32 float64 }

func moeGroupedReference(gate, up, down *quant.Matrix, H, I int, x []float32, ids []int32, wts []float32, toks []int) *moeRef {
	r := &moeRef{toks: toks}
	n := len(toks)
	r.hBF, r.h64 = make([][]float64, n), make([][]float64, n)
	r.outBF, r.absBF, r.out64, r.out32 = make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float32, n)
	for i := range n {
		r.hBF[i], r.h64[i] = make([]float64, MoETopK*I), make([]float64, MoETopK*I)
		r.outBF[i], r.absBF[i], r.out64[i], r.out32[i] = make([]float64, H), make([]float64, H), make([]float64, H), make([]float32, H)
	}
	h32 := make([][]float32, n)
	for i := range n {
		h32[i] = make([]float32, MoETopK*I)
	}
	// Gate/up: one task per (token, slot, row).
	parallelFor(n*MoETopK*I, func(task int) {
		i, rest := task/(MoETopK*I), task%(MoETopK*I)
		slot, j := rest/I, rest%I
		t := toks[i]
		e := int(ids[t*MoETopK+slot])
		xr := x[t*H : (t+1)*H]
		gw, uw := make([]float32, H), make([]float32, H)
		gate.DequantizeRow(e*I+j, gw)
		up.DequantizeRow(e*I+j, uw)
		var g64, u64, gb, ub float64
		var g32, u32 float32
		for k, xv := range xr {
			xb := float64(bf16r(xv))
			g64 += float64(gw[k]) * float64(xv)
			u64 += float64(uw[k]) * float64(xv)
			gb += float64(bf16r(gw[k])) * xb
			ub += float64(bf16r(uw[k])) * xb
			g32 += gw[k] * xv
			u32 += uw[k] * xv
		}
		r.h64[i][rest] = silu64(g64) * u64
		r.hBF[i][rest] = silu64(gb) * ub
		h32[i][rest] = float32(silu64(float64(g32))) * u32
	})
	parallelFor(n*H, func(task int) {
		i, o := task/H, task%H
		t := toks[i]
		dw := make([]float32, I)
		var s64, sb, ab float64
		var s32 float32
		for slot := range MoETopK {
			e := int(ids[t*MoETopK+slot])
			w := float64(wts[t*MoETopK+slot])
			down.DequantizeRow(e*H+o, dw)
			var d64, db, da float64
			var d32 float32
			for j := range I {
				d64 += float64(dw[j]) * r.h64[i][slot*I+j]
				p := float64(bf16r(dw[j])) * float64(bf16r(float32(r.hBF[i][slot*I+j])))
				db += p
				da += math.Abs(p)
				d32 += dw[j] * h32[i][slot*I+j]
			}
			s64 += w * d64
			sb += w * db
			ab += math.Abs(w) * da
			s32 += wts[t*MoETopK+slot] * d32
		}
		r.out64[i][o], r.outBF[i][o], r.absBF[i][o], r.out32[i][o] = s64, sb, ab, s32
	})
	return r
}

// compare measures the kernel's h (sorted rows, pos the row of each pair)
// and out against the references.
func (r *moeRef) compare(h, out []float32, pos []int32, I, H int, down *quant.Matrix, ids []int32, wts []float32) moeErrors {
	var e moeErrors
	var dhb, dh64, nh, d64, n64, d32, n32 float64
	var nhb float64
	for i := range r.toks {
		for _, v := range r.hBF[i] {
			nhb += v * v
		}
	}
	rmsH := math.Sqrt(nhb / float64(len(r.toks)*MoETopK*I))
	for i, t := range r.toks {
		for slot := range MoETopK {
			row := int(pos[t*MoETopK+slot])
			for j := range I {
				v := float64(h[row*I+j])
				dhb += (v - r.hBF[i][slot*I+j]) * (v - r.hBF[i][slot*I+j])
				dh64 += (v - r.h64[i][slot*I+j]) * (v - r.h64[i][slot*I+j])
				e.hULP = max(e.hULP, math.Abs(v-r.hBF[i][slot*I+j])/(math.Abs(r.hBF[i][slot*I+j])/256+1e-5*rmsH))
				nh += r.h64[i][slot*I+j] * r.h64[i][slot*I+j]
			}
		}
		for o := range H {
			v := float64(out[t*H+o])
			if v != v {
				e.bf = math.Inf(1)
			}
			e.bf = max(e.bf, math.Abs(v-r.outBF[i][o])/r.absBF[i][o])
			d64 += (v - r.out64[i][o]) * (v - r.out64[i][o])
			n64 += r.out64[i][o] * r.out64[i][o]
			d32 += (v - float64(r.out32[i][o])) * (v - float64(r.out32[i][o]))
			n32 += float64(r.out32[i][o]) * float64(r.out32[i][o])
		}
	}
	e.hBF, e.h64 = math.Sqrt(dhb/nh), math.Sqrt(dh64/nh)
	own := make([]float64, len(r.toks)*H)
	parallelFor(len(r.toks)*H, func(task int) {
		i, o := task/H, task%H
		t := r.toks[i]
		dw := make([]float32, I)
		var sum, abs float64
		for slot := range MoETopK {
			down.DequantizeRow(int(ids[t*MoETopK+slot])*H+o, dw)
			row := int(pos[t*MoETopK+slot])
			var d, a float64
			for j := range I {
				p := float64(bf16r(dw[j])) * float64(h[row*I+j])
				d += p
				a += math.Abs(p)
			}
			w := float64(wts[t*MoETopK+slot])
			sum += w * d
			abs += math.Abs(w) * a
		}
		own[task] = math.Abs(float64(out[t*H+o])-sum) / abs
	})
	for _, v := range own {
		e.own = max(e.own, v)
	}
	e.l2_64, e.l2_32 = math.Sqrt(d64/n64), math.Sqrt(d32/n32)
	return e
}

// measuredTiles is tiles, or those PETAL_MEASURE_TILES names (a comma-separated
// list) where it is set, so that a GPU call can time a few tiles at every
// shape without the rest.
func measuredTiles(tiles []GEMMTile) []GEMMTile {
	want := os.Getenv("PETAL_MEASURE_TILES")
	if want == "" {
		return tiles
	}
	names := strings.Split(want, ",")
	return slices.DeleteFunc(slices.Clone(tiles), func(t GEMMTile) bool { return !slices.Contains(names, t.Name) })
}

// TestMeasureGEMM times the dense GEMM of every tile on the model's
// projections at 512 and 4096 tokens, and the grouped MoE at 512 and 4096
// tokens over 256 experts, in TFLOP/s (PETAL_CUDA_BENCH=1).
func TestMeasureGEMM(t *testing.T) {
	c, s, g, rng, up := gemmHarness(t, benchOnly(t))
	if len(g.wg) > 0 { // "default" and "chosen" below: the tiles the defaults choose (gemm=wgrp, moefit=width)
		if err := g.UseWGMMA(true); err != nil {
			t.Fatal(err)
		}
		g.UndrainedTiles()
		g.FitMoETiles(true, false)
		g.WidthMoETiles(true)
	}
	allTiles, denseTiles := measuredTiles(g.AllTiles()), measuredTiles(g.DenseTiles())
	for _, tile := range allTiles {
		for _, kind := range []string{"dense", "gateup", "down"} {
			if tile.Reg && kind == "dense" {
				continue
			}
			fi, err := g.Function(tile, kind).Info()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s: %d registers, %d bytes local, %d bytes shared (dynamic)", kind, tile, fi.Registers, fi.LocalBytes, tile.shared())
		}
	}
	const maxM = 4096
	shapes := []struct {
		name string
		N, K int
	}{
		{"q_proj 8192x2048", 8192, 2048}, {"in_proj_z 4096x2048", 4096, 2048}, {"o_proj 2048x4096", 2048, 4096},
		{"k_proj 512x2048", 512, 2048}, {"4160x2048", 4160, 2048}, {"2048x2048", 2048, 2048},
	}
	for _, sh := range shapes {
		m := quant.RandomMatrix(rng, 1, sh.N, sh.K, 4, 64)
		qm := uploadGEMMWeights(t, c, up, &m, sh.name)
		xd := upBuf(t, c, s, randomVector(rng, maxM*sh.K), "x")
		xh := newBuf(t, c, s, maxM*sh.K/2, "x bf16")
		if err := g.ToBF16(s, xd.P, xh.P, maxM*sh.K); err != nil {
			t.Fatal(err)
		}
		y := newBuf(t, c, s, maxM*sh.N, "y")
		for _, M := range []int{512, 4096} {
			flop := 2 * float64(M) * float64(sh.N) * float64(sh.K)
			line := fmt.Sprintf("dense %-20s M=%-4d", sh.name, M)
			for _, tile := range denseTiles {
				d := timeLaunches(t, c, s, 20, func() error { return g.Dense(s, tile, qm, xh.P, y.P, M) })
				line += fmt.Sprintf(" %s %6.1f µs %4.0f TF/s |", tile, float64(d.Nanoseconds())/1e3, flop/d.Seconds()/1e12)
			}
			t.Logf("%s default %s", line, g.DenseTile(M, sh.N))
		}
	}
	const E, H, I = 256, 2048, 512
	gate, upm := quant.RandomMatrix(rng, E, I, H, 4, 64), quant.RandomMatrix(rng, E, I, H, 4, 64)
	down := quant.RandomMatrix(rng, E, H, I, 4, 64)
	gq, uq, dq := uploadGEMMWeights(t, c, up, &gate, "gate"), uploadGEMMWeights(t, c, up, &upm, "up"), uploadGEMMWeights(t, c, up, &down, "down")
	// Even routing at every length, then routing skewed as a trained
	// router's is (zipf exponents 0.25 and 0.5: the busiest expert about 3
	// and 7.5 times the mean at 512 tokens, 50 and 120 rows against 16) at
	// the lengths where the tile choice is between m32, m64 and s16.
	for _, rc := range []struct {
		T    int
		skew float64
	}{{512, 0}, {1024, 0}, {2048, 0}, {4096, 0}, {16384, 0}, {512, 0.25}, {512, 0.5}, {1024, 0.25}, {1024, 0.5}} {
		T := rc.T
		ids, wts := hostRouting(rng, T, E)
		tiles := allTiles
		if T > 4096 { // a 16K-token chunk: the wide tiles only
			tiles = nil
			for _, tile := range allTiles {
				if slices.Contains([]string{"w64r", "w128r", "w128rp", "w160rp", "w160rw", "w256r", "w256rp"}, tile.Name) {
					tiles = append(tiles, tile)
				}
			}
		}
		if rc.skew > 0 {
			ids = skewedRouting(rng, T, E, rc.skew)
			tiles = nil
			for _, tile := range allTiles { // w32r and w64r where the wgmma tiles are built
				if slices.Contains([]string{"m32", "m64", "r32", "s16", "s16n8", "s32", "w32r", "w64r"}, tile.Name) {
					tiles = append(tiles, tile)
				}
			}
		}
		if len(tiles) == 0 { // PETAL_MEASURE_TILES names none of this length's
			continue
		}
		counts := make([]int, E)
		for _, e := range ids {
			counts[e]++
		}
		t.Logf("moe T=%d routing skew %.1f: rows an expert %d most, %d least, %.1f mean", T, rc.skew, slices.Max(counts), slices.Min(counts), float64(T*MoETopK)/E)
		xd, idd, wd := upBuf(t, c, s, randomVector(rng, T*H), "x"), upBuf(t, c, s, ids, "ids"), upBuf(t, c, s, wts, "weights")
		if rc.skew == 0 { // the grouping alone, moe_route against moe_route8
			grp, err := NewMoEGroups(c, T, E, tiles[0])
			if err != nil {
				t.Fatal(err)
			}
			var us [3]float64
			for i, form := range []struct{ ahead, blocks bool }{{false, false}, {true, false}, {true, true}} {
				g.RouteAhead(form.ahead)
				g.RouteBlocks(form.blocks)
				us[i] = timeLaunches(t, c, s, 20, func() error { return g.Route(s, grp, idd.P, T) }).Seconds() * 1e6
			}
			g.RouteAhead(true)
			g.RouteBlocks(false)
			grp.Free()
			t.Logf("moe T=%d route: moe_route %.1f µs, moe_route8 %.1f µs, moe_group (three kernels) %.1f µs", T, us[0], us[1], us[2])
		}
		xh := newBuf(t, c, s, T*H/2, "x bf16")
		if err := g.ToBF16(s, xd.P, xh.P, T*H); err != nil {
			t.Fatal(err)
		}
		hs := newBuf(t, c, s, T*MoETopK*I/2, "h")
		ys := newBuf(t, c, s, T*MoETopK*H, "ys")
		ysb := newBuf(t, c, s, T*MoETopK*H/2, "ys bf16")
		out := newBuf(t, c, s, T*H, "out")
		flopUp := float64(T*MoETopK) * 2 * 2 * H * I
		flopDown := float64(T*MoETopK) * 2 * H * I
		for _, tile := range tiles {
			grp, err := NewMoEGroups(c, T, E, tile)
			if err != nil {
				t.Fatal(err)
			}
			dr := timeLaunches(t, c, s, 20, func() error { return g.Route(s, grp, idd.P, T) })
			du := timeLaunches(t, c, s, 20, func() error { return g.MoEGateUp(s, grp, gq, uq, I, H, xh.P, hs.P) })
			dd := timeLaunches(t, c, s, 20, func() error { return g.MoEDown(s, grp, dq, H, I, hs.P, ys.P) })
			dc := timeLaunches(t, c, s, 20, func() error { return g.MoECombine(s, grp, ys.P, wd.P, out.P, T, H, false) })
			dt := timeLaunches(t, c, s, 20, func() error {
				if err := g.Route(s, grp, idd.P, T); err != nil {
					return err
				}
				if err := g.MoEGateUp(s, grp, gq, uq, I, H, xh.P, hs.P); err != nil {
					return err
				}
				if err := g.MoEDown(s, grp, dq, H, I, hs.P, ys.P); err != nil {
					return err
				}
				return g.MoECombine(s, grp, ys.P, wd.P, out.P, T, H, false)
			})
			us := func(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1e6 }
			bf := ""
			if g.DownBF(tile) { // moeys=bf16: the expert outputs in bf16
				ddb := timeLaunches(t, c, s, 20, func() error { return g.MoEDownBF(s, grp, dq, H, I, hs.P, ysb.P) })
				dcb := timeLaunches(t, c, s, 20, func() error { return g.MoECombineBF(s, grp, ysb.P, wd.P, out.P, T, H, false) })
				bf = fmt.Sprintf("; bf16 outputs: down %6.1f µs %4.0f TF/s, combine %5.1f µs", us(ddb), flopDown/ddb.Seconds()/1e12, us(dcb))
			}
			t.Logf("moe T=%-4d skew %.1f %-7s route %5.1f µs, gate/up %6.1f µs %4.0f TF/s, down %6.1f µs %4.0f TF/s, combine %5.1f µs; all %6.1f µs, %4.0f TF/s (chosen %s)%s",
				T, rc.skew, tile, us(dr), us(du), flopUp/du.Seconds()/1e12, us(dd), flopDown/dd.Seconds()/1e12, us(dc), us(dt),
				(flopUp+flopDown)/dt.Seconds()/1e12, g.MoETile(T, E, DefaultOptions().MoE), bf)
			grp.Free()
		}
	}
}

// TestGEMMGroupArgsMatchKernel: every grouped dense GEMM in gemm.ptx takes
// the table by value as its first parameter, as many bytes as
// QMVGroupTable makes (DenseGroup passes it so), one entry a dense tile.
func TestGEMMGroupArgsMatchKernel(t *testing.T) {
	ptx, err := kernels.PTX("gemm")
	if err != nil {
		t.Fatal(err)
	}
	entries := regexp.MustCompile(`\.entry (gemm_group_\w+)\(\s*\.param( \.align 8 \.b8 \w+\[(\d+)\])?`).FindAllStringSubmatch(string(ptx), -1)
	if len(entries) != len(GEMMTiles) {
		t.Fatalf("%d grouped entry points in gemm.ptx, want %d", len(entries), len(GEMMTiles))
	}
	for _, e := range entries {
		if e[3] != "120" {
			t.Errorf("%s's first parameter is %q, want the 120-byte table by value", e[1], e[2])
		}
	}
}

// TestGEMMWGModule: gemm_wg.ptx is sm_90a PTX with the four entry points
// of each WGMMATiles tile (the grouped one taking the table by value, as
// gemm.ptx's), their products on wgmma, and gemm.ptx has none of it (it
// stays sm_90 PTX that later GPUs compile).
func TestGEMMWGModule(t *testing.T) {
	ptx, err := kernels.PTX("gemm_wg")
	if err != nil {
		t.Fatal(err)
	}
	src := string(ptx)
	if !strings.Contains(src, ".target sm_90a") {
		t.Error("gemm_wg.ptx is not sm_90a PTX")
	}
	for _, tile := range WGMMATiles {
		for _, kind := range []string{"dense", "group", "gateup", "down"} {
			if !strings.Contains(src, ".entry gemm_"+kind+"_"+tile.Name+"(") {
				t.Errorf("gemm_wg.ptx has no gemm_%s_%s", kind, tile.Name)
			}
		}
	}
	groups := regexp.MustCompile(`\.entry (gemm_group_\w+)\(\s*\.param \.align 8 \.b8 \w+\[120\]`).FindAllString(src, -1)
	if len(groups) != len(WGMMATiles) {
		t.Errorf("%d grouped entry points in gemm_wg.ptx take the 120-byte table, want %d", len(groups), len(WGMMATiles))
	}
	if !strings.Contains(src, "wgmma.mma_async") || !strings.Contains(src, "fence.proxy.async") {
		t.Error("gemm_wg.ptx has no wgmma, or no proxy fence before it")
	}
	plain, err := kernels.PTX("gemm")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(plain); strings.Contains(s, "wgmma") || !strings.Contains(s, ".target sm_90\n") {
		t.Error("gemm.ptx has wgmma in it, or is not sm_90 PTX")
	}
	fit, err := kernels.PTX("gemm_fit")
	if err != nil {
		t.Fatal(err)
	}
	for _, tile := range FitTiles {
		for _, kind := range []string{"dense", "group", "gateup", "down"} {
			if name := "gemm_" + kind + "_" + tile.Name + "("; !strings.Contains(string(fit), ".entry "+name) || strings.Contains(src, name) {
				t.Errorf("gemm_%s_%s: not in gemm_fit.ptx, or in gemm_wg.ptx too", kind, tile.Name)
			}
		}
	}
	if !strings.Contains(string(fit), ".target sm_90a") {
		t.Error("gemm_fit.ptx is not sm_90a PTX")
	}
	fitw, err := kernels.PTX("gemm_fitw")
	if err != nil {
		t.Fatal(err)
	}
	for _, tile := range WidthTiles {
		for _, kind := range []string{"dense", "group", "gateup", "down", "downbf"} {
			if name := "gemm_" + kind + "_" + tile.Name + "("; !strings.Contains(string(fitw), ".entry "+name) {
				t.Errorf("gemm_%s_%s: not in gemm_fitw.ptx", kind, tile.Name)
			}
		}
	}
	ws, err := kernels.PTX("gemm_ws")
	if err != nil {
		t.Fatal(err)
	}
	for _, tile := range DenseOnlyTiles {
		for _, kind := range []string{"dense", "group"} {
			if name := "gemm_" + kind + "_" + tile.Name + "("; !strings.Contains(string(ws), ".entry "+name) {
				t.Errorf("gemm_%s_%s: not in gemm_ws.ptx", kind, tile.Name)
			}
		}
		stages := tile.Stages * ((tile.BM*128 + tile.BN*36 + 1023) / 1024 * 1024)
		switch {
		case !tile.DenseOnly:
			t.Errorf("tile %s: not DenseOnly", tile)
		case tile.Producer && (tile.Threads != 288 || tile.BN != 128 || tile.shared() != stages+16*tile.Stages):
			t.Errorf("tile %s: %+v, shared %d: want a producer warp beside two warpgroups, and its mbarriers' 16 bytes a stage", tile, tile, tile.shared())
		case !tile.Producer && (tile.Threads != 384 || tile.BN != 192 || tile.shared() != stages):
			t.Errorf("tile %s: %+v, shared %d: want three warpgroups of 64 weight rows and their stages", tile, tile, tile.shared())
		}
	}
	if !strings.Contains(string(ws), "@p cp.async.cg.shared.global") {
		t.Error("gemm_ws.ptx: w256r3's copies are not predicated in their instructions")
	}
	for _, want := range []string{".target sm_90a", "mbarrier.try_wait.parity", "cp.async.wait_group 3", "fence.proxy.async", "m64n256k16"} {
		if !strings.Contains(string(ws), want) {
			t.Errorf("gemm_ws.ptx has no %q", want)
		}
	}
	// every width a tile of up to 160 rows can take, in the MoE's kernels
	for _, n := range []int{64, 96, 112, 128, 144, 160} {
		if !strings.Contains(string(fitw), fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", n)) {
			t.Errorf("gemm_fitw.ptx has no wgmma of %d X rows", n)
		}
	}
	if !strings.Contains(string(fitw), ".target sm_90a") {
		t.Error("gemm_fitw.ptx is not sm_90a PTX")
	}
	for _, tile := range slices.Concat(WGMMATiles, FitTiles, WidthTiles, DenseOnlyTiles) {
		if got, err := GEMMTileByName(tile.Name); err != nil || !got.WG {
			t.Errorf("tile %s: found %v, %v", tile.Name, got, err)
		}
	}
}
