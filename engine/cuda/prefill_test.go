package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/kernels"
	"petal/engine/quant"
)

// tcBars are the bars of the tensor-core path (gemm=tc) against the
// conformance suite's exact float64 references, as there: the largest
// error over the RMS of the output. The tensor cores take x and the
// dequantised weights rounded to bf16 (each within 2^-9 of itself), the
// experts their SwiGLU activations too, so the errors are those of bf16
// inputs, not of float32: TestTensorCoreBars measures them on the CPU from
// the rounded inputs (on these cases QLinear up to 1.1e-2, QLinearGroup
// 1.3e-3, its RMS mostly the plain 8-bit matrix's, Experts 2.8e-2: the
// weighted sum of eight experts cancels, so its RMS is small beside each
// term's rounding), and the bars leave room over that.
var tcBars = map[string]float64{"QLinear": 1.5e-2, "QLinearGroup": 1.5e-2, "Experts": 4e-2}

// tcOwnBars bound the same outputs against float64 of the bf16-rounded
// inputs, what the kernels compute: float32 sums, and for Experts an
// activation that lands on the other side of a bf16 rounding boundary now
// and then (float32 against float64 sums moved an output of the 300-row
// case's routed experts by 5e-4 of the RMS on the CPU; on an H100 the
// 300-row case came out 1.25e-3 from it and the 240-row case 3.53e-3, the
// same bits under every tile and mode, docs/bench/cuda/2026-12-07-moeys1).
var tcOwnBars = map[string]float64{"QLinear": 1e-4, "QLinearGroup": 1e-4, "Experts": 6e-3}

// tcCase is an op of several rows at a shape the tensor-core GEMMs take.
type tcCase struct {
	name    string
	op      string   // the op's name, for the bars
	kernels []string // with gemm=tc: the kernels, by prefix
	grouped []string // the same under linears=group, where they differ
	make    func(rng *rand.Rand) *tcData
	downBF  bool // under moeys=bf16 its down GEMM's tile writes bf16 (gemm_downbf_)
}

// tcData is a case's inputs and references, made on the CPU.
type tcData struct {
	mats      []quant.Matrix
	build     func(b *Backend, ws []backend.Matrix) (backend.Op, backend.Buffer) // the op and its output
	exact, bf []float64                                                          // from exact inputs; from the rounded inputs the tensor cores take
	width     int                                                                // of an output row
	nanRow    int                                                                // a row that must come out NaN (a bad expert id), or -1
	// Experts: bfYs is bf with each routed expert's output rounded to
	// bf16 (moeys=bf16), ysULP per output the sum over its experts of
	// |weight|·(a bf16 unit in the last place of that expert's output):
	// what a kernel's float32 sums landing on the other side of a rounding
	// boundary can move it by
	bfYs, ysULP []float64
}

func bf16Floats(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = bf16r(v)
	}
	return out
}

// weights64 is m dequantised as the references take it: exact, and each
// weight rounded to bf16 as the GEMMs' tile loads round it.
func weights64(m *quant.Matrix) (exact, bf []float64) {
	w, wb := dequantAll(m)
	exact, bf = make([]float64, len(w)), make([]float64, len(w))
	for i := range w {
		exact[i], bf[i] = float64(w[i]), float64(wb[i])
	}
	return exact, bf
}

