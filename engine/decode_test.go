package engine_test

import (
	"context"
	"slices"
	"testing"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/sample"
	"petal/fixtures"
)

// counting is a backend that counts the host reads and the compilations
// of the backend it wraps.
type counting struct {
	backend.Backend
	floatReads, floatBytes int
	intReads, intBytes     int
	compiles               int
}

func (c *counting) Read(src backend.Buffer, dst []float32) error {
	c.floatReads++
	c.floatBytes += 4 * len(dst)
	return c.Backend.Read(src, dst)
}

func (c *counting) ReadInts(src backend.Buffer, dst []int32) error {
	c.intReads++
	c.intBytes += 4 * len(dst)
	return c.Backend.ReadInts(src, dst)
}

func (c *counting) Compile(ops []backend.Op) (backend.Program, error) {
	c.compiles++
	return c.Backend.Compile(ops)
}

func (c *counting) reset() { *c = counting{Backend: c.Backend} }

func openCounting(t *testing.T) (*engine.Engine, *counting) {
	t.Helper()
	dir, err := fixtures.DefaultModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	be := &counting{Backend: cpu.New()}
	e, err := engine.Open(dir, engine.Options{Backend: be, Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, be
}

// TestGreedyGenerationReadsNoLogits: a greedy generation without
// log-probabilities reads no float from the device at all (no logits, in
// the prefill or after), and one 8-byte status per chosen token; its
// decode step is compiled once and run at every position.
func TestGreedyGenerationReadsNoLogits(t *testing.T) {
	e, be := openCounting(t)
	prompt := e.Encode("def fibonacci(n):")
	for run := range 2 {
		be.reset()
		s := e.NewState()
		res, err := e.Generate(context.Background(), s, engine.Request{Prompt: prompt, MaxTokens: 24})
		if err != nil {
			t.Fatal(err)
		}
		chosen := len(res.Tokens)
		if res.StopToken >= 0 {
			chosen++
		}
		if be.floatReads != 0 {
			t.Errorf("run %d: %d float reads (%d bytes) during greedy generation, want none", run, be.floatReads, be.floatBytes)
		}
		if be.intReads != chosen || be.intBytes != 8*chosen {
			t.Errorf("run %d: %d int reads of %d bytes for %d chosen tokens, want %d of 8 bytes each", run, be.intReads, be.intBytes, chosen, chosen)
		}
		// a fresh state: its prefill programs and one decode step; the
		// sampling program of the first token only on the first run
		if want := s.Programs() + 1 - run; be.compiles != want {
			t.Errorf("run %d: %d compilations for %d tokens, want %d (the state's %d programs and the first token's)", run, be.compiles, chosen, want, s.Programs())
		}
	}
	be.reset()
	res, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 8, Logprobs: true, TopLogprobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if max := 4 * (1 + model.MaxTopLogprobs) * (len(res.Tokens) + 1); be.floatBytes > max || be.floatReads == 0 {
		t.Errorf("with log-probabilities: %d float bytes read for %d tokens, want some and at most %d (never a row of logits)", be.floatBytes, len(res.Tokens), max)
	}
}

// snapshot is a state's whole content on the host.
func snapshot(t *testing.T, e *engine.Engine, s *model.State) model.StateData {
	t.Helper()
	d, err := e.Model.Snapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sameState(a, b model.StateData) bool {
	eq := func(x, y [][]float32) bool {
		return slices.EqualFunc(x, y, func(p, q []float32) bool { return slices.Equal(p, q) })
	}
	return slices.Equal(a.Tokens, b.Tokens) && eq(a.K, b.K) && eq(a.V, b.V) && eq(a.Conv, b.Conv) && eq(a.Recur, b.Recur)
}

// TestDecodeAheadLeavesTheSameState: issuing each step before reading the
// last id (as on a GPU) gives the same tokens, text and finish as the plain
// loop, and leaves exactly the same state (every step issued past a stop
// undone) whether generation ends on a stop id, a stop string, max_tokens
// or sampling; a session continued from either state answers the same.
func TestDecodeAheadLeavesTheSameState(t *testing.T) {
	e, _ := openCounting(t)
	prompt := e.Encode("def fibonacci(n):")
	ref, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Tokens) < 8 {
		t.Fatalf("the reference run gave %d tokens", len(ref.Tokens))
	}
	at := 3 // a token first generated at this index or later ends the "stop id" case
	for slices.Contains(ref.Tokens[:at], ref.Tokens[at]) {
		at++
	}
	stopID := ref.Tokens[at]
	cases := map[string]engine.Request{
		"max tokens":  {MaxTokens: 12},
		"stop string": {MaxTokens: 16, Stop: []string{e.Tokenizer.Decode([]int{int(ref.Tokens[4]), int(ref.Tokens[5])}, false)}},
		"stop id":     {MaxTokens: 16},
		"sampled":     {MaxTokens: 12, Sampling: sample.Params{Temperature: 1, TopP: 0.95, RepetitionPenalty: 1.2, PresencePenalty: 0.3, Seed: 5}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "stop id" {
				e.StopIDs[stopID] = true
				defer delete(e.StopIDs, stopID)
			}
			var results []*engine.Result
			var states []model.StateData
			var follow []*engine.Result
			for _, ahead := range []bool{false, true} {
				engine.SetDecodeAhead(e, ahead)
				s := e.NewState()
				r := req
				r.Prompt = prompt
				res, err := e.Generate(context.Background(), s, r)
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, res)
				states = append(states, snapshot(t, e, s))
				// the next turn of a session continues this state
				next := append(slices.Clone(s.Tokens), e.Encode("\nprint(fibonacci(10))")...)
				f, err := e.Generate(context.Background(), s, engine.Request{Prompt: next, MaxTokens: 6})
				if err != nil {
					t.Fatal(err)
				}
				follow = append(follow, f)
				states = append(states, snapshot(t, e, s))
			}
			engine.SetDecodeAhead(e, false)
			p, a := results[0], results[1]
			if !slices.Equal(p.Tokens, a.Tokens) || p.Text != a.Text || p.FinishReason != a.FinishReason || p.StopToken != a.StopToken {
				t.Fatalf("ahead %v %q %s, plain %v %q %s", a.Tokens, a.Text, a.FinishReason, p.Tokens, p.Text, p.FinishReason)
			}
			if want := len(prompt) + max(len(p.Tokens)-1, 0); p.FinishReason != "stop" || p.StopToken < 0 {
				if len(states[0].Tokens) != want {
					t.Errorf("the state holds %d tokens, want the prompt and all generated tokens but the last (%d)", len(states[0].Tokens), want)
				}
			}
			if !sameState(states[0], states[2]) {
				t.Error("the state after generation differs between the plain loop and the loop issuing ahead")
			}
			if !slices.Equal(follow[0].Tokens, follow[1].Tokens) || !sameState(states[1], states[3]) {
				t.Errorf("the continued session differs: ahead %v, plain %v", follow[1].Tokens, follow[0].Tokens)
			}
			if name == "stop id" && (p.StopToken != stopID || len(p.Tokens) != at) {
				t.Errorf("stop id %d: stopped with %d after %d tokens", stopID, p.StopToken, len(p.Tokens))
			}
		})
	}
}

// TestSamplingReproducesPerSeed: the same seed gives the same tokens, run
// after run; another seed gives others.
func TestSamplingReproducesPerSeed(t *testing.T) {
	e, _ := openCounting(t)
	prompt := e.Encode("Once upon a time")
	gen := func(seed uint64) []int32 {
		res, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 24,
			Sampling: sample.Params{Temperature: 1.2, TopK: 50, TopP: 0.95, Seed: seed}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	a, b, c := gen(42), gen(42), gen(43)
	if !slices.Equal(a, b) {
		t.Errorf("seed 42 gave %v, then %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same %v", a)
	}
}
