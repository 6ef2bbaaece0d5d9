//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

// TestSimdgroupMatrixProduct runs gemm_mma8_check, the simdgroup_matrix
// calls of gemm.metal through the dialect's emulation, on random 8x8 tiles
// against float64: D = A·B + C with B the block at column 0 or 8 of an 8x16
// tile, read as it is or transposed, D read back row-major (through
// threadgroup memory) and transposed (stored to device memory directly).
// Each element is within 1e-6 of Σ|a||b| + |c| (eight float32 fma).
// This shows that the emulation computes the product; not Apple's layout,
// its order of additions or its speed.
func TestSimdgroupMatrixProduct(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "gemm")
	rng := freshRNG(t)
	const tiles = 37
	a, b, cc := randomVector(rng, 64*tiles), randomVector(rng, 128*tiles), randomVector(rng, 64*tiles)
	ab, bb, cb := upBuf(t, c, s, a, "a"), upBuf(t, c, s, b, "b"), upBuf(t, c, s, cc, "c")
	db := newBuf(t, c, s, 128*tiles, "d")
	for _, col0 := range []int{0, 8} {
		for _, tr := range []int{0, 1} {
			db.Poison(t, s)
			args := new(driver.Args).Ptr(ab.P).Ptr(bb.P).Ptr(cb.P).Ptr(db.P)
			withParams(args, kernels.MmaCheckParams{Col0: int32(col0), Transpose: int32(tr)})
			launch(t, s, mod, "gemm_mma8_check", tiles, 32, args)
			got := db.Floats(t, s, "d")
			worst := 0.0
			for k := range tiles {
				bm := func(i, j int) float64 { // B[i][j]
					if tr == 1 {
						return float64(b[128*k+16*j+col0+i])
					}
					return float64(b[128*k+16*i+col0+j])
				}
				for i := range 8 {
					for j := range 8 {
						want, scale := float64(cc[64*k+8*i+j]), math.Abs(float64(cc[64*k+8*i+j]))
						for l := range 8 {
							p := float64(a[64*k+8*i+l]) * bm(l, j)
							want += p
							scale += math.Abs(p)
						}
						for _, g := range []float32{got[128*k+8*i+j], got[128*k+64+8*j+i]} {
							worst = max(worst, math.Abs(float64(g)-want)/scale)
						}
					}
				}
			}
			label := fmt.Sprintf("column %d transpose %d", col0, tr)
			t.Logf("%s: max error %.2g of Σ|a·b|+|c|", label, worst)
			if !(worst <= 1e-6) {
				t.Errorf("%s: off by %.2g of Σ|a·b|+|c| (bar 1e-6)", label, worst)
			}
		}
	}
}

// The bars of gemm.metal's GEMMs, engine/cuda's of gemm.cu (its
// prefill_test.go's tcBars and tcOwnBars): the largest error over the RMS
// of the output, against float64 of the exact inputs (what bf16 inputs
// cost) and against float64 of the bf16-rounded inputs the kernels take
// (float32 sums; for the experts an activation that lands on the other
// side of a bf16 rounding boundary now and then).
var (
	simdBars    = map[string]float64{"dense": 1.5e-2, "experts": 4e-2}
	simdOwnBars = map[string]float64{"dense": 1e-4, "experts": 3e-3}
)

// bf16r rounds to bf16, nearest even.
func bf16r(x float32) float32 {
	u := math.Float32bits(x)
	return math.Float32frombits((u + 0x7fff + ((u >> 16) & 1)) &^ 0xffff)
}

func bf16bits(x float32) uint16 { return uint16(math.Float32bits(bf16r(x)) >> 16) }

func fromBF16(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// weights64 is matrix row r dequantised two ways: exactly (s·q + b in
// float64) and as the GEMMs stage it (fma(q, s, b) in float32, rounded to
// bf16).
func weights64(m *quant.Matrix, r int, exact, own []float64) {
	wpr, gpr := m.WordsPerRow(), m.GroupsPerRow()
	for c := range m.Cols {
		q := float64((m.Words[r*wpr+c/8] >> (4 * (c % 8))) & 0xF)
		s, b := fromBF16(m.Scales[r*gpr+c/64]), fromBF16(m.Biases[r*gpr+c/64])
		exact[c] = float64(s)*q + float64(b)
		own[c] = float64(bf16r(float32(math.FMA(q, float64(s), float64(b)))))
	}
}

// matmul64 is y[M, N] = x[M, K]·W[rows0.., K]ᵀ for both dequantisations of
// W, x exact and rounded to bf16: (exact, own).
func matmul64(m *quant.Matrix, rows0, N int, x []float32, M int) (exact, own []float64) {
	K := m.Cols
	exact, own = make([]float64, M*N), make([]float64, M*N)
	xr := make([]float64, len(x))
	for i, v := range x {
		xr[i] = float64(bf16r(v))
	}
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			we, wo := make([]float64, K), make([]float64, K)
			for n := w; n < N; n += workers {
				weights64(m, rows0+n, we, wo)
				for r := range M {
					var se, so float64
					for k := range K {
						se += float64(x[r*K+k]) * we[k]
						so += xr[r*K+k] * wo[k]
					}
					exact[r*N+n], own[r*N+n] = se, so
				}
			}
		}()
	}
	wg.Wait()
	return exact, own
}