func tcCases() []tcCase {
	var cases []tcCase
	for _, sh := range []struct{ rows, R, C int }{{2, 264, 320}, {7, 264, 320}, {100, 264, 320}, {513, 264, 320}, {100, 512, 2048}} {
		cases = append(cases, tcCase{name: fmt.Sprintf("QLinear %d rows %dx%d", sh.rows, sh.R, sh.C), op: "QLinear",
			kernels: []string{"gemm_to_bf16", "gemm_dense_"},
			make: func(rng *rand.Rand) *tcData {
				m := quant.RandomMatrix(rng, 1, sh.R, sh.C, 4, 64)
				x := randoms(rng, sh.rows*sh.C, 1)
				w, wb := weights64(&m)
				return &tcData{mats: []quant.Matrix{m}, width: sh.R, nanRow: -1,
					exact: backendtest.Linear(w, sh.R, sh.C, x, sh.rows), bf: backendtest.Linear(wb, sh.R, sh.C, bf16Floats(x), sh.rows),
					build: func(b *Backend, ws []backend.Matrix) (backend.Op, backend.Buffer) {
						o := &backend.QLinear{X: floats(b, x), W: ws[0], Y: floats(b, nans(sh.rows*sh.R)), Rows: sh.rows}
						return o, o.Y
					}}
			}})
	}
	for _, g := range []struct {
		rows  int
		plain bool
		C     int // 2048: k-tiles enough for splitk=on to split the 16-row tile's GEMMs
	}{{3, true, 256}, {100, true, 256}, {3, false, 256}, {100, false, 256}, {16, true, 2048}, {16, false, 2048}} {
		rows, C := g.rows, g.C
		// plain: an 8-bit matrix and one of 67 rows stay on the plain GEMM,
		// the others one launch each; else four 4-bit matrices, one
		// grouped launch.
		name, shape := fmt.Sprintf("QLinearGroup %d rows %d wide, 4-bit", rows, C), []int{264, 8, 136, 72}
		kernels, grouped := []string{"gemm_to_bf16", "gemm_dense_", "gemm_dense_", "gemm_dense_", "gemm_dense_"}, []string{"gemm_to_bf16", "gemm_group_"}
		if g.plain {
			name, shape = fmt.Sprintf("QLinearGroup %d rows %d wide", rows, C), []int{264, 8, 136, 72, 67}
			kernels, grouped = []string{"gemm_to_bf16", "gemm_dense_", "gemm_dense_", "qgemm", "gemm_dense_", "qgemm"}, nil
		}
		cases = append(cases, tcCase{name: name, op: "QLinearGroup", kernels: kernels, grouped: grouped,
			make: func(rng *rand.Rand) *tcData {
				x := randoms(rng, rows*C, 1)
				d := &tcData{nanRow: -1}
				for i, R := range shape {
					bits := 4
					if i == 2 && g.plain {
						bits = 8
					}
					m := quant.RandomMatrix(rng, 1, R, C, bits, 64)
					w, wb := weights64(&m)
					d.mats = append(d.mats, m)
					exact := backendtest.Linear(w, R, C, x, rows)
					d.exact = append(d.exact, exact...)
					if bits == 4 && R%8 == 0 {
						d.bf = append(d.bf, backendtest.Linear(wb, R, C, bf16Floats(x), rows)...)
					} else {
						d.bf = append(d.bf, exact...)
					}
				}
				d.width = len(d.exact) / rows // rows of the group's output are not contiguous: checked whole
				d.build = func(b *Backend, ws []backend.Matrix) (backend.Op, backend.Buffer) {
					o := &backend.QLinearGroup{X: floats(b, x), W: ws, Y: floats(b, nans(len(d.exact))), Rows: rows}
					return o, o.Y
				}
				return d
			}})
	}
	for _, c := range []struct {
		rows, bad int // bad: a row with an expert id outside the stack, or -1
	}{{2, -1}, {37, -1}, {300, -1}, {5, 3}, {20, -1}, {240, -1}} {
		name := fmt.Sprintf("Experts %d rows", c.rows)
		if c.bad >= 0 {
			name += ", a bad expert id"
		}
		cases = append(cases, tcCase{name: name, op: "Experts",
			kernels: []string{"gemm_to_bf16", "qgemm", "gemm_dense_", "gemm_dense_", "moe_shared_swiglu", "gemm_dense_",
				"moe_route", "gemm_gateup_", "gemm_down_", "moe_combine"},
			grouped: []string{"gemm_to_bf16", "qgemm", "gemm_group_", "moe_shared_swiglu", "gemm_dense_",
				"moe_route", "gemm_gateup_", "gemm_down_", "moe_combine"},
			make: func(rng *rand.Rand) *tcData { return expertsData(rng, c.rows, c.bad) },
			// moe=wg's tiles (16 experts): 20 rows w32r, 37 w64r, 240 w160rp,
			// 300 w128rp; below 5 rows an expert (2 and 5 rows) a streamed one
			downBF: c.rows*MoETopK/16 > 4})
	}
	return cases
}

// expertsData is an Experts op of 16 experts (hidden 256, inter 128, shared
// inter 192, top-8) over rows rows, with the references.
func expertsData(rng *rand.Rand, rows, bad int) *tcData {
	const E, H, I, SI, K = 16, 256, 128, 192, MoETopK
	d := &tcData{width: H, nanRow: bad}
	shapes := []struct{ experts, rows, cols, bits int }{
		{E, I, H, 4}, {E, I, H, 4}, {E, H, I, 4}, {1, SI, H, 4}, {1, SI, H, 4}, {1, H, SI, 4}, {1, 1, H, 8},
	}
	ex, bf := make([][]float64, len(shapes)), make([][]float64, len(shapes))
	for i, s := range shapes {
		m := quant.RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, 64)
		d.mats = append(d.mats, m)
		ex[i], bf[i] = weights64(&m)
	}
	x, wts := randoms(rng, rows*H, 1), randoms(rng, rows*K, 1)
	var idx []int32
	for range rows {
		for _, e := range rng.Perm(E)[:K] {
			idx = append(idx, int32(e))
		}
	}
	if bad >= 0 {
		idx[bad*K+5] = E
	}
	xb := bf16Floats(x)
	silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	d.exact, d.bf, d.bfYs, d.ysULP = make([]float64, rows*H), make([]float64, rows*H), make([]float64, rows*H), make([]float64, rows*H)
	parallelFor(rows, func(t int) {
		if t == bad {
			return
		}
		xr, xbr := x[t*H:(t+1)*H], xb[t*H:(t+1)*H]
		logit := backendtest.Linear(ex[6], 1, H, xr, 1)[0] // the plain GEMM's, from x in float32
		gate := 1 / (1 + math.Exp(-logit))
		// swiglu from the rounded inputs, its activations rounded to bf16
		swiglu := func(g, u, dn []float64, inter int, scale float64) []float64 {
			gv, uv := backendtest.Linear(g, inter, H, xbr, 1), backendtest.Linear(u, inter, H, xbr, 1)
			h := make([]float32, inter)
			for j := range h {
				h[j] = bf16r(float32(scale * silu(gv[j]) * uv[j]))
			}
			return backendtest.Linear(dn, H, inter, h, 1)
		}
		exact, rounded, roundedYs, ulps := make([]float64, H), make([]float64, H), make([]float64, H), make([]float64, H)
		for k := range K {
			e, w := int(idx[t*K+k]), float64(wts[t*K+k])
			y := backendtest.SwiGLU(ex[0][e*I*H:][:I*H], ex[1][e*I*H:][:I*H], ex[2][e*H*I:][:H*I], I, H, xr)
			yb := swiglu(bf[0][e*I*H:][:I*H], bf[1][e*I*H:][:I*H], bf[2][e*H*I:][:H*I], I, 1)
			for i := range H {
				exact[i] += w * y[i]
				rounded[i] += w * yb[i]
				roundedYs[i] += w * float64(bf16r(float32(yb[i])))
				ulps[i] += math.Abs(w) * bf16ULP(yb[i])
			}
		}
		ys, ysb := backendtest.SwiGLU(ex[3], ex[4], ex[5], SI, H, xr), swiglu(bf[3], bf[4], bf[5], SI, gate)
		for i := range H {
			d.exact[t*H+i] = exact[i] + gate*ys[i]
			d.bf[t*H+i] = rounded[i] + ysb[i]
			d.bfYs[t*H+i] = roundedYs[i] + ysb[i]
			d.ysULP[t*H+i] = ulps[i]
		}
	})
	d.build = func(b *Backend, ws []backend.Matrix) (backend.Op, backend.Buffer) {
		o := &backend.Experts{X: floats(b, x), Idx: ints(b, idx), Weights: floats(b, wts), Gate: ws[0], Up: ws[1], Down: ws[2],
			SharedGate: ws[3], SharedUp: ws[4], SharedDown: ws[5], SharedExpertGate: ws[6], Out: floats(b, nans(rows*H)),
			Rows: rows, TopK: K, Inter: I, SharedInter: SI}
		return o, o.Out
	}
	return d
}

