//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/sample"
)

const (
	sampleThreads     = 1024 // SAMPLE_THREADS
	sampleParts       = 128  // SAMPLE_PARTS: sample_prep's threadgroups
	samplePrepThreads = 256  // SAMPLE_PREP_THREADS
	sampleFastK       = 64   // SAMPLE_FAST_K: the largest top-k of the fast path
	// sampleFastV is the largest vocabulary of the fast path:
	// SAMPLE_PARTS * SAMPLE_SLICE, each threadgroup sorting 8 tokens a
	// thread
	sampleFastV = sampleParts * samplePrepThreads * 8
)

// sampleDev is a Sample op's buffers on the device with sample_row's
// scratch: x and w (V floats), part (a key and a flag a sample_prep
// threadgroup) and cand (SAMPLE_FAST_K keys a threadgroup).
type sampleDev struct {
	V                                        int
	logits, params, config, counts, inPrompt devBuf
	token, status, x, w, part, cand          devBuf
}

func newSampleDev(t *testing.T, c *driver.Context, s *driver.Stream, sc backendtest.SampleCase) *sampleDev {
	t.Helper()
	V := len(sc.Logits)
	return &sampleDev{V: V,
		logits:   upBuf(t, c, s, sc.Logits, "logits"),
		params:   upBuf(t, c, s, []float32{sc.S.Temperature, sc.S.TopP, sc.S.MinP, sc.S.Presence, sc.S.Frequency, sc.S.Repetition}, "params"),
		config:   upBuf(t, c, s, sampleConfig(sc.S, 0), "config"),
		counts:   upBuf(t, c, s, sc.Counts, "counts"),
		inPrompt: upBuf(t, c, s, sc.InPrompt, "in prompt"),
		token:    newBuf(t, c, s, 1, "token"), status: newBuf(t, c, s, 2, "status"),
		x: newBuf(t, c, s, V, "x"), w: newBuf(t, c, s, V, "w"),
		part: newBuf(t, c, s, 2*2*sampleParts, "part"), cand: newBuf(t, c, s, 2*sampleParts*sampleFastK, "cand"),
	}
}

// sampleConfig is the op's configuration before the given draw.
func sampleConfig(st sample.Settings, draw int) []int32 {
	return []int32{st.TopK, int32(uint32(st.Seed)), int32(uint32(st.Seed >> 32)), int32(draw)}
}

// run poisons the outputs and the scratch, then runs sample_prep and
// sample_row as the backend does, fastOn as sampler=topk sets it.
func (d *sampleDev) run(t *testing.T, s *driver.Stream, mod *driver.Module, fastOn int32) {
	t.Helper()
	for _, b := range []devBuf{d.token, d.status, d.x, d.w, d.part, d.cand} {
		b.Poison(t, s)
	}
	p := kernels.SampleParams{V: int32(d.V), FastOn: fastOn}
	a := new(driver.Args).Ptr(d.logits.P).Ptr(d.params.P).Ptr(d.config.P).Ptr(d.counts.P).Ptr(d.inPrompt.P).
		Ptr(d.x.P).Ptr(d.part.P).Ptr(d.cand.P)
	launch(t, s, mod, "sample_prep", sampleParts, samplePrepThreads, withParams(a, p))
	a = new(driver.Args).Ptr(d.params.P).Ptr(d.config.P).Ptr(d.counts.P).Ptr(d.token.P).Ptr(d.status.P).
		Ptr(d.x.P).Ptr(d.w.P).Ptr(d.part.P).Ptr(d.cand.P)
	launch(t, s, mod, "sample_row", 1, sampleThreads, withParams(a, p))
}

// set writes v into b (of len(v) elements).
func set[T any](t *testing.T, s *driver.Stream, b devBuf, v []T) {
	t.Helper()
	if err := s.CopyToDevice(b.P, bytesOf(v)); err != nil {
		t.Fatal(err)
	}
}

// keys reads b as 64-bit keys, failing on a written guard.
func keys(t *testing.T, s *driver.Stream, b devBuf, what string) []uint64 {
	t.Helper()
	w := b.Words(t, s, what)
	k := make([]uint64, len(w)/2)
	for i := range k {
		k[i] = uint64(w[2*i]) | uint64(w[2*i+1])<<32
	}
	return k
}

