package backendtest

import (
	"fmt"
	"math"
	"slices"

	"petal/engine/backend"
	"petal/engine/sample"
)

// SampleChoice is what the reference of the Sample op chose, and how close
// the choice came to going another way.
type SampleChoice struct {
	ID     int32
	Finite bool
	// Margin is the smallest relative distance (to the total kept weight)
	// between a boundary the choice depends on (the top-p target, u times
	// the total) and a partial sum of weights: a device whose rounding
	// differs may choose another id only when Margin is within its
	// rounding (about 1e-6).
	Margin float64
}

// Sample is the Sample op restated plainly (see backend.Sample): the
// penalties in float32 as stated, then a full sort of the vocabulary and
// float64 sums. logits is left as it is.
func Sample(logits []float32, counts, inPrompt []int32, s sample.Settings, u float32) SampleChoice {
	V := len(logits)
	x := slices.Clone(logits)
	finite := true
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			finite = false
		}
		n := counts[i]
		if s.Repetition > 0 && s.Repetition != 1 && (n > 0 || inPrompt[i] != 0) {
			if v > 0 {
				v /= s.Repetition
			} else {
				v *= s.Repetition
			}
		}
		if n > 0 {
			v -= s.Presence + s.Frequency*float32(n)
		}
		x[i] = v
	}
	order := make([]int32, V)
	for i := range order {
		order[i] = int32(i)
	}
	// x descending (NaN last), id ascending
	slices.SortStableFunc(order, func(a, b int32) int {
		xa, xb := x[a], x[b]
		switch {
		case xa > xb || xb != xb && xa == xa:
			return -1
		case xb > xa || xa != xa && xb == xb:
			return 1
		}
		return 0
	})
	best := order[0]
	m, T := x[best], s.Temperature
	if !(T > 0) || !finite || math.IsInf(float64(m), 0) || m != m {
		return SampleChoice{ID: best, Finite: finite, Margin: math.Inf(1)}
	}
	w := make([]float64, V)
	for i := range x {
		if d := (m - x[i]) / T; d < 87 {
			w[i] = math.Exp(-float64(d))
		}
	}
	n := V
	if s.TopK > 0 && int(s.TopK) < V {
		n = int(s.TopK)
	}
	margin := math.Inf(1)
	if s.TopP > 0 && s.TopP < 1 {
		var z float64
		for _, id := range order[:n] {
			z += w[id]
		}
		target := float64(s.TopP) * z
		var cum float64
		for j, id := range order[:n] {
			cum += w[id]
			margin = min(margin, math.Abs(cum-target)/z)
			if cum >= target {
				n = j + 1
				break
			}
		}
	}
	kept := order[:n]
	if s.MinP > 0 {
		kept = nil
		for _, id := range order[:n] {
			if float32(w[id]) >= s.MinP || id == best {
				kept = append(kept, id)
			}
			if d := math.Abs(w[id] - float64(s.MinP)); w[id] > 0 {
				margin = min(margin, d/float64(s.MinP))
			}
		}
	}
	slices.Sort(kept)
	var total float64
	for _, id := range kept {
		total += w[id]
	}
	r := float64(u) * total
	var acc float64
	chosen := int32(-1)
	for _, id := range kept {
		if w[id] == 0 {
			continue
		}
		acc += w[id]
		margin = min(margin, math.Abs(acc-r)/total)
		if chosen < 0 && r < acc {
			chosen = id
		}
	}
	if chosen < 0 {
		chosen = kept[len(kept)-1]
	}
	return SampleChoice{ID: chosen, Finite: true, Margin: margin}
}

// LogprobsRef is the Logprobs op in float64: the log-probability of id and
// of the n most likely tokens (logit descending, id ascending), with their
// ids.
func LogprobsRef(logits []float32, id int32, n int) (lp float64, top []int32, tops []float64) {
	m := math.Inf(-1)
	for _, v := range logits {
		m = max(m, float64(v))
	}
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(z)
	order := make([]int32, len(logits))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	for _, t := range order[:n] {
		top = append(top, t)
		tops = append(tops, float64(logits[t])-lse)
	}
	return float64(logits[id]) - lse, top, tops
}

func init() {
	// Sample: the id exactly, near-ties excepted (SampleChoice.Margin);
	// Logprobs: relative to the larger of 1 and the value.
	Tolerances["Sample"] = map[backend.DType]float64{backend.I32: 0}
	Tolerances["Logprobs"] = map[backend.DType]float64{backend.F32: 1e-5}
}