// bf16ULP is a bf16 unit in the last place of v: 2^-7 of the power of two
// at or below |v| (0 for 0).
func bf16ULP(v float64) float64 {
	if v == 0 {
		return 0
	}
	_, e := math.Frexp(math.Abs(v)) // |v| = f·2^e, f in [0.5, 1)
	return math.Ldexp(1, e-1-7)
}

// withinULP: every |got - want| is at most bar times the RMS of want plus
// slack of that element, and nothing is NaN.
func withinULP(t *testing.T, what string, got []float32, want, slack []float64, bar float64) {
	t.Helper()
	if len(got) != len(want) || len(slack) != len(want) {
		t.Fatalf("%s: %d values, want %d (slack %d)", what, len(got), len(want), len(slack))
	}
	var worst float64
	rms := rmsOf(want)
	for i, g := range got {
		if g != g {
			t.Fatalf("%s: element %d is NaN (unwritten?), want %g", what, i, want[i])
		}
		d := math.Abs(float64(g) - want[i])
		worst = max(worst, d/rms)
		if d > bar*rms+slack[i] {
			t.Errorf("%s: element %d is %g, want %g within %.3g of the RMS and %.3g (its outputs' bf16 units)", what, i, g, want[i], bar, slack[i])
			return
		}
	}
	t.Logf("%s: error %.3g of the RMS %.3g (a bf16 unit's slack an element)", what, worst, rms)
}

// dropRow is v without row r of width w (r < 0: v).
func dropRow[T any](v []T, r, w int) []T {
	if r < 0 {
		return v
	}
	return append(append([]T(nil), v[:r*w]...), v[(r+1)*w:]...)
}

func widen32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// TestTensorCoreBars: float64 from the bf16-rounded inputs the tensor
// cores take is within tcBars of the exact references on every case (the
// bars are what bf16 inputs cost; for Experts with each expert's output
// rounded to bf16 too, moeys=bf16's), and beyond the conformance suite's
// float32 bars (so the tensor-core path is not checked against float32's).
func TestTensorCoreBars(t *testing.T) {
	for i, c := range tcCases() {
		t.Run(c.name, func(t *testing.T) {
			d := c.make(rand.New(rand.NewPCG(11, uint64(i))))
			got, want := widen32(dropRow(d.bf, d.nanRow, d.width)), dropRow(d.exact, d.nanRow, d.width)
			withinBar(t, c.op+" from bf16 inputs", got, want, tcBars[c.op])
			t.Logf("relative L2 %.3g", relL2(got, want))
			if d.bfYs != nil { // moeys=bf16's outputs, each expert's rounded to bf16, meet the same bar
				withinBar(t, c.op+" from bf16 inputs and expert outputs", widen32(dropRow(d.bfYs, d.nanRow, d.width)), want, tcBars[c.op])
			}
			if relErr(got, want) <= backendtest.Tolerances[c.op][backend.F32] && len(got) > 2000 {
				t.Errorf("bf16 inputs are within the float32 bar %g: the case shows nothing", backendtest.Tolerances[c.op][backend.F32])
			}
		})
	}
}

func relErr(got []float32, want []float64) float64 {
	var ss, worst float64
	for i, w := range want {
		ss += w * w
		worst = max(worst, math.Abs(float64(got[i])-w))
	}
	return worst / math.Sqrt(ss/float64(len(want)))
}