// overRMS is max|got - want| / rms(want).
func overRMS(got []float32, want []float64) float64 {
	var e, ss float64
	for i, w := range want {
		e = max(e, math.Abs(float64(got[i])-w))
		ss += w * w
	}
	return e / math.Sqrt(ss/float64(max(len(want), 1)))
}

// gemmKind is one implementation of prefill's 4-bit GEMMs: its family and
// its dense, gate/up and down entries, launched alike (the same parameter
// structs, grids and threadgroups). The grouping, the shared expert's
// SwiGLU and the combine are gemm.metal's under both.
type gemmKind struct {
	family                            string
	denseF32, denseBF16, gateup, down string
}

var (
	simdGEMM   = gemmKind{"gemm", "gemm_dense_f32", "gemm_dense_bf16", "gemm_gateup", "gemm_down"}
	tensorGEMM = gemmKind{"gemm_tensor", "gemm_tensor_dense_f32", "gemm_tensor_dense_bf16", "gemm_tensor_gateup", "gemm_tensor_down"}
)

// TestGEMMDenseMatchesReference runs gemm_dense_f32 and gemm_dense_bf16 at
// shapes off the tile boundaries and at the 35B model's (its attention
// output and the shared expert's down projection), outputs poisoned,
// guards checked, within simdOwnBars of float64 from the bf16-rounded
// inputs and within simdBars of the exact ones.
func TestGEMMDenseMatchesReference(t *testing.T) { testGEMMDense(t, simdGEMM) }

// TestGEMMTensorDenseMatchesReference is TestGEMMDenseMatchesReference for
// gemm_tensor.metal's dense entries (matmul2d, as the dialect emulates it),
// within the same bars: the same bf16 operands with float32 sums.
func TestGEMMTensorDenseMatchesReference(t *testing.T) { testGEMMDense(t, tensorGEMM) }

func testGEMMDense(t *testing.T, kind gemmKind) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, kind.family)
	rng := freshRNG(t)
	for _, sh := range []struct{ M, N, K int }{{37, 136, 192}, {2, 8, 64}, {100, 2048, 512}, {64, 2048, 4096}, {33, 520, 1024}} {
		w := quant.RandomMatrix(rng, 1, sh.N, sh.K, 4, 64)
		x := randomVector(rng, sh.M*sh.K)
		exact, own := matmul64(&w, 0, sh.N, x, sh.M)
		wq := uploadQ(t, c, s, &w, "W")
		xb := make([]uint16, len(x))
		for i, v := range x {
			xb[i] = bf16bits(v)
		}
		xf, xh := upBuf(t, c, s, x, "x"), upBuf(t, c, s, xb, "x bf16")
		yb := newBuf(t, c, s, sh.M*sh.N, "y")
		for _, entry := range []string{kind.denseF32, kind.denseBF16} {
			yb.Poison(t, s)
			xp := xf.P
			if entry == kind.denseBF16 {
				xp = xh.P
			}
			args := new(driver.Args).Ptr(xp).Ptr(wq.words.P).Ptr(wq.sb.P).Ptr(yb.P)
			withParams(args, kernels.GemmDenseParams{M: int32(sh.M), N: int32(sh.N), K: int32(sh.K)})
			grid := driver.Dim3{X: ceilDiv(sh.N, 64), Y: ceilDiv(sh.M, 32), Z: 1}
			if err := s.Launch(function(t, mod, entry), grid, driver.D1(128), 0, args); err != nil {
				t.Fatal(err)
			}
			if err := s.Sync(); err != nil {
				t.Fatalf("%s: %v", entry, err)
			}
			launched.Store(entry, true)
			got := yb.Floats(t, s, "y")
			eo, ee := overRMS(got, own), overRMS(got, exact)
			label := fmt.Sprintf("%s %dx%dx%d", entry, sh.M, sh.N, sh.K)
			t.Logf("%s: %.2g of the RMS against bf16 inputs, %.2g against exact ones", label, eo, ee)
			if !(eo <= simdOwnBars["dense"]) || !(ee <= simdBars["dense"]) {
				t.Errorf("%s: off by %.2g (bar %g) against bf16 inputs, %.2g (bar %g) against exact ones", label, eo, simdOwnBars["dense"], ee, simdBars["dense"])
			}
		}
	}
}

