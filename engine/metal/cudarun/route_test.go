//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

// routeShapes are engine/cuda's router shapes.
var routeShapes = []struct {
	name                   string
	experts, cols, bits, k int
	normalize, pairedTies  bool
}{
	{"35B 256x2048 8-bit", 256, 2048, 8, 8, true, false},
	{"35B 256x2048 4-bit", 256, 2048, 4, 8, true, false},
	{"35B 8-bit, rows in equal pairs", 256, 2048, 8, 8, true, true},
	{"odd 77x192 8-bit top-5 unnormalised", 77, 192, 8, 5, false, false},
	{"odd 9x2112 4-bit", 9, 2112, 4, 8, true, false},
	{"odd 600x320 4-bit, equal pairs", 600, 320, 4, 8, false, true},
}

// TestRouteMatchesReference runs route_logits<bits> then route_select
// against the float64 reference of spec 2.8 (backendtest.Route): logits,
// ids in order (an exact tie, made by rows in equal pairs, goes to the
// lower id) and weights, each within engine/cuda's 1e-5; outputs poisoned,
// guards checked; the logits on one threadgroup too (the persistent loop).
// The weights' softmax is float32 here (Apple GPUs have no float64), where
// the CUDA kernel takes it in float64.
func TestRouteMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "route")
	rng := freshRNG(t)
	for _, sh := range routeShapes {
		m := quant.RandomMatrix(rng, 1, sh.experts, sh.cols, sh.bits, 64)
		if sh.pairedTies {
			backendtest.PairRows(&m)
		}
		q := uploadQ(t, c, s, &m, sh.name)
		x := randomVector(rng, sh.cols)
		dense := backendtest.Dequantize(&m)
		wantLogits := backendtest.Linear(dense, sh.experts, sh.cols, x, 1)
		wantIDs, wantW := backendtest.Route(dense, sh.experts, sh.cols, x, 1, sh.k, sh.normalize)
		xb := upBuf(t, c, s, x, "x")
		logits := newBuf(t, c, s, sh.experts, "logits")
		ids, wts := newBuf(t, c, s, sh.k, "ids"), newBuf(t, c, s, sh.k, "weights")
		norm := int32(0)
		if sh.normalize {
			norm = 1
		}
		p := kernels.RouteParams{Experts: int32(sh.experts), Cols: int32(sh.cols), Topk: int32(sh.k), Normalize: norm}
		entry := fmt.Sprintf("route_logits%d", sh.bits)
		for _, grid := range []int{ceilDiv(sh.experts, 8), 1} {
			logits.Poison(t, s)
			ids.Poison(t, s)
			wts.Poison(t, s)
			launch(t, s, mod, entry, grid, 256,
				withParams(new(driver.Args).Ptr(q.words.P).Ptr(q.scales.P).Ptr(q.biases.P).Ptr(xb.P).Ptr(logits.P), p))
			launch(t, s, mod, "route_select", 1, 256, withParams(new(driver.Args).Ptr(logits.P).Ptr(ids.P).Ptr(wts.P), p))
			gotL := logits.Floats(t, s, "logits")
			gotIDs := ids.Ints(t, s, "ids")
			gotW := wts.Floats(t, s, "weights")
			lerr := maxRelErr(gotL, wantLogits)
			var werr float64
			for i := range gotW {
				werr = max(werr, math.Abs(float64(gotW[i])-wantW[i]))
			}
			label := fmt.Sprintf("%-38s %s grid %d", sh.name, entry, grid)
			t.Logf("%s: logits max error %.2g of max|logit|; weights max error %.2g; ids %v", label, lerr, werr, gotIDs)
			if !(lerr <= 1e-5) {
				t.Errorf("%s: logits off by %.2g of max|logit| (tolerance 1e-5)", label, lerr)
			}
			for i := range gotIDs {
				if gotIDs[i] == wantIDs[i] {
					continue
				}
				// Only a near-tie in float64 may be ordered differently.
				g, w := wantLogits[gotIDs[i]], wantLogits[wantIDs[i]]
				if sh.pairedTies || math.Abs(g-w) > 1e-5*math.Abs(w) {
					t.Errorf("%s: slot %d routed to expert %d (logit %v), want %d (logit %v)", label, i, gotIDs[i], g, wantIDs[i], w)
				}
			}
			if !(werr <= 1e-5) {
				t.Errorf("%s: weights off by %.2g (tolerance 1e-5): got %v, want %v", label, werr, gotW, wantW)
			}
		}
	}
}