// rankKey is sample.metal's rank_key: the order key of v (NaN lowest, -0
// as +0), then the lower id.
func rankKey(v float32, id int) uint64 {
	var ord uint32
	if v == v {
		b := math.Float32bits(v + 0)
		ord = b ^ (uint32(int32(b)>>31) | 1<<31)
	}
	return uint64(ord)<<32 | uint64(0xffffffff-uint32(id))
}

// poisoned64 is a 64-bit scratch slot that nothing wrote.
const poisoned64 = uint64(nanBits)<<32 | nanBits

// TestSampleRow runs sample.metal's sample_prep and sample_row over the
// conformance suite's cases (greedy, temperature, top-k, top-p, min-p, all
// of them, equal logits, penalties; non-finite rows) at vocabularies of 1
// to 248320, 40 draws each (8 at 248320) with the counts carried, under
// sampler=row and sampler=topk (the suite's top-k of 1, 5, 20, 40 and 64
// on the fast path), against backendtest.Sample: the id exactly, a
// near-tie (the reference's margin within 1e-5) excepted and at most two
// of those per case; the id in token and status, the non-finite flag, the
// draw counter and the counts.
func TestSampleRow(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "sample")
	rng := freshRNG(t)
	cases := backendtest.SampleCases([]int{1, 2, 7, 333, 4099, 248320}, func(n int) []float32 { return randScaled(rng, n, 6) })
	for _, fastOn := range []int32{0, 1} {
		t.Run(map[int32]string{0: "sampler=row", 1: "sampler=topk"}[fastOn], func(t *testing.T) {
			totalNear := 0
			for _, sc := range cases {
				d := newSampleDev(t, c, s, sc)
				wantCounts := slices.Clone(sc.Counts)
				near, draws := 0, 40
				if d.V > 10000 {
					draws = 8 // the host reference sorts the vocabulary at every draw
				}
				for draw := range draws {
					d.run(t, s, mod, fastOn)
					want := backendtest.Sample(sc.Logits, wantCounts, sc.InPrompt, sc.S, sample.Uniform(sc.S.Seed, uint64(draw)))
					got, st := d.token.Ints(t, s, "token")[0], d.status.Ints(t, s, "status")
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
					if cfg := d.config.Ints(t, s, "config"); cfg[backend.SampleDraw] != int32(draw+1) {
						t.Fatalf("%s: draw counter %d after %d draws", sc.Name, cfg[backend.SampleDraw], draw+1)
					}
				}
				if !slices.Equal(d.counts.Ints(t, s, "counts"), wantCounts) {
					t.Errorf("%s: counts after %d draws differ from the chosen ids'", sc.Name, draws)
				}
				if near > 2 {
					t.Errorf("%s: %d near-tie disagreements in %d draws", sc.Name, near, draws)
				}
				totalNear += near
			}
			t.Logf("sample_row: %d cases, 40 draws each (8 at V=248320), %d near-tie disagreements in all", len(cases), totalNear)
		})
	}
}