// SampleCase is one row and setting for the Sample op: its logits, the
// penalties' counts and prompt flags, the settings.
type SampleCase struct {
	Name     string
	Logits   []float32
	Counts   []int32
	InPrompt []int32
	S        sample.Settings
}

// SampleCases are the Sample op's cases at each vocabulary size of vocabs
// (random makes a row of logits, one per size, in order): greedy,
// temperature, top-k, top-p, min-p, all of them, equal logits, penalties
// with and without temperature; then rows holding NaN, +Inf and -Inf.
func SampleCases(vocabs []int, random func(n int) []float32) []SampleCase {
	var cases []SampleCase
	zeros := func(n int) []int32 { return make([]int32, n) }
	add := func(name string, logits []float32, s sample.Settings) {
		cases = append(cases, SampleCase{name, logits, zeros(len(logits)), zeros(len(logits)), s})
	}
	for _, V := range vocabs {
		row := random(V)
		add(fmt.Sprintf("greedy V=%d", V), row, sample.Settings{})
		add(fmt.Sprintf("temperature V=%d", V), row, sample.Settings{Temperature: 0.8, Seed: 11})
		add(fmt.Sprintf("top-k 1 V=%d", V), row, sample.Settings{Temperature: 1.5, TopK: 1, Seed: 12})
		add(fmt.Sprintf("top-k 5 V=%d", V), row, sample.Settings{Temperature: 1, TopK: 5, Seed: 13})
		add(fmt.Sprintf("top-k 300 V=%d", V), row, sample.Settings{Temperature: 1, TopK: 300, Seed: 13})
		add(fmt.Sprintf("top-k above V V=%d", V), row, sample.Settings{Temperature: 1, TopK: int32(V + 5), Seed: 13})
		add(fmt.Sprintf("top-p tiny V=%d", V), row, sample.Settings{Temperature: 1, TopP: 1e-6, Seed: 14})
		add(fmt.Sprintf("top-p 0.9 V=%d", V), row, sample.Settings{Temperature: 0.7, TopP: 0.9, Seed: 15})
		add(fmt.Sprintf("min-p 1 V=%d", V), row, sample.Settings{Temperature: 1, MinP: 1, Seed: 16})
		add(fmt.Sprintf("min-p 0.1 V=%d", V), row, sample.Settings{Temperature: 1.2, MinP: 0.1, Seed: 17})
		add(fmt.Sprintf("all V=%d", V), row, sample.Settings{Temperature: 0.9, TopK: 40, TopP: 0.8, MinP: 0.02, Seed: 18})
		add(fmt.Sprintf("top-k 64 top-p 0.95 V=%d", V), row, sample.Settings{Temperature: 0.6, TopK: 64, TopP: 0.95, Seed: 21})
		add(fmt.Sprintf("top-k 65 top-p 0.95 V=%d", V), row, sample.Settings{Temperature: 0.6, TopK: 65, TopP: 0.95, Seed: 22})
		add(fmt.Sprintf("equal logits V=%d", V), make([]float32, V), sample.Settings{Temperature: 1, TopK: 3, Seed: 19})
		add(fmt.Sprintf("equal logits top-p V=%d", V), make([]float32, V), sample.Settings{Temperature: 1, TopP: 0.5, Seed: 19})
		c := SampleCase{fmt.Sprintf("penalties V=%d", V), row, zeros(V), zeros(V),
			sample.Settings{Temperature: 0.7, TopK: 20, Repetition: 1.3, Presence: 0.5, Frequency: 0.25, Seed: 20}}
		for i := 0; i < V; i += 3 {
			c.Counts[i] = int32(1 + i%4)
		}
		for i := 1; i < V; i += 5 {
			c.InPrompt[i] = 1
		}
		cases = append(cases, c)
		g := c
		g.Name, g.S = fmt.Sprintf("greedy penalties V=%d", V), sample.Settings{Repetition: 1.3, Presence: 0.5, Frequency: 0.25}
		g.Counts = slices.Clone(c.Counts)
		cases = append(cases, g)
	}
	nan := float32(math.NaN())
	add("NaN", []float32{1, nan, 3, 2}, sample.Settings{Temperature: 1, Seed: 1})
	add("+Inf", []float32{1, float32(math.Inf(1)), 3, 2}, sample.Settings{Temperature: 1, Seed: 1})
	add("-Inf", []float32{1, float32(math.Inf(-1)), 3, 2}, sample.Settings{Temperature: 1, Seed: 1})
	return cases
}

