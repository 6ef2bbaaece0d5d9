package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

type routeShape struct {
	name                   string
	experts, cols, bits, k int
	normalize, pairedTies  bool
}

var routeShapes = []routeShape{
	{"35B 256x2048 8-bit", 256, 2048, 8, 8, true, false},
	{"35B 256x2048 4-bit", 256, 2048, 4, 8, true, false},
	{"35B 8-bit, rows in equal pairs", 256, 2048, 8, 8, true, true},
	{"odd 77x192 8-bit top-5 unnormalised", 77, 192, 8, 5, false, false},
	{"odd 9x2112 4-bit", 9, 2112, 4, 8, true, false},
	{"odd 600x320 4-bit, equal pairs", 600, 320, 4, 8, false, true},
}

// TestRouteMatchesReference runs the router kernel against the float64
// reference of spec 2.8 (backendtest.Route): the logits, the ids in order
// (an exact tie, made by rows in equal pairs, must go to the lower id) and
// the weights; outputs poisoned, guards checked, run twice to check that
// the block counter is left as found.
func TestRouteMatchesReference(t *testing.T) {
	c, s, up, k, counter := routeRig(t)
	rng := freshRNG(t)
	for _, sh := range routeShapes {
		m := routeMatrix(rng, sh)
		qm, err := UploadQMatrix(c, up, &m, sh.name)
		if err != nil {
			t.Fatal(err)
		}
		x := randomVector(rng, sh.cols)
		dense := backendtest.Dequantize(&m)
		wantLogits := backendtest.Linear(dense, sh.experts, sh.cols, x, 1)
		wantIDs, wantW := backendtest.Route(dense, sh.experts, sh.cols, x, 1, sh.k, sh.normalize)
		xb := upBuf(t, c, s, x, "x")
		logits := newBuf(t, c, s, sh.experts, "logits")
		ids, wts := newBuf(t, c, s, sh.k, "ids"), newBuf(t, c, s, sh.k, "weights")
		for run := range 2 {
			logits.Poison(t, s)
			ids.Poison(t, s)
			wts.Poison(t, s)
			b := RouteBuffers{X: xb.P, Logits: logits.P, Counter: counter.P, IDs: ids.P, Weights: wts.P}
			if err := k.Launch(s, qm, b, sh.k, sh.normalize); err != nil {
				t.Fatal(err)
			}
			gotL := logits.Floats(t, s, "logits")
			gotIDs := ids.Ints(t, s, "ids")
			gotW := wts.Floats(t, s, "weights")
			if cnt := counter.Words(t, s, "counter"); cnt[0] != 0 {
				t.Fatalf("%s: block counter left at %d", sh.name, cnt[0])
			}
			lerr := maxRelErr(gotL, wantLogits)
			var werr float64
			for i := range gotW {
				werr = max(werr, math.Abs(float64(gotW[i])-wantW[i]))
			}
			if run == 0 {
				t.Logf("%-40s logits max error %.2g of max|logit|; weights max error %.2g; ids %v", sh.name, lerr, werr, gotIDs)
			}
			if !(lerr <= 1e-5) {
				t.Errorf("%s: logits off by %.2g of max|logit|", sh.name, lerr)
			}
			for i := range gotIDs {
				if gotIDs[i] == wantIDs[i] {
					continue
				}
				// Only a near-tie in float64 may be ordered differently.
				g, w := wantLogits[gotIDs[i]], wantLogits[wantIDs[i]]
				if sh.pairedTies || math.Abs(g-w) > 1e-5*math.Abs(w) {
					t.Errorf("%s: slot %d routed to expert %d (logit %v), want %d (logit %v)", sh.name, i, gotIDs[i], g, wantIDs[i], w)
				}
			}
			if !(werr <= 1e-5) {
				t.Errorf("%s: weights off by %.2g: got %v, want %v", sh.name, werr, gotW, wantW)
			}
		}
		qm.Free()
	}
}

// TestRouteNaNKeepsIDsInRange: an x holding NaN makes some or all logits
// NaN; the router still names topk distinct experts in range (the MoE
// kernels index weights by them), numbers before NaNs, the lower id first
// among NaNs.
func TestRouteNaNKeepsIDsInRange(t *testing.T) {
	c, s, up, k, counter := routeRig(t)
	rng := freshRNG(t)
	const E, C, K = 256, 2048, 8
	m := quant.RandomMatrix(rng, 1, E, C, 8, 64)
	qm, err := UploadQMatrix(c, up, &m, "router")
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Free()
	x := randomVector(rng, C)
	x[5] = float32(math.NaN())
	xb := upBuf(t, c, s, x, "x")
	logits := newBuf(t, c, s, E, "logits")
	ids, wts := newBuf(t, c, s, K, "ids"), newBuf(t, c, s, K, "weights")
	ids.Poison(t, s)
	b := RouteBuffers{X: xb.P, Logits: logits.P, Counter: counter.P, IDs: ids.P, Weights: wts.P}
	if err := k.Launch(s, qm, b, K, true); err != nil {
		t.Fatal(err)
	}
	got := ids.Ints(t, s, "ids")
	for i, id := range got {
		if id != int32(i) {
			t.Errorf("every logit NaN: ids %v, want 0..%d (the lower id first)", got, K-1)
			break
		}
	}
}

// routeMatrix is a random router of shape sh, its rows in equal pairs
// where sh says (exact ties).
func routeMatrix(rng *rand.Rand, sh routeShape) quant.Matrix {
	m := quant.RandomMatrix(rng, 1, sh.experts, sh.cols, sh.bits, 64)
	if sh.pairedTies {
		backendtest.PairRows(&m)
	}
	return m
}

// routeRig is what a router kernel test needs: the context, a stream, an
// uploader, the kernels and a zeroed block counter.
func routeRig(t *testing.T) (*driver.Context, *driver.Stream, *driver.Uploader, *Route, devBuf) {
	t.Helper()
	c := gpu(t)
	s := newTestStream(t, c)
	up, err := c.NewUploader(s, 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	k, err := NewRoute(loadModule(t, LoadRouteModule, c))
	if err != nil {
		t.Fatal(err)
	}
	counter := newBuf(t, c, s, 1, "counter")
	if err := s.Fill32(counter.P, 0, 1); err != nil {
		t.Fatal(err)
	}
	return c, s, up, k, counter
}