// TestSampleTopKFast: the top-k fast path over fresh random rows (some of
// them in steps of 0.25, so that equal logits meet at the boundary of the
// k best, within a threadgroup's part and across parts), at vocabularies
// from 65 to the largest it takes, with top-k 1, 2, 20, 63 and 64, with
// and without top-p, min-p and penalties: sample_prep leaves in each
// threadgroup's slots of cand the k best rank keys of the tokens it
// penalised (the keys of the x it wrote; zeros past its tokens; the
// slots past k untouched) and its best key and finite flag in part; the
// choice, the counts and the draw counter are sampler=row's on the same
// inputs and the reference's (near-ties excepted, at most two a case); a
// top-k over 64 or a vocabulary past the largest takes the row path, and
// sampler=row never writes cand. Outputs and scratch are poisoned before
// every run.
func TestSampleTopKFast(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "sample")
	rng := freshRNG(t)
	settings := []struct {
		name      string
		s         sample.Settings
		penalties bool
	}{
		{"temperature", sample.Settings{Temperature: 0.8}, false},
		{"top-p 0.95", sample.Settings{Temperature: 0.6, TopP: 0.95}, false},
		{"min-p 0.05", sample.Settings{Temperature: 1, MinP: 0.05}, false},
		{"top-p 0.9 min-p 0.02", sample.Settings{Temperature: 0.7, TopP: 0.9, MinP: 0.02}, false},
		{"penalties top-p 0.8", sample.Settings{Temperature: 0.9, TopP: 0.8, Repetition: 1.3, Presence: 0.5, Frequency: 0.25}, true},
	}
	type shape struct{ V, K int }
	var shapes []shape
	for _, V := range []int{65, 333, 4099, 248320, sampleFastV} {
		for _, K := range []int{1, 2, 20, 63, 64} {
			shapes = append(shapes, shape{V, K})
		}
	}
	fallback := []shape{{4099, 65}, {sampleFastV + 1, 20}, {64, 64}}
	totalNear, runs := 0, 0
	for _, sh := range append(shapes, fallback...) {
		fast := sh.K <= sampleFastK && sh.K < sh.V && sh.V <= sampleFastV
		for si, st := range settings {
			for _, steps := range []bool{false, true} {
				sc := sampleTopKCase(rng, sh.V, sh.K, st.s, st.penalties, steps)
				t.Run(sc.Name, func(t *testing.T) {
					near := sampleFastCase(t, c, s, mod, sc, fast)
					if near > 2 {
						t.Errorf("%d near-tie disagreements", near)
					}
					totalNear += near
				})
				runs++
			}
			if !fast && si > 0 {
				break // one setting shows the fallback
			}
		}
	}
	t.Logf("top-k fast path: %d cases, %d near-tie disagreements in all", runs, totalNear)
}

// sampleTopKCase is a fresh row of V logits (scaled by 1, 3 or 6; in
// steps of 0.25 where steps) with top-k K and a fresh seed; with penalties,
// a third of the tokens generated and a fifth in the prompt.
func sampleTopKCase(rng *rand.Rand, V, K int, st sample.Settings, penalties, steps bool) backendtest.SampleCase {
	scale := []float32{1, 3, 6}[rng.IntN(3)]
	row := randScaled(rng, V, scale)
	if steps {
		for i, v := range row {
			row[i] = float32(math.Round(float64(v)*4)) / 4
		}
	}
	st.TopK, st.Seed = int32(K), rng.Uint64()
	sc := backendtest.SampleCase{Name: fmt.Sprintf("V=%d,top-k=%d,T=%g,top-p=%g,min-p=%g,penalties=%v,steps=%v,scale=%g",
		V, K, st.Temperature, st.TopP, st.MinP, penalties, steps, scale),
		Logits: row, Counts: make([]int32, V), InPrompt: make([]int32, V), S: st}
	if penalties {
		for i := range V {
			if rng.IntN(3) == 0 {
				sc.Counts[i] = int32(1 + rng.IntN(4))
			}
			if rng.IntN(5) == 0 {
				sc.InPrompt[i] = 1
			}
		}
	}
	return sc
}

