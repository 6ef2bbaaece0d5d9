//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

const moeTopK = 8 // MOE_TOPK

// moeShapes are engine/cuda's: experts of inter rows by hidden columns.
var moeShapes = []struct {
	name                   string
	experts, hidden, inter int
}{
	{"35B 256x(2048,512)", 256, 2048, 512},
	{"small 16x(192,128)", 16, 192, 128},
	{"odd 9x(2112,576)", 9, 2112, 576},
}

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
// activations (the kernel's h, shared expert last), the shared expert
// gate's logit, and the block's output before the residual.
func moeReference(gate, up, down, sGate, sUp, sDown, sEG *quant.Matrix, H, I int, x []float32, ids []int32, wts []float32) (h []float64, logit float64, y []float64) {
	x64 := widen64(x)
	h = make([]float64, (moeTopK+1)*I)
	parallel := func(n int, f func(i int, row []float32)) {
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				row := make([]float32, max(H, I))
				for i := w; i < n; i += workers {
					f(i, row)
				}
			}()
		}
		wg.Wait()
	}
	parallel(len(h), func(t int, row []float32) {
		slot, r := t/I, t%I
		var g, u float64
		if slot < moeTopK {
			e := int(ids[slot])
			g, u = rowDot64(gate, e*I+r, x64, row[:H]), rowDot64(up, e*I+r, x64, row[:H])
		} else {
			g, u = rowDot64(sGate, r, x64, row[:H]), rowDot64(sUp, r, x64, row[:H])
		}
		h[t] = silu64(g) * u
	})
	logit = rowDot64(sEG, 0, x64, make([]float32, H))
	sigma := sigmoid64(logit)
	y = make([]float64, H)
	parallel(H, func(r int, row []float32) {
		var acc float64
		for slot := range moeTopK {
			e := int(ids[slot])
			acc += float64(wts[slot]) * rowDot64(down, e*H+r, h[slot*I:(slot+1)*I], row[:I])
		}
		y[r] = acc + sigma*rowDot64(sDown, r, h[moeTopK*I:], row[:I])
	})
	return h, logit, y
}

// randomRouting picks moeTopK distinct experts and weights summing to 1.
func randomRouting(rng *rand.Rand, experts int) ([]int32, []float32) {
	ids := make([]int32, moeTopK)
	for i, e := range rng.Perm(experts)[:moeTopK] {
		ids[i] = int32(e)
	}
	p := make([]float64, moeTopK)
	var sum float64
	for i := range p {
		p[i] = math.Exp(rng.NormFloat64())
		sum += p[i]
	}
	wts := make([]float32, moeTopK)
	for i := range p {
		wts[i] = float32(p[i] / sum)
	}
	return ids, wts
}