// TestTensorCoreOpsMatchReferences: with gemm=tc, QLinear, QLinearGroup and
// Experts of several rows run on the tensor-core GEMMs where those take
// their matrices (the kernels say so; an 8-bit matrix or one of 67 rows
// stays on the plain GEMM), outputs poisoned first, within tcOwnBars of
// float64 from the rounded inputs and within tcBars of the exact
// references; a bad expert id makes its row NaN, as on the plain kernels.
// The same under linears=group (a QLinearGroup's GEMMs in one launch),
// moe=reg and moe=stream (the MoE through gemm_rq or gemm_stream at few
// rows), and splitk=on (the 16-row tile's columns split, apart and
// grouped). With
// gemm=plain the same ops run no tensor-core kernel and meet the
// conformance suite's float32 bars.
func TestTensorCoreOpsMatchReferences(t *testing.T) {
	for _, m := range []struct {
		mode       string
		tc, groups bool
		moe        MoEKernel
		splitK     string
		ysBF       bool // moeys=bf16
		blocks     bool // moegroup=blocks
	}{{"tc,splitk=off", true, false, MoESmem, "off", false, false}, {"tc,linears=group", true, true, MoESmem, "on", false, false},
		{"tc,moe=reg", true, false, MoEReg, "on", false, false}, {"tc,moe=stream,linears=group", true, true, MoEStream, "on", false, false},
		{"tc,splitk=on", true, false, MoESmem, "on", false, false}, {"tc,linears=group,splitk=all", true, true, MoESmem, "all", false, false},
		{"moeys=f32,moegroup=one", true, true, MoEWG, "all", false, false}, {"defaults", true, true, MoEWG, "all", true, true},
		{"plain", false, false, MoESmem, "off", false, false}} {
		o := DefaultOptions()
		o.TensorCores, o.MoE, o.GroupGEMM, o.MoEYsBF16, o.MoEGroupBlocks = m.tc, m.moe, m.groups, m.ysBF, m.blocks
		o.SplitK, o.SplitKGroups = m.splitK != "off", m.splitK == "all"
		b := testBackend(t, o)
		tc, mode, ysBF, blocks := m.tc, m.mode, m.ysBF, m.blocks
		for i, c := range tcCases() {
			t.Run(c.name+" gemm="+mode, func(t *testing.T) {
				d := c.make(rand.New(rand.NewPCG(11, uint64(i))))
				var ws []backend.Matrix
				for _, m := range d.mats {
					w, err := b.Upload(m)
					if err != nil {
						t.Fatal(err)
					}
					ws = append(ws, w)
				}
				op, out := d.build(b, ws)
				p, err := b.Compile([]backend.Op{op})
				if err != nil {
					t.Fatal(err)
				}
				names := p.(*program).kernelNames()[0]
				ranBF := slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "gemm_downbf_") })
				if ranBF != (ysBF && c.downBF) {
					t.Errorf("kernels %v: gemm_downbf_ ran %v, want %v", names, ranBF, ysBF && c.downBF)
				}
				if tc {
					want := c.kernels
					if o.GroupGEMM && c.grouped != nil {
						want = c.grouped
					}
					if ranBF {
						want = slices.Clone(want)
						want[slices.Index(want, "gemm_down_")] = "gemm_downbf_"
					}
					if i := slices.Index(want, "moe_route"); i >= 0 && blocks {
						want = slices.Clone(want)
						want[i] = "moe_group"
					}
					ok := len(names) == len(want)
					for j := 0; ok && j < len(names); j++ {
						ok = strings.HasPrefix(names[j], want[j])
					}
					if !ok {
						t.Errorf("kernels %v, want %v", names, want)
					}
				} else {
					for _, n := range names {
						if strings.HasPrefix(n, "gemm_") || strings.HasPrefix(n, "moe_") {
							t.Errorf("gemm=plain ran %v", names)
							break
						}
					}
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				got := read(t, b, out)
				if d.nanRow >= 0 {
					for j, v := range got[d.nanRow*d.width : (d.nanRow+1)*d.width] {
						if v == v {
							t.Fatalf("row %d has a bad expert id, but its element %d is %g, not NaN", d.nanRow, j, v)
						}
					}
				}
				got = dropRow(got, d.nanRow, d.width)
				exact := dropRow(d.exact, d.nanRow, d.width)
				if ranBF {
					withinULP(t, c.op+" against bf16 inputs and outputs", got, dropRow(d.bfYs, d.nanRow, d.width),
						dropRow(d.ysULP, d.nanRow, d.width), tcOwnBars[c.op])
					withinBar(t, c.op+" against exact inputs", got, exact, tcBars[c.op])
				} else if tc {
					withinBar(t, c.op+" against bf16 inputs", got, dropRow(d.bf, d.nanRow, d.width), tcOwnBars[c.op])
					withinBar(t, c.op+" against exact inputs", got, exact, tcBars[c.op])
				} else {
					within(t, c.op, got, exact)
				}
			})
		}
	}
}

// uploadAll uploads mats to b.
func uploadAll(t *testing.T, b *Backend, mats []quant.Matrix) []backend.Matrix {
	t.Helper()
	var ws []backend.Matrix
	for _, m := range mats {
		u, err := b.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, u)
	}
	return ws
}