// TestRouteNormMatchesApart runs route_logits_norm<bits> then
// route_select_norm (the add-and-norm inside the router, h and x written
// back by the selection) against add_rmsnorm, route_logits<bits> and
// route_select, with and without a delta, on a full grid and on one
// threadgroup: logits, ids, weights, h and the normed row bit for bit,
// every output poisoned first; and against the float64 references (the
// normed row: AddRMSNorm; the logits and weights: Route of that row, within
// 1e-5).
func TestRouteNormMatchesApart(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod, ops := module(t, c, "route"), module(t, c, "ops")
	rng := freshRNG(t)
	const eps = 1e-6
	for _, sh := range routeShapes {
		m := quant.RandomMatrix(rng, 1, sh.experts, sh.cols, sh.bits, 64)
		q := uploadQ(t, c, s, &m, sh.name)
		dense := backendtest.Dequantize(&m)
		norm := int32(0)
		if sh.normalize {
			norm = 1
		}
		for _, withDelta := range []bool{false, true} {
			h, w := randScaled(rng, sh.cols, 2), randScaled(rng, sh.cols, 1)
			delta := make([]float32, sh.cols)
			var refDelta []float32
			hasDelta := int32(0)
			if withDelta {
				delta, hasDelta = randScaled(rng, sh.cols, 1), 1
				refDelta = delta
			}
			db, wb := upBuf(t, c, s, delta, "delta"), upBuf(t, c, s, w, "w")
			p := kernels.RouteParams{Experts: int32(sh.experts), Cols: int32(sh.cols), Topk: int32(sh.k), Normalize: norm}
			pn := kernels.RouteNormParams{Experts: p.Experts, Cols: p.Cols, Topk: p.Topk, Normalize: norm, HasDelta: hasDelta, Eps: eps}

			// apart: add_rmsnorm, route_logits, route_select
			hA, xA := upBuf(t, c, s, h, "h apart"), newBuf(t, c, s, sh.cols, "x apart")
			lA, idA, wA := newBuf(t, c, s, sh.experts, "logits"), newBuf(t, c, s, sh.k, "ids"), newBuf(t, c, s, sh.k, "weights")
			launch(t, s, ops, "add_rmsnorm", 1, 256, withParams(new(driver.Args).Ptr(hA.P).Ptr(db.P).Ptr(wb.P).Ptr(xA.P),
				kernels.NormParams{Dim: int32(sh.cols), HasDelta: hasDelta, Eps: eps}))
			launch(t, s, mod, fmt.Sprintf("route_logits%d", sh.bits), ceilDiv(sh.experts, 8), 256,
				withParams(new(driver.Args).Ptr(q.words.P).Ptr(q.scales.P).Ptr(q.biases.P).Ptr(xA.P).Ptr(lA.P), p))
			launch(t, s, mod, "route_select", 1, 256, withParams(new(driver.Args).Ptr(lA.P).Ptr(idA.P).Ptr(wA.P), p))

			entry := fmt.Sprintf("route_logits_norm%d", sh.bits)
			for _, grid := range []int{ceilDiv(sh.experts, 8), 1} {
				label := fmt.Sprintf("%-38s %s grid %d delta %v", sh.name, entry, grid, withDelta)
				hF, xF := upBuf(t, c, s, h, "h fused"), newBuf(t, c, s, sh.cols, "x fused")
				lF, idF, wF := newBuf(t, c, s, sh.experts, "logits"), newBuf(t, c, s, sh.k, "ids"), newBuf(t, c, s, sh.k, "weights")
				launch(t, s, mod, entry, grid, 256,
					withParams(new(driver.Args).Ptr(q.words.P).Ptr(q.scales.P).Ptr(q.biases.P).Ptr(hF.P).Ptr(db.P).Ptr(wb.P).Ptr(lF.P), pn))
				if !slices.Equal(hF.Words(t, s, "h"), bitsOf(h)) {
					t.Errorf("%s: the logits wrote h, which other threadgroups may not have read yet", label)
				}
				launch(t, s, mod, "route_select_norm", 1, 256,
					withParams(new(driver.Args).Ptr(lF.P).Ptr(idF.P).Ptr(wF.P).Ptr(hF.P).Ptr(db.P).Ptr(wb.P).Ptr(xF.P), pn))
				for _, b := range []struct {
					what      string
					got, want devBuf
				}{{"logits", lF, lA}, {"ids", idF, idA}, {"weights", wF, wA}, {"h", hF, hA}, {"x", xF, xA}} {
					if !slices.Equal(b.got.Words(t, s, b.what), b.want.Words(t, s, b.what)) {
						t.Errorf("%s: %s not bit for bit add_rmsnorm + route_logits + route_select's", label, b.what)
					}
				}
				hRef := slices.Clone(h)
				wantX := backendtest.AddRMSNorm(hRef, refDelta, w, 1, sh.cols, eps)
				xGot := xF.Floats(t, s, "x")
				checkBar(t, label+" x", xGot, wantX, bar("AddRMSNorm"))
				checkBar(t, label+" h", hF.Floats(t, s, "h"), widen64(hRef), 0)
				wantL := backendtest.Linear(dense, sh.experts, sh.cols, xGot, 1)
				_, wantW := backendtest.Route(dense, sh.experts, sh.cols, xGot, 1, sh.k, sh.normalize)
				if e := maxRelErr(lF.Floats(t, s, "logits"), wantL); !(e <= 1e-5) {
					t.Errorf("%s: logits off by %.2g of max|logit| (tolerance 1e-5)", label, e)
				}
				gotW := wF.Floats(t, s, "weights")
				for i := range gotW {
					if e := math.Abs(float64(gotW[i]) - wantW[i]); !(e <= 1e-5) {
						t.Errorf("%s: weight %d off by %.2g (tolerance 1e-5)", label, i, e)
					}
				}
			}
		}
	}
}