// TestMoEMatchesReference runs moe_gate_up_f32[_sb] then moe_down_f32[_sb]
// on each shape and team size against the float64 reference of spec 2.8,
// fresh random weights, input, residual (of the block's own size, so the
// output's rounding does not hide the block's error) and routing; outputs
// poisoned, guards checked. Tolerances are engine/cuda's exact kind: 1e-5
// of max|moe| for the output, 1e-5 for the shared expert gate's logit
// (relative to 1+|logit|); h is checked to 1e-5 of max|h| too.
func TestMoEMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "moe")
	rng := freshRNG(t)
	maxGrid := 2 * c.Device().SMs
	for _, sh := range moeShapes {
		E, H, I := sh.experts, sh.hidden, sh.inter
		gate, up := quant.RandomMatrix(rng, E, I, H, 4, 64), quant.RandomMatrix(rng, E, I, H, 4, 64)
		down := quant.RandomMatrix(rng, E, H, I, 4, 64)
		sGate, sUp := quant.RandomMatrix(rng, 1, I, H, 4, 64), quant.RandomMatrix(rng, 1, I, H, 4, 64)
		sDown := quant.RandomMatrix(rng, 1, H, I, 4, 64)
		sEG := quant.RandomMatrix(rng, 1, 1, H, 8, 64)
		x := randomVector(rng, H)
		ids, wts := randomRouting(rng, E)
		wantH, wantLogit, wantY := moeReference(&gate, &up, &down, &sGate, &sUp, &sDown, &sEG, H, I, x, ids, wts)
		var rms float64
		for _, v := range wantY {
			rms += v * v
		}
		rms = math.Sqrt(rms / float64(len(wantY)))
		resid := randomVector(rng, H)
		want := make([]float64, H)
		for i := range resid {
			resid[i] *= float32(rms)
			want[i] = float64(resid[i]) + wantY[i]
		}
		gq, uq, dq := uploadQ(t, c, s, &gate, "gate"), uploadQ(t, c, s, &up, "up"), uploadQ(t, c, s, &down, "down")
		sgq, suq, sdq := uploadQ(t, c, s, &sGate, "shared gate"), uploadQ(t, c, s, &sUp, "shared up"), uploadQ(t, c, s, &sDown, "shared down")
		eq := uploadQ(t, c, s, &sEG, "shared expert gate")
		xb, rb := upBuf(t, c, s, x, "x"), upBuf(t, c, s, resid, "resid")
		idb, wb := upBuf(t, c, s, ids, "ids"), upBuf(t, c, s, wts, "weights")
		hb, lb, ob := newBuf(t, c, s, (moeTopK+1)*I, "h"), newBuf(t, c, s, 1, "logit"), newBuf(t, c, s, H, "out")
		for _, sb := range []bool{false, true} {
			suffix := ""
			if sb {
				suffix = "_sb"
			}
			// scales as bound: the interleaved words for _sb, biases then unused.
			sc := func(q qmat) driver.Ptr {
				if sb {
					return q.sb.P
				}
				return q.scales.P
			}
			for _, tUp := range teams(H / 64) {
				tDown := min(tUp, maxTeam(I/64))
				hb.Poison(t, s)
				lb.Poison(t, s)
				ob.Poison(t, s)
				upArgs := new(driver.Args)
				for _, q := range []qmat{gq, uq, sgq, suq} {
					upArgs.Ptr(q.words.P).Ptr(sc(q)).Ptr(q.biases.P)
				}
				upArgs.Ptr(eq.words.P).Ptr(eq.scales.P).Ptr(eq.biases.P).Ptr(idb.P).Ptr(xb.P).Ptr(hb.P).Ptr(lb.P)
				withParams(upArgs, kernels.MoeUpParams{I: int32(I), H: int32(H), Team: int32(tUp)})
				upGrid := min(maxGrid, ceilDiv((moeTopK+1)*I+1, 8*(32/tUp)))
				launch(t, s, mod, "moe_gate_up_f32"+suffix, upGrid, 8*32, upArgs)
				downArgs := new(driver.Args)
				for _, q := range []qmat{dq, sdq} {
					downArgs.Ptr(q.words.P).Ptr(sc(q)).Ptr(q.biases.P)
				}
				downArgs.Ptr(idb.P).Ptr(wb.P).Ptr(lb.P).Ptr(hb.P).Ptr(rb.P).Ptr(ob.P)
				withParams(downArgs, kernels.MoeDownParams{H: int32(H), I: int32(I), Team: int32(tDown)})
				downGrid := min(maxGrid, ceilDiv(H, 4*(32/tDown)))
				launch(t, s, mod, "moe_down_f32"+suffix, downGrid, 4*32, downArgs)
				gotH := hb.Floats(t, s, "h")
				gotLogit := lb.Floats(t, s, "logit")
				got := ob.Floats(t, s, "out")
				var worst, maxY float64
				for i := range got {
					worst = max(worst, math.Abs(float64(got[i])-want[i]))
					maxY = max(maxY, math.Abs(wantY[i]))
				}
				rel := worst / maxY
				eh := maxRelErr(gotH, wantH)
				el := math.Abs(float64(gotLogit[0])-wantLogit) / (1 + math.Abs(wantLogit))
				label := fmt.Sprintf("%-20s f32%-3s teams %2d/%2d grids %3d/%3d", sh.name, suffix, tUp, tDown, upGrid, downGrid)
				t.Logf("%s out: max error %.2g of max|moe|; h max error %.2g of max|h|; logit error %.2g", label, rel, eh, el)
				if !(rel <= 1e-5) {
					t.Errorf("%s: output off by %.2g of max|moe| (tolerance 1e-5)", label, rel)
				}
				if !(eh <= 1e-5) {
					t.Errorf("%s: h off by %.2g of max|h| (tolerance 1e-5)", label, eh)
				}
				if !(el <= 1e-5) {
					t.Errorf("%s: shared expert gate logit %v, want %v", label, gotLogit[0], wantLogit)
				}
			}
		}
	}
}