// TestNormBF16MatchesApart: under normbf=on a prompt chunk's AddRMSNorm or
// GatedRMSNorm followed by the QLinearGroup or QLinear that reads its
// output runs as norm_bf.cu's norm and the GEMMs without gemm_to_bf16, and
// every output (the norm's, h, the GEMMs') is bit for bit what the ops give
// apart under normbf=off, outputs poisoned first; rows of up to 2,048 (the
// norm's row in registers) and longer, one and several matrices.
func TestNormBF16MatchesApart(t *testing.T) {
	on, off := DefaultOptions(), DefaultOptions()
	on.NormBF16, off.NormBF16 = true, false
	bOn, bOff := testBackend(t, on), testBackend(t, off)
	for _, c := range []struct {
		name        string
		gated       bool
		rows, heads int
		dim         int   // the norm's dim (per head when gated)
		outs        []int // the matrices' rows
	}{
		{"input norm, in_proj group", false, 37, 1, 256, []int{264, 136, 72}},
		{"input norm of 2,560, one matrix", false, 21, 1, 2560, []int{128}},
		{"gated norm, out_proj", true, 29, 4, 64, []int{264}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(17, uint64(c.rows)))
			cols := c.heads * c.dim
			var mats []quant.Matrix
			for _, r := range c.outs {
				mats = append(mats, quant.RandomMatrix(rng, 1, r, cols, 4, 64))
			}
			x, z, d := randoms(rng, c.rows*cols, 1), randoms(rng, c.rows*cols, 1), randoms(rng, c.rows*cols, 1)
			w := randoms(rng, c.dim, 1)
			var got [2][][]float32
			for k, b := range []*Backend{bOn, bOff} {
				ws := uploadAll(t, b, mats)
				h, out := floats(b, x), floats(b, nans(c.rows*cols))
				total := 0
				for _, r := range c.outs {
					total += r * c.rows
				}
				y := floats(b, nans(total))
				var ops []backend.Op
				if c.gated {
					ops = append(ops, &backend.GatedRMSNorm{X: h, Z: floats(b, z), Weight: floats(b, w), Out: out, Rows: c.rows, Heads: c.heads, Dim: c.dim, Eps: 1e-6})
				} else {
					ops = append(ops, &backend.AddRMSNorm{H: h, Delta: floats(b, d), Weight: floats(b, w), Out: out, Rows: c.rows, Dim: c.dim, Eps: 1e-6})
				}
				if len(ws) == 1 {
					ops = append(ops, &backend.QLinear{X: out, W: ws[0], Y: y, Rows: c.rows})
				} else {
					ops = append(ops, &backend.QLinearGroup{X: out, W: ws, Y: y, Rows: c.rows})
				}
				p, err := b.Compile(ops)
				if err != nil {
					t.Fatal(err)
				}
				names := p.(*program).kernelNames()
				fused := slices.ContainsFunc(names[0], func(n string) bool { return strings.HasSuffix(n, "_bf") })
				converted := slices.Contains(names[1], "gemm_to_bf16")
				if fused != (k == 0) || converted != (k == 1) {
					t.Errorf("normbf=%v: kernels %v", k == 0, names)
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				got[k] = [][]float32{read(t, b, out), read(t, b, h), read(t, b, y)}
			}
			for j, what := range []string{"the norm's output", "h", "the GEMMs' output"} {
				for i := range got[1][j] {
					if math.Float32bits(got[0][j][i]) != math.Float32bits(got[1][j][i]) {
						t.Fatalf("%s element %d: %v with normbf=on, %v apart", what, i, got[0][j][i], got[1][j][i])
					}
				}
			}
		})
	}
}

// TestNormBF16MoEMatchesApart: under normbf=moe a prompt chunk's
// post-attention norm, router and experts run as norm_bf.cu's norm
// (writing the experts' bf16 copy of its output too), the router and the
// experts without their gemm_to_bf16, and h, the normed rows, the expert
// ids and weights and the MoE's output are bit for bit what normbf=on
// gives (the norm apart, the conversion in the experts), outputs poisoned
// first, at the 35B shape and a small one, with a delta and without, over
// two runs of the program.
func TestNormBF16MoEMatchesApart(t *testing.T) {
	on, moe := DefaultOptions(), DefaultOptions()
	on.NormBF16MoE, moe.NormBF16MoE = false, true
	bOn, bMoE := testBackend(t, on), testBackend(t, moe)
	type shape struct{ E, H, I, rows int }
	for _, sh := range []shape{{256, 2048, 512, 300}, {16, 256, 128, 37}} {
		for _, withDelta := range []bool{true, false} {
			t.Run(fmt.Sprintf("E=%d H=%d I=%d rows=%d delta=%v", sh.E, sh.H, sh.I, sh.rows, withDelta), func(t *testing.T) {
				rng := freshRNG(t)
				ms := randomMoEMatrices(rng, sh.E, sh.H, sh.I, 8)
				h, delta, w := randoms(rng, sh.rows*sh.H, 2), randoms(rng, sh.rows*sh.H, 1), randoms(rng, sh.H, 1)
				if !withDelta {
					delta = nil
				}
				type result struct {
					h, a, wts, out []float32
					ids            []int32
					names          [][]string
				}
				run := func(b *Backend) result {
					n, r, e := newMoEBlockRows(t, b, ms, sh.I, sh.rows, h, delta, w)
					p, err := b.Compile([]backend.Op{n, r, e})
					if err != nil {
						t.Fatal(err)
					}
					runWith(t, b, p, 2, map[backend.Buffer][]float32{n.H: h, n.Out: nans(sh.rows * sh.H), e.Out: nans(sh.rows * sh.H)})
					return result{read(t, b, n.H), read(t, b, n.Out), read(t, b, r.Weights), read(t, b, e.Out), readInts(t, b, r.Idx),
						p.(*program).kernelNames()}
				}
				f, a := run(bMoE), run(bOn)
				if len(f.names) != 3 || !slices.Contains(f.names[0], "add_rmsnorm_bf") || slices.Contains(f.names[2], "gemm_to_bf16") ||
					!slices.Contains(a.names[2], "gemm_to_bf16") {
					t.Fatalf("kernels %v under normbf=moe, %v under normbf=on", f.names, a.names)
				}
				sameBits(t, "h", f.h, a.h)
				sameBits(t, "the normed rows", f.a, a.a)
				sameBits(t, "the weights", f.wts, a.wts)
				if !slices.Equal(f.ids, a.ids) {
					t.Errorf("expert ids differ under normbf=moe and normbf=on")
				}
				sameBits(t, "the output", f.out, a.out)
			})
		}
	}
}