// TestRouteSelectNaN: NaN logits still give topk distinct experts in range
// (the MoE kernels index weights by them): the numbers first, by value,
// then the NaNs, the lower id first. Ranking the floats gave every NaN
// rank 0 and left slots unwritten.
func TestRouteSelectNaN(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "route")
	const E, K = 256, 8
	for _, numbers := range []int{0, 3, 200} { // logits that are numbers; the rest are NaN
		l := make([]float32, E)
		for e := range l {
			l[e] = float32(math.NaN())
		}
		for i := range numbers {
			l[E-1-i] = float32(i) * 0.5 // the largest at the lowest id of them
		}
		order := make([]int32, E)
		for e := range order {
			order[e] = int32(e)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			na, nb := math.IsNaN(float64(l[a])), math.IsNaN(float64(l[b]))
			switch {
			case na && nb:
				return int(a - b)
			case na:
				return 1
			case nb:
				return -1
			case l[a] > l[b]:
				return -1
			case l[a] < l[b]:
				return 1
			}
			return int(a - b)
		})
		logits := upBuf(t, c, s, l, "logits")
		ids, wts := newBuf(t, c, s, K, "ids"), newBuf(t, c, s, K, "weights")
		ids.Poison(t, s)
		p := kernels.RouteParams{Experts: E, Cols: 64, Topk: K, Normalize: 1}
		launch(t, s, mod, "route_select", 1, 256, withParams(new(driver.Args).Ptr(logits.P).Ptr(ids.P).Ptr(wts.P), p))
		if got, want := ids.Ints(t, s, "ids"), order[:K]; !slices.Equal(got, want) {
			t.Errorf("%d numbers among NaN logits: ids %v, want %v", numbers, got, want)
		}
	}
}