// sampleFastCase runs one case of TestSampleTopKFast for a few draws (the
// counts carried) and returns its near-tie disagreements.
func sampleFastCase(t *testing.T, c *driver.Context, s *driver.Stream, mod *driver.Module, sc backendtest.SampleCase, fast bool) int {
	t.Helper()
	d := newSampleDev(t, c, s, sc)
	V, K := d.V, int(sc.S.TopK)
	counts := slices.Clone(sc.Counts)
	near := 0
	for draw := range 3 {
		// sampler=topk
		set(t, s, d.config, sampleConfig(sc.S, draw))
		set(t, s, d.counts, counts)
		d.run(t, s, mod, 1)
		got, st := d.token.Ints(t, s, "token")[0], d.status.Ints(t, s, "status")
		if st[0] != got || st[1] != 0 || got < 0 || int(got) >= V {
			t.Fatalf("%s draw %d: token %d, status %v", sc.Name, draw, got, st)
		}
		if cfg := d.config.Ints(t, s, "config"); cfg[backend.SampleDraw] != int32(draw+1) {
			t.Fatalf("%s draw %d: draw counter %d after the draw", sc.Name, draw, cfg[backend.SampleDraw])
		}
		wantCounts := slices.Clone(counts)
		wantCounts[got]++
		if !slices.Equal(d.counts.Ints(t, s, "counts"), wantCounts) {
			t.Fatalf("%s draw %d: the counts are not the chosen id's", sc.Name, draw)
		}
		x := d.x.Floats(t, s, "x")
		part, cand := keys(t, s, d.part, "part"), keys(t, s, d.cand, "cand")
		checkParts(t, sc.Name, x, part)
		if fast {
			checkCandidates(t, sc.Name, x, K, cand)
		} else if i := slices.IndexFunc(cand, func(k uint64) bool { return k != poisoned64 }); i >= 0 {
			t.Fatalf("%s: off the fast path, cand[%d] was written", sc.Name, i)
		}

		// sampler=row on the same inputs
		set(t, s, d.config, sampleConfig(sc.S, draw))
		set(t, s, d.counts, counts)
		d.run(t, s, mod, 0)
		row := d.token.Ints(t, s, "token")[0]
		if i := slices.IndexFunc(keys(t, s, d.cand, "cand"), func(k uint64) bool { return k != poisoned64 }); i >= 0 {
			t.Fatalf("%s: sampler=row wrote cand[%d]", sc.Name, i)
		}

		want := backendtest.Sample(sc.Logits, counts, sc.InPrompt, sc.S, sample.Uniform(sc.S.Seed, uint64(draw)))
		if got != row || got != want.ID {
			if want.Margin > 1e-5 {
				t.Fatalf("%s draw %d: sampler=topk chose %d, sampler=row %d, the reference %d (margin %.3g: not a near-tie)",
					sc.Name, draw, got, row, want.ID, want.Margin)
			}
			near++
		}
		counts[got]++
	}
	return near
}

// checkParts: part holds, for each sample_prep threadgroup, the largest
// rank key of its tokens (those it penalised into x) and a zero flag.
func checkParts(t *testing.T, name string, x []float32, part []uint64) {
	t.Helper()
	for b := range sampleParts {
		var best uint64
		for _, i := range partTokens(b, len(x)) {
			best = max(best, rankKey(x[i], i))
		}
		if part[2*b] != best || part[2*b+1] != 0 {
			t.Fatalf("%s: part %d holds %#x, %d; want its best key %#x and 0", name, b, part[2*b], part[2*b+1], best)
		}
	}
}

// checkCandidates: each sample_prep threadgroup's slots of cand hold its k
// best rank keys, largest first, then zeros where it has fewer tokens; the
// slots past k are untouched.
func checkCandidates(t *testing.T, name string, x []float32, K int, cand []uint64) {
	t.Helper()
	for b := range sampleParts {
		var want []uint64
		for _, i := range partTokens(b, len(x)) {
			want = append(want, rankKey(x[i], i))
		}
		slices.Sort(want)
		slices.Reverse(want)
		want = append(want, make([]uint64, K)...)[:K]
		got := cand[b*sampleFastK : (b+1)*sampleFastK]
		if !slices.Equal(got[:K], want) {
			t.Fatalf("%s: threadgroup %d's candidates %#x, want %#x", name, b, got[:K], want)
		}
		for j := K; j < sampleFastK; j++ {
			if got[j] != poisoned64 {
				t.Fatalf("%s: threadgroup %d wrote slot %d of cand, past the top-k %d", name, b, j, K)
			}
		}
	}
}

// partTokens are the ids sample_prep's threadgroup b penalises: b·256 + t,
// then every SAMPLE_PARTS·256 ids on.
func partTokens(b, V int) []int {
	var ids []int
	for i := b * samplePrepThreads; i < V; i += sampleParts * samplePrepThreads {
		for t := i; t < min(V, i+samplePrepThreads); t++ {
			ids = append(ids, t)
		}
	}
	return ids
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