// TestNormF32LeanMatchesFull: under normf32=lean a prompt chunk's norm
// whose float32 output the program writes over before any op but its GEMM
// reads it (a norm, its GEMM, then a second norm into the same output and
// its GEMM) runs as norm_bfo.cu's, without that output, and the second,
// whose output is still there at the end, as norm_bf.cu's; both GEMMs'
// outputs, h and the last norm's output are bit for bit normf32=full's,
// outputs poisoned first.
func TestNormF32LeanMatchesFull(t *testing.T) {
	lean, full := DefaultOptions(), DefaultOptions()
	lean.NormF32Lean, full.NormF32Lean = true, false
	bLean, bFull := testBackend(t, lean), testBackend(t, full)
	for _, gated := range []bool{false, true} {
		t.Run(fmt.Sprintf("gated=%v", gated), func(t *testing.T) {
			rng := freshRNG(t)
			const rows, heads, dim, outs = 45, 4, 64, 136
			cols := heads * dim
			if !gated {
				cols = dim * 4
			}
			m1, m2 := quant.RandomMatrix(rng, 1, outs, cols, 4, 64), quant.RandomMatrix(rng, 1, outs, cols, 4, 64)
			x, z, d := randoms(rng, rows*cols, 1), randoms(rng, rows*cols, 1), randoms(rng, rows*cols, 1)
			w1, w2 := randoms(rng, cols, 1), randoms(rng, cols, 1)
			var got [2][][]float32
			var names [2][][]string
			for k, b := range []*Backend{bLean, bFull} {
				u1, err := b.Upload(m1)
				if err != nil {
					t.Fatal(err)
				}
				u2, err := b.Upload(m2)
				if err != nil {
					t.Fatal(err)
				}
				h, out := floats(b, x), floats(b, nans(rows*cols))
				y1, y2 := floats(b, nans(rows*outs)), floats(b, nans(rows*outs))
				zb, db := floats(b, z), floats(b, d)
				norm := func(w []float32) backend.Op {
					if gated {
						return &backend.GatedRMSNorm{X: h, Z: zb, Weight: floats(b, w[:dim]), Out: out, Rows: rows, Heads: heads, Dim: dim, Eps: 1e-6}
					}
					return &backend.AddRMSNorm{H: h, Delta: db, Weight: floats(b, w), Out: out, Rows: rows, Dim: cols, Eps: 1e-6}
				}
				ops := []backend.Op{norm(w1), &backend.QLinear{X: out, W: u1, Y: y1, Rows: rows},
					norm(w2), &backend.QLinear{X: out, W: u2, Y: y2, Rows: rows}}
				p, err := b.Compile(ops)
				if err != nil {
					t.Fatal(err)
				}
				names[k] = p.(*program).kernelNames()
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				got[k] = [][]float32{read(t, b, y1), read(t, b, y2), read(t, b, h), read(t, b, out)}
			}
			suffix := func(ns []string, s string) bool {
				return slices.ContainsFunc(ns, func(n string) bool { return strings.HasSuffix(n, s) })
			}
			if !suffix(names[0][0], "_bfo") || !suffix(names[0][2], "_bf") || suffix(names[1][0], "_bfo") || suffix(names[1][2], "_bfo") {
				t.Fatalf("kernels %v under normf32=lean, %v under full", names[0], names[1])
			}
			for j, what := range []string{"the first GEMM's output", "the second GEMM's output", "h", "the last norm's output"} {
				sameBits(t, what, got[0][j], got[1][j])
			}
		})
	}
}

// TestNormCombKernelMatchesLauncher: norm_comb.cu has the entry point the
// launcher names, calls no function, and takes rows of normCombMaxDim
// values (NC_THREADS·NC_REG) and MoETopK slots.
func TestNormCombKernelMatchesLauncher(t *testing.T) {
	ptx, err := kernels.PTX("norm_comb")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ptx, []byte(".visible .entry "+normCombKernel+"(")) || bytes.Contains(ptx, []byte("call.uni")) {
		t.Errorf("norm_comb.ptx: no entry point %s, or a call", normCombKernel)
	}
	src, err := os.ReadFile("kernels/norm_comb.cu")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) int {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("norm_comb.cu does not define %s", name)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if got := def("NC_THREADS") * def("NC_REG"); got != normCombMaxDim {
		t.Errorf("norm_comb.cu takes rows of %d values, the launcher %d", got, normCombMaxDim)
	}
	if got := def("NC_TOPK"); got != MoETopK {
		t.Errorf("norm_comb.cu sums %d slots, the MoE has %d", got, MoETopK)
	}
}

