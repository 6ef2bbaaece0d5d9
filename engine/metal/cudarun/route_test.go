//go:build linux

package cudarun

import (
	"fmt"
	"math"
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
			wpr, gpr := m.WordsPerRow(), m.GroupsPerRow()
			for r := 1; r < sh.experts; r += 2 {
				copy(m.Words[r*wpr:(r+1)*wpr], m.Words[(r-1)*wpr:r*wpr])
				copy(m.Scales[r*gpr:(r+1)*gpr], m.Scales[(r-1)*gpr:r*gpr])
				copy(m.Biases[r*gpr:(r+1)*gpr], m.Biases[(r-1)*gpr:r*gpr])
			}
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