// sampling: the Sample op chooses the reference's id for every case and
// draw (near-ties excepted, see SampleChoice), writes the id into Token
// and Status, flags non-finite rows, counts the chosen token and the draw;
// Logprobs matches its float64 reference.
func sampling(e *env) {
	cases := SampleCases([]int{1, 2, 7, 333, 4099}, func(n int) []float32 { return e.random(n, 6) })
	for _, c := range cases {
		V := len(c.Logits)
		logits, counts, inPrompt := e.buf(c.Logits), e.ints(c.Counts...), e.ints(c.InPrompt...)
		params := e.buf([]float32{c.S.Temperature, c.S.TopP, c.S.MinP, c.S.Presence, c.S.Frequency, c.S.Repetition})
		config := e.ints(c.S.TopK, int32(uint32(c.S.Seed)), int32(uint32(c.S.Seed>>32)), 0)
		token, status := e.ints(-7), e.ints(-7, -7)
		op := &backend.Sample{Logits: logits, Params: params, Config: config, Counts: counts, InPrompt: inPrompt,
			Token: token, Status: status, Vocab: V}
		prog, err := e.be.Compile([]backend.Op{op})
		e.fatal(err)
		wantCounts := slices.Clone(c.Counts)
		near := 0
		for draw := range 40 {
			e.fatal(e.be.WriteInts(token, []int32{-7}))
			e.fatal(e.be.WriteInts(status, []int32{-7, -7}))
			e.fatal(prog.Run())
			e.fatal(e.be.Sync())
			want := Sample(c.Logits, wantCounts, c.InPrompt, c.S, sample.Uniform(c.S.Seed, uint64(draw)))
			got, st := e.readInts(token)[0], e.readInts(status)
			if st[0] != got {
				e.t.Fatalf("%s draw %d: status id %d, token %d", c.Name, draw, st[0], got)
			}
			if wantFlag := map[bool]int32{true: 0, false: 1}[want.Finite]; st[1] != wantFlag {
				e.t.Errorf("%s: non-finite flag %d, want %d", c.Name, st[1], wantFlag)
			}
			if got != want.ID {
				if want.Margin > 1e-5 {
					e.t.Fatalf("%s draw %d: chose %d, the reference %d (margin %.3g: not a near-tie)", c.Name, draw, got, want.ID, want.Margin)
				}
				near++
				want.ID = got // follow the device from here
			}
			wantCounts[want.ID]++
			if cfg := e.readInts(config); cfg[backend.SampleDraw] != int32(draw+1) {
				e.t.Fatalf("%s: draw counter %d after %d draws", c.Name, cfg[backend.SampleDraw], draw+1)
			}
		}
		if !slices.Equal(e.readInts(counts), wantCounts) {
			e.t.Errorf("%s: counts after 40 draws differ from the chosen ids'", c.Name)
		}
		if near > 2 {
			e.t.Errorf("%s: %d near-tie disagreements in 40 draws", c.Name, near)
		}
	}

	// Logprobs over a row with distinct logits
	for _, V := range []int{1, 5, 4099} {
		row := e.random(V, 8)
		n := min(V, 20)
		id := int32(V / 2)
		out, ids := e.poisoned(1+n), e.ints(make([]int32, n)...)
		e.fatal(e.be.WriteInts(ids, slices.Repeat([]int32{-7}, n)))
		e.run(&backend.Logprobs{Logits: e.buf(row), Token: e.ints(id), Out: out, TopIDs: ids, Vocab: V, TopN: n})
		lp, top, tops := LogprobsRef(row, id, n)
		got, gotIDs := e.read(out), e.readInts(ids)
		if math.Abs(float64(got[0])-lp) > 1e-5*max(1, math.Abs(lp)) {
			e.t.Errorf("Logprobs V=%d: %g for the chosen token, want %g", V, got[0], lp)
		}
		for j := range n {
			if gotIDs[j] != top[j] || math.Abs(float64(got[1+j])-tops[j]) > 1e-5*max(1, math.Abs(tops[j])) {
				e.t.Fatalf("Logprobs V=%d: alternative %d is %d (%g), want %d (%g)", V, j, gotIDs[j], got[1+j], top[j], tops[j])
			}
		}
	}
}