// TestCombineNormMatchesApart: under combinenorm=on an MoE block whose
// output only the next layer's input norm reads (the program writes over
// it after) leaves its combine to that norm (add_rmsnorm_comb_bf, no
// moe_combine_bf): h, the norm's GEMM's output and the last op's output
// are bit for bit combinenorm=off's, outputs poisoned first; where the norm
// after it is not followed by a GEMM (so not normbf's form; a second norm
// writes over the MoE's output), the combine runs on its own before it,
// the same bits again.
func TestCombineNormMatchesApart(t *testing.T) {
	on, off := DefaultOptions(), DefaultOptions()
	on.CombineNorm = true
	bOn, bOff := testBackend(t, on), testBackend(t, off)
	type shape struct{ E, H, I, rows int }
	for _, sh := range []shape{{256, 2048, 512, 300}, {16, 256, 128, 37}} {
		for _, withGEMM := range []bool{true, false} {
			t.Run(fmt.Sprintf("E=%d H=%d I=%d rows=%d gemm=%v", sh.E, sh.H, sh.I, sh.rows, withGEMM), func(t *testing.T) {
				rng := freshRNG(t)
				ms := randomMoEMatrices(rng, sh.E, sh.H, sh.I, 8)
				m2 := quant.RandomMatrix(rng, 1, sh.H, sh.H, 4, 64)
				h, delta, w := randoms(rng, sh.rows*sh.H, 2), randoms(rng, sh.rows*sh.H, 1), randoms(rng, sh.H, 1)
				h2, w2 := randoms(rng, sh.rows*sh.H, 2), randoms(rng, sh.H, 1)
				var got [2][][]float32
				var names [2][][]string
				for k, b := range []*Backend{bOn, bOff} {
					n, r, e := newMoEBlockRows(t, b, ms, sh.I, sh.rows, h, delta, w)
					u2, err := b.Upload(m2)
					if err != nil {
						t.Fatal(err)
					}
					hb2, o2, y2 := floats(b, h2), floats(b, nans(sh.rows*sh.H)), floats(b, nans(sh.rows*sh.H))
					n2 := &backend.AddRMSNorm{H: hb2, Delta: e.Out, Weight: floats(b, w2), Out: o2, Rows: sh.rows, Dim: sh.H, Eps: 1e-6}
					// then the MoE's output written over: only n2 read it
					ops := []backend.Op{n, r, e, n2, &backend.QLinear{X: o2, W: u2, Y: y2, Rows: sh.rows},
						&backend.QLinear{X: o2, W: u2, Y: e.Out, Rows: sh.rows}}
					if !withGEMM {
						ops = []backend.Op{n, r, e, n2, &backend.AddRMSNorm{H: floats(b, h2), Weight: floats(b, w2), Out: e.Out, Rows: sh.rows, Dim: sh.H, Eps: 1e-6}}
					}
					p, err := b.Compile(ops)
					if err != nil {
						t.Fatal(err)
					}
					names[k] = p.(*program).kernelNames()
					runWith(t, b, p, 2, map[backend.Buffer][]float32{n.H: h, hb2: h2, e.Out: nans(sh.rows * sh.H)})
					got[k] = [][]float32{read(t, b, hb2), read(t, b, o2), read(t, b, y2), read(t, b, e.Out)}
				}
				has := func(ns [][]string, name string) bool {
					return slices.ContainsFunc(ns, func(s []string) bool { return slices.Contains(s, name) })
				}
				fused := withGEMM // normbf's form of the norm takes it; the plain add_rmsnorm does not (the combine runs first)
				if has(names[0], normCombKernel) != fused || has(names[0], "moe_combine_bf") == fused || !has(names[1], "moe_combine_bf") {
					t.Fatalf("kernels %v under combinenorm=on, %v off", names[0], names[1])
				}
				for j, what := range []string{"h", "the norm's output", "the norm's GEMM's output", "the last op's output"} {
					if j == 2 && !withGEMM {
						continue
					}
					sameBits(t, what, got[0][j], got[1][j])
				}
			})
		}
	}
}