// TestGEMMExpertsMatchReference runs the MoE of a prefill chunk on
// gemm.metal as the backend lowers it (moe_route; the shared expert's
// gemm_dense_f32 gate and up, moe_shared_swiglu, gemm_dense_bf16 down into
// out; gemm_gateup, gemm_down, moe_combine adding to out) at the 35B
// model's expert shapes and small odd ones, over tokens routed at random
// with one slot of one token given an id outside the stack: the grouping
// is checked exactly against the host's (counts, offsets, each pair's row
// holding its token, the tile map, the bad-id count), the bad token's row
// is NaN, and every other row is within simdOwnBars of float64 from the
// bf16-rounded inputs and within simdBars of the exact ones. The shared
// expert gate's logit is given (ops.metal's GEMM makes it; its own test
// is there).
func TestGEMMExpertsMatchReference(t *testing.T) { testGEMMExperts(t, simdGEMM) }

// TestGEMMTensorExpertsMatchReference is TestGEMMExpertsMatchReference with
// the GEMMs (the shared expert's dense ones, the grouped gate/up and down)
// on gemm_tensor.metal, as gemm=tensor lowers it, within the same bars.
func TestGEMMTensorExpertsMatchReference(t *testing.T) { testGEMMExperts(t, tensorGEMM) }

