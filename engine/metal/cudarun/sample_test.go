//go:build linux

package cudarun

import (
	"math"
	"slices"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/sample"
)

const sampleThreads = 1024 // SAMPLE_THREADS

// TestSampleRow runs sample.metal's sample_row over the conformance
// suite's cases (greedy, temperature, top-k, top-p, min-p, all of them,
// equal logits, penalties; non-finite rows) at vocabularies of 1 to
// 248320, 40 draws each (8 at 248320) with the counts carried, against
// backendtest.Sample: the id exactly, a near-tie (the reference's margin
// within 1e-5) excepted and at most two of those per case; the id in token
// and status, the non-finite flag, the draw counter and the counts.
func TestSampleRow(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "sample")
	rng := freshRNG(t)
	cases := backendtest.SampleCases([]int{1, 2, 7, 333, 4099, 248320}, func(n int) []float32 { return randScaled(rng, n, 6) })

	totalNear := 0
	for _, sc := range cases {
		V := len(sc.Logits)
		logits := upBuf(t, c, s, sc.Logits, "logits")
		params := upBuf(t, c, s, []float32{sc.S.Temperature, sc.S.TopP, sc.S.MinP, sc.S.Presence, sc.S.Frequency, sc.S.Repetition}, "params")
		config := upBuf(t, c, s, []int32{sc.S.TopK, int32(uint32(sc.S.Seed)), int32(uint32(sc.S.Seed >> 32)), 0}, "config")
		counts, inPrompt := upBuf(t, c, s, sc.Counts, "counts"), upBuf(t, c, s, sc.InPrompt, "in prompt")
		token, status := newBuf(t, c, s, 1, "token"), newBuf(t, c, s, 2, "status")
		x, w := newBuf(t, c, s, V, "x"), newBuf(t, c, s, V, "w")
		wantCounts := slices.Clone(sc.Counts)
		near, draws := 0, 40
		if V > 10000 {
			draws = 8 // the host reference sorts the vocabulary at every draw
		}
		for draw := range draws {
			token.Poison(t, s)
			status.Poison(t, s)
			a := new(driver.Args).Ptr(logits.P).Ptr(params.P).Ptr(config.P).Ptr(counts.P).Ptr(inPrompt.P).Ptr(token.P).Ptr(status.P).Ptr(x.P).Ptr(w.P)
			withParams(a, kernels.SampleParams{V: int32(V)})
			launch(t, s, mod, "sample_row", 1, sampleThreads, a)
			want := backendtest.Sample(sc.Logits, wantCounts, sc.InPrompt, sc.S, sample.Uniform(sc.S.Seed, uint64(draw)))
			got, st := token.Ints(t, s, "token")[0], status.Ints(t, s, "status")
			if st[0] != got {
				t.Fatalf("%s draw %d: status id %d, token %d", sc.Name, draw, st[0], got)
			}
			if wantFlag := map[bool]int32{true: 0, false: 1}[want.Finite]; st[1] != wantFlag {
				t.Errorf("%s: non-finite flag %d, want %d", sc.Name, st[1], wantFlag)
			}
			if got != want.ID {
				if want.Margin > 1e-5 {
					t.Fatalf("%s draw %d: chose %d, the reference %d (margin %.3g: not a near-tie)", sc.Name, draw, got, want.ID, want.Margin)
				}
				near++
				want.ID = got // follow the device from here
			}
			wantCounts[want.ID]++
			if cfg := config.Ints(t, s, "config"); cfg[backend.SampleDraw] != int32(draw+1) {
				t.Fatalf("%s: draw counter %d after %d draws", sc.Name, cfg[backend.SampleDraw], draw+1)
			}
		}
		if !slices.Equal(counts.Ints(t, s, "counts"), wantCounts) {
			t.Errorf("%s: counts after %d draws differ from the chosen ids'", sc.Name, draws)
		}
		if near > 2 {
			t.Errorf("%s: %d near-tie disagreements in %d draws", sc.Name, near, draws)
		}
		totalNear += near
	}
	t.Logf("sample_row: %d cases, 40 draws each (8 at V=248320), %d near-tie disagreements in all", len(cases), totalNear)
}

// TestLogprobsRow: the log-probability of a token and the topN most
// likely, against backendtest.LogprobsRef: ids exactly, values within
// 1e-5 of the larger of 1 and the value (the suite's Logprobs bar); an id
// outside the vocabulary gives NaN.
func TestLogprobsRow(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "sample")
	rng := freshRNG(t)
	tol := backendtest.Tolerances["Logprobs"][backend.F32]
	for _, V := range []int{1, 5, 4099, 248320} {
		row := randScaled(rng, V, 8)
		n := min(V, 20)
		for _, id := range []int32{int32(V / 2), int32(V)} {
			out, top := newBuf(t, c, s, 1+n, "out"), newBuf(t, c, s, n, "top")
			a := new(driver.Args).Ptr(upBuf(t, c, s, row, "logits").P).Ptr(upBuf(t, c, s, []int32{id}, "token").P).Ptr(out.P).Ptr(top.P)
			withParams(a, kernels.LogprobsParams{V: int32(V), TopN: int32(n)})
			launch(t, s, mod, "logprobs_row", 1, sampleThreads, a)
			raw := out.Words(t, s, "out")
			got := make([]float32, len(raw))
			for i, w := range raw {
				got[i] = math.Float32frombits(w)
			}
			gotIDs := top.Ints(t, s, "top")
			checkID := id
			if id >= int32(V) {
				if got[0] == got[0] {
					t.Errorf("logprobs V=%d: id %d outside the vocabulary gave %g, want NaN", V, id, got[0])
				}
				checkID = 0
			}
			lp, wantTop, tops := backendtest.LogprobsRef(row, checkID, n)
			worst := 0.0
			if id < int32(V) {
				worst = math.Abs(float64(got[0])-lp) / max(1, math.Abs(lp))
				if !(worst <= tol) {
					t.Errorf("logprobs V=%d: %g for the chosen token, want %g", V, got[0], lp)
				}
			}
			for j := range n {
				e := math.Abs(float64(got[1+j])-tops[j]) / max(1, math.Abs(tops[j]))
				worst = max(worst, e)
				if gotIDs[j] != wantTop[j] || !(e <= tol) {
					t.Fatalf("logprobs V=%d: alternative %d is %d (%g), want %d (%g)", V, j, gotIDs[j], got[1+j], wantTop[j], tops[j])
				}
			}
			t.Logf("logprobs_row V=%d id %d: error %.2g (bar %g)", V, id, worst, tol)
		}
	}
}