// TestConvGEMMMatchesApart: under convgemm=on a prompt chunk's input norm,
// in_proj group and conv (the Gated DeltaNet's, width 4) give the conv's
// output, the advanced conv state, the group's other outputs and h bit for
// bit as apart, over two runs (the second from the state the first left),
// with the conv in gemm_group_conv_w256rp's epilogue and conv_fix where the
// in_proj takes the 256-row tile (1,300 rows: a short last tile; 4,096),
// and the kernels apart where it does not (700 rows); every output
// poisoned first.
func TestConvGEMMMatchesApart(t *testing.T) {
	on, off := DefaultOptions(), DefaultOptions()
	on.ConvGEMM = true
	bOn, bOff := testBackend(t, on), testBackend(t, off)
	const cols, C, Z, Hv = 512, 2048, 1024, 32
	for _, rows := range []int{1300, 4096, 700} {
		t.Run(fmt.Sprintf("%d rows", rows), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(23, uint64(rows)))
			mats := []quant.Matrix{quant.RandomMatrix(rng, 1, C, cols, 4, 64), quant.RandomMatrix(rng, 1, Z, cols, 4, 64),
				quant.RandomMatrix(rng, 1, Hv, cols, 4, 64), quant.RandomMatrix(rng, 1, Hv, cols, 4, 64)}
			x, d, w := randoms(rng, rows*cols, 1), randoms(rng, rows*cols, 1), randoms(rng, cols, 1)
			cw, st := randoms(rng, C*4, 1), randoms(rng, 3*C, 1)
			var got [2][][]float32
			var fusedAt [2]bool
			for k, b := range []*Backend{bOn, bOff} {
				ws := uploadAll(t, b, mats)
				h, out := floats(b, x), floats(b, nans(rows*cols))
				proj := floats(b, nans(rows*(C+Z+2*Hv)))
				conv, state := floats(b, nans(rows*C)), floats(b, st)
				ops := []backend.Op{
					&backend.AddRMSNorm{H: h, Delta: floats(b, d), Weight: floats(b, w), Out: out, Rows: rows, Dim: cols, Eps: 1e-6},
					&backend.QLinearGroup{X: out, W: ws, Y: proj, Rows: rows},
					&backend.ConvSiLU{X: proj.View(0, rows*C), State: state, Weight: floats(b, cw), Out: conv, Rows: rows, Chans: C, K: 4},
				}
				p, err := b.Compile(ops)
				if err != nil {
					t.Fatal(err)
				}
				names := p.(*program).kernelNames()
				fusedAt[k] = slices.Contains(names[1], convGemmKernel) && slices.Equal(names[2], []string{convFixKernel})
				for range 2 {
					if err := p.Run(); err != nil {
						t.Fatal(err)
					}
					others := read(t, b, proj)[rows*C:]
					got[k] = append(got[k], read(t, b, conv), read(t, b, state), others, read(t, b, h))
				}
				t.Logf("convgemm=%v: kernels %v", k == 0, names)
			}
			if want := rows != 700; fusedAt[0] != want || fusedAt[1] {
				t.Fatalf("the conv in the GEMM: %v under convgemm=on (want %v), %v off", fusedAt[0], want, fusedAt[1])
			}
			for j := range got[1] {
				what := []string{"the conv's output", "the conv state", "z, b and a", "h"}[j%4]
				for i := range got[1][j] {
					if math.Float32bits(got[0][j][i]) != math.Float32bits(got[1][j][i]) {
						t.Fatalf("run %d, %s element %d: %v with convgemm=on, %v apart", j/4+1, what, i, got[0][j][i], got[1][j][i])
					}
				}
			}
		})
	}
}

// TestSharedSideMatchesApart: under sharedside=on a prompt chunk's shared
// expert runs on the side stream (one side[...] step) and both MoE blocks
// of a program (the second's norm adding the first's output, so reading
// what the first's join guards) give sharedside=off's bits, h and each
// block's output, over two runs, with graphs on and off, with the MoE's
// input norm fused with it (normbf=moe: the fork before the router) and
// not (the fork with the norm, before the router, or with the experts),
// outputs poisoned first.
func TestSharedSideMatchesApart(t *testing.T) {
	type shape struct{ E, H, I, rows int }
	for _, form := range []struct{ graphs, normMoE bool }{{true, true}, {false, true}, {true, false}} {
		on, off := DefaultOptions(), DefaultOptions()
		on.Graphs, off.Graphs, on.NormBF16MoE, off.NormBF16MoE = form.graphs, form.graphs, form.normMoE, form.normMoE
		on.SharedSide = true
		bOn, bOff := testBackend(t, on), testBackend(t, off)
		for _, sh := range []shape{{256, 2048, 512, 300}, {16, 256, 128, 37}} {
			t.Run(fmt.Sprintf("E=%d H=%d I=%d rows=%d graphs=%v normbf=moe %v", sh.E, sh.H, sh.I, sh.rows, form.graphs, form.normMoE), func(t *testing.T) {
				rng := freshRNG(t)
				ms := randomMoEMatrices(rng, sh.E, sh.H, sh.I, 8)
				h, delta, w, w2 := randoms(rng, sh.rows*sh.H, 2), randoms(rng, sh.rows*sh.H, 1), randoms(rng, sh.H, 1), randoms(rng, sh.H, 1)
				var got [2][][]float32
				var names [2][][]string
				for k, b := range []*Backend{bOn, bOff} {
					n, r, e := newMoEBlockRows(t, b, ms, sh.I, sh.rows, h, delta, w)
					n2, r2, e2 := newMoEBlockRows(t, b, ms, sh.I, sh.rows, h, nil, w2)
					n2.H, n2.Delta = n.H, e.Out
					p, err := b.Compile([]backend.Op{n, r, e, n2, r2, e2})
					if err != nil {
						t.Fatal(err)
					}
					names[k] = p.(*program).kernelNames()
					runWith(t, b, p, 2, map[backend.Buffer][]float32{n.H: h, e.Out: nans(sh.rows * sh.H), e2.Out: nans(sh.rows * sh.H)})
					got[k] = [][]float32{read(t, b, n.H), read(t, b, e.Out), read(t, b, e2.Out)}
				}
				sides := func(ns [][]string) (c int) {
					for _, op := range ns {
						for _, name := range op {
							if strings.HasPrefix(name, "side[") {
								c++
							}
						}
					}
					return c
				}
				if sides(names[0]) != 2 || sides(names[1]) != 0 {
					t.Fatalf("kernels %v under sharedside=on, %v off: want a side step a block, and none", names[0], names[1])
				}
				// fused with its norm the fork comes before the router (listed with the norm), else with the experts
				at := []int{2, 5}
				if form.normMoE {
					at = []int{0, 3}
				}
				for _, i := range at {
					if sides(names[0][i:i+1]) != 1 {
						t.Fatalf("kernels %v under sharedside=on: no side step in op %d's", names[0], i)
					}
				}
				for j, what := range []string{"h", "the first block's output", "the second block's output"} {
					sameBits(t, what, got[0][j], got[1][j])
				}
			})
		}
	}
}