func testGEMMExperts(t *testing.T, kind gemmKind) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "gemm")
	gmod := module(t, c, kind.family)
	rng := freshRNG(t)
	for _, sh := range []struct {
		name                       string
		tokens, E, H, I, SI, badAt int
	}{{"35B", 100, 256, 2048, 512, 512, 37}, {"small", 23, 16, 192, 128, 256, 5}, {"odd", 61, 9, 320, 64, 64, 60}} {
		T, E, H, I, SI := sh.tokens, sh.E, sh.H, sh.I, sh.SI
		gate, up := quant.RandomMatrix(rng, E, I, H, 4, 64), quant.RandomMatrix(rng, E, I, H, 4, 64)
		down := quant.RandomMatrix(rng, E, H, I, 4, 64)
		sg, su := quant.RandomMatrix(rng, 1, SI, H, 4, 64), quant.RandomMatrix(rng, 1, SI, H, 4, 64)
		sd := quant.RandomMatrix(rng, 1, H, SI, 4, 64)
		x := randomVector(rng, T*H)
		logit := randomVector(rng, T)
		ids, wts := make([]int32, T*gemmTopK), make([]float32, T*gemmTopK)
		for tok := range T {
			i, w := randomRouting(rng, E)
			copy(ids[tok*gemmTopK:], i)
			copy(wts[tok*gemmTopK:], w)
		}
		ids[sh.badAt*gemmTopK+3] = int32(E)

		// references: both kinds of every product, the activations
		// rounded to bf16 on the own side as the kernels write them
		wantE, wantO := make([]float64, T*H), make([]float64, T*H)
		gE, gO := matmul64(&sg, 0, SI, x, T)
		uE, uO := matmul64(&su, 0, SI, x, T)
		hsE, hsO := make([]float32, T*SI), make([]float32, T*SI)
		for i := range hsE {
			gt := sigmoid64(float64(logit[i/SI]))
			hsE[i] = float32(gt * silu64(gE[i]) * uE[i])
			hsO[i] = bf16r(float32(gt * silu64(gO[i]) * uO[i]))
		}
		for tok := range T {
			dE, _ := matmul64(&sd, 0, H, hsE[tok*SI:(tok+1)*SI], 1)
			_, dO := matmul64(&sd, 0, H, hsO[tok*SI:(tok+1)*SI], 1)
			copy(wantE[tok*H:], dE)
			copy(wantO[tok*H:], dO)
			for k := range gemmTopK {
				e := int(ids[tok*gemmTopK+k])
				if e >= E {
					continue
				}
				xt := x[tok*H : (tok+1)*H]
				ge, gOwn := matmul64(&gate, e*I, I, xt, 1)
				ue, uOwn := matmul64(&up, e*I, I, xt, 1)
				he, ho := make([]float32, I), make([]float32, I)
				for i := range I {
					he[i] = float32(silu64(ge[i]) * ue[i])
					ho[i] = bf16r(float32(silu64(gOwn[i]) * uOwn[i]))
				}
				ye, _ := matmul64(&down, e*H, H, he, 1)
				_, yo := matmul64(&down, e*H, H, ho, 1)
				for n := range H {
					wantE[tok*H+n] += float64(wts[tok*gemmTopK+k]) * ye[n]
					wantO[tok*H+n] += float64(wts[tok*gemmTopK+k]) * yo[n]
				}
			}
		}

		gq, uq, dq := uploadQ(t, c, s, &gate, "gate"), uploadQ(t, c, s, &up, "up"), uploadQ(t, c, s, &down, "down")
		sgq, suq, sdq := uploadQ(t, c, s, &sg, "shared gate"), uploadQ(t, c, s, &su, "shared up"), uploadQ(t, c, s, &sd, "shared down")
		xb, lb := upBuf(t, c, s, x, "x"), upBuf(t, c, s, logit, "logit")
		idb, wb := upBuf(t, c, s, ids, "ids"), upBuf(t, c, s, wts, "weights")
		pairs := T * gemmTopK
		maxTiles := ceilDiv(pairs, 32) + E
		counts, offsets := newBuf(t, c, s, E, "counts"), newBuf(t, c, s, E+1, "offsets")
		pos, rowTok := newBuf(t, c, s, pairs, "pos"), newBuf(t, c, s, pairs, "rowTok")
		tiles, ntiles, status := newBuf(t, c, s, 2*maxTiles, "tiles"), newBuf(t, c, s, 1, "ntiles"), newBuf(t, c, s, 1, "status")
		gs, us := newBuf(t, c, s, T*SI, "shared g"), newBuf(t, c, s, T*SI, "shared u")
		hs, hb := newBuf(t, c, s, T*SI/2, "shared h"), newBuf(t, c, s, pairs*I/2, "h")
		ys, out := newBuf(t, c, s, pairs*H, "ys"), newBuf(t, c, s, T*H, "out")
		for _, b := range []devBuf{hs, hb} {
			if err := s.Fill32(b.P, bf16NaNPair, int64(b.N)); err != nil {
				t.Fatal(err)
			}
		}
		run := func(entry string, grid driver.Dim3, threads int, a *driver.Args) {
			t.Helper()
			m := mod
			if strings.HasPrefix(entry, kind.family+"_") {
				m = gmod
			}
			if err := s.Launch(function(t, m, entry), grid, driver.D1(threads), 0, a); err != nil {
				t.Fatal(err)
			}
			if err := s.Sync(); err != nil {
				t.Fatalf("%s %s: %v", sh.name, entry, err)
			}
			launched.Store(entry, true)
		}
		d1 := func(n int) driver.Dim3 { return driver.D1(n) }
		run("moe_route", d1(1), 1024, withParams(new(driver.Args).Ptr(idb.P).Ptr(counts.P).Ptr(offsets.P).Ptr(pos.P).Ptr(rowTok.P).
			Ptr(tiles.P).Ptr(ntiles.P).Ptr(status.P), kernels.MoeRouteParams{T: int32(T), E: int32(E), BM: 32}))
		dense := func(entry string, q qmat, xp driver.Ptr, y devBuf, N, K int) {
			run(entry, driver.Dim3{X: ceilDiv(N, 64), Y: ceilDiv(T, 32), Z: 1}, 128, withParams(new(driver.Args).Ptr(xp).Ptr(q.words.P).
				Ptr(q.sb.P).Ptr(y.P), kernels.GemmDenseParams{M: int32(T), N: int32(N), K: int32(K)}))
		}
		dense(kind.denseF32, sgq, xb.P, gs, SI, H)
		dense(kind.denseF32, suq, xb.P, us, SI, H)
		run("moe_shared_swiglu", d1(ceilDiv(T*SI, 256)), 256, withParams(new(driver.Args).Ptr(gs.P).Ptr(us.P).Ptr(lb.P).Ptr(hs.P),
			kernels.SharedSwigluParams{Inter: int32(SI), N: int32(T * SI)}))
		run(kind.gateup, driver.Dim3{X: ceilDiv(I, 32), Y: maxTiles, Z: 1}, 128, withParams(new(driver.Args).Ptr(xb.P).Ptr(rowTok.P).
			Ptr(gq.words.P).Ptr(gq.sb.P).Ptr(uq.words.P).Ptr(uq.sb.P).Ptr(hb.P).Ptr(tiles.P).Ptr(offsets.P).Ptr(ntiles.P),
			kernels.GemmGroupParams{N: int32(I), K: int32(H)}))
		dense(kind.denseBF16, sdq, hs.P, out, H, SI)
		run(kind.down, driver.Dim3{X: ceilDiv(H, 64), Y: maxTiles, Z: 1}, 128, withParams(new(driver.Args).Ptr(hb.P).Ptr(dq.words.P).
			Ptr(dq.sb.P).Ptr(ys.P).Ptr(tiles.P).Ptr(offsets.P).Ptr(ntiles.P), kernels.GemmGroupParams{N: int32(H), K: int32(I)}))
		run("moe_combine", d1(T), 256, withParams(new(driver.Args).Ptr(ys.P).Ptr(pos.P).Ptr(wb.P).Ptr(out.P),
			kernels.MoeCombineParams{N: int32(H), Add: 1}))

		// the grouping, exactly
		hist := make([]int32, E)
		for _, e := range ids {
			if int(e) < E {
				hist[e]++
			}
		}
		gotCounts, gotOff := counts.Ints(t, s, "counts"), offsets.Ints(t, s, "offsets")
		gotPos, gotTok := pos.Ints(t, s, "pos"), rowTok.Words(t, s, "rowTok")
		gotTiles, gotN := tiles.Words(t, s, "tiles"), ntiles.Ints(t, s, "ntiles")
		var off, nt int32
		for e := range E {
			if gotCounts[e] != hist[e] || gotOff[e] != off {
				t.Fatalf("%s: expert %d: count %d at %d, want %d at %d", sh.name, e, gotCounts[e], gotOff[e], hist[e], off)
			}
			for j := int32(0); j < (hist[e]+31)/32; j++ {
				if int32(gotTiles[2*nt]) != int32(e) || int32(gotTiles[2*nt+1]) != off+32*j {
					t.Fatalf("%s: tile %d is (%d, %d), want (%d, %d)", sh.name, nt, gotTiles[2*nt], gotTiles[2*nt+1], e, off+32*j)
				}
				nt++
			}
			off += hist[e]
		}
		if gotOff[E] != off || gotN[0] != nt {
			t.Fatalf("%s: %d rows in %d tiles, want %d in %d", sh.name, gotOff[E], gotN[0], off, nt)
		}
		if st := status.Ints(t, s, "status"); st[0] != 1 {
			t.Errorf("%s: status %d, want the one bad id", sh.name, st[0])
		}
		seen := map[int32]bool{}
		for i, p := range gotPos {
			e := ids[i]
			switch {
			case int(e) >= E && p != -1:
				t.Errorf("%s: the bad id's pair has row %d, want -1", sh.name, p)
			case int(e) < E && (p < gotOff[e] || p >= gotOff[e]+hist[e] || seen[p] || int(gotTok[p]) != i/gemmTopK):
				t.Fatalf("%s: pair %d (expert %d) at row %d (token %d)", sh.name, i, e, p, gotTok[p])
			}
			seen[p] = true
		}

		// the output: the bad token's row NaN, the others within the bars
		words := out.Words(t, s, "out")
		var got []float32
		var wE, wO []float64
		for tok := range T {
			row := words[tok*H : (tok+1)*H]
			if tok == sh.badAt {
				for n, v := range row {
					if f := math.Float32frombits(v); !math.IsNaN(float64(f)) {
						t.Fatalf("%s: token %d has a bad expert id but out[%d] = %v", sh.name, tok, n, f)
					}
				}
				continue
			}
			for n, v := range row {
				got = append(got, math.Float32frombits(v))
				wE, wO = append(wE, wantE[tok*H+n]), append(wO, wantO[tok*H+n])
			}
		}
		eo, ee := overRMS(got, wO), overRMS(got, wE)
		t.Logf("%s %d tokens over %d experts (%d, %d, shared %d): %.2g of the RMS against bf16 inputs, %.2g against exact ones",
			sh.name, T, E, H, I, SI, eo, ee)
		if !(eo <= simdOwnBars["experts"]) || !(ee <= simdBars["experts"]) {
			t.Errorf("%s: off by %.2g (bar %g) against bf16 inputs, %.2g (bar %g) against exact ones", sh.name, eo, simdOwnBars["experts"], ee, simdBars["experts"])
		}
	}
}

const gemmTopK = 8 // GEMM_TOPK
