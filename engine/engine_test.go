package engine_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/oracle"
)

const sharedDir = "../../shared/oracle"

func open(t *testing.T) (*engine.Engine, *oracle.Reference) {
	t.Helper()
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("oracle data not found at %s: %v", sharedDir, err)
	}
	e, err := engine.Open(filepath.Join(sharedDir, "tiny-qwen36-moe-4bit"), engine.Options{Backend: cpu.New(), Chunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ref, err := oracle.Open(filepath.Join(sharedDir, "reference"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ref.Close)
	return e, ref
}

// TestGenerateGreedyMatchesReference: greedy generation reproduces the
// reference continuations up to the first end-of-turn id.
func TestGenerateGreedyMatchesReference(t *testing.T) {
	e, ref := open(t)
	for _, name := range oracle.GreedyCases {
		prompt, _ := ref.Ints(name + ".prompt_ids")
		want, _ := ref.Ints(name + ".generated_ids")
		var streamed strings.Builder
		res, err := e.Generate(context.Background(), e.NewState(), engine.Request{
			Prompt: prompt, MaxTokens: len(want), OnText: func(s string) { streamed.WriteString(s) },
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := len(want)
		for i, id := range want {
			if e.StopIDs[id] {
				stop = i
				break
			}
		}
		if len(res.Tokens) != stop {
			t.Fatalf("%s: %d tokens %v, want the %d before the first stop id of %v", name, len(res.Tokens), res.Tokens, stop, want)
		}
		for i := range res.Tokens {
			if res.Tokens[i] != want[i] {
				t.Fatalf("%s: tokens %v, reference %v", name, res.Tokens, want)
			}
		}
		wantReason := "length"
		if stop < len(want) {
			wantReason = "stop"
		}
		if res.FinishReason != wantReason {
			t.Errorf("%s: finish reason %q, want %q", name, res.FinishReason, wantReason)
		}
		ids := make([]int, len(res.Tokens))
		for i, id := range res.Tokens {
			ids[i] = int(id)
		}
		if text := e.Tokenizer.Decode(ids, false); res.Text != text || streamed.String() != text {
			t.Errorf("%s: text %q, streamed %q, decoded %q", name, res.Text, streamed.String(), text)
		}
	}
}

// TestStopString cuts the text before a stop string and streams exactly the kept text.
func TestStopString(t *testing.T) {
	e, ref := open(t)
	prompt, _ := ref.Ints("greedy0.prompt_ids")
	full, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	cut := len(full.Text) / 2
	stop := full.Text[cut : cut+3]
	want := full.Text[:strings.Index(full.Text, stop)]
	var streamed strings.Builder
	res, err := e.Generate(context.Background(), e.NewState(), engine.Request{
		Prompt: prompt, MaxTokens: 32, Stop: []string{"never appears", stop},
		OnText: func(s string) { streamed.WriteString(s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want || streamed.String() != want || res.FinishReason != "stop" {
		t.Fatalf("stop %q: text %q, streamed %q, reason %q; want %q", stop, res.Text, streamed.String(), res.FinishReason, want)
	}
}

// TestPromptLogprobsGiveReferenceNLL: echo-style prompt scoring reproduces
// the reference mean NLL of a sequence.
func TestPromptLogprobsGiveReferenceNLL(t *testing.T) {
	e, ref := open(t)
	ids, _ := ref.Ints("seq3.input_ids")
	nll, _, _ := ref.Floats("nll")
	res, err := e.Generate(context.Background(), e.NewState(), engine.Request{
		Prompt: ids, MaxTokens: 1, PromptLogprobs: true, Logprobs: true, TopLogprobs: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PromptLogprobs) != len(ids)-1 {
		t.Fatalf("%d prompt logprobs for %d tokens", len(res.PromptLogprobs), len(ids))
	}
	var sum float64
	for i, lp := range res.PromptLogprobs {
		if lp.ID != ids[i+1] {
			t.Fatalf("prompt logprob %d is for token %d, want %d", i, lp.ID, ids[i+1])
		}
		sum -= lp.Logprob
	}
	if got := sum / float64(len(res.PromptLogprobs)); math.Abs(got-float64(nll[3])) > 1e-4 {
		t.Errorf("mean NLL from prompt logprobs %.6f, reference %.6f", got, nll[3])
	}
	g := res.Logprobs[0]
	if len(g.Top) != 3 || g.Top[0].ID != g.ID || g.Top[0].Logprob != g.Logprob || g.Top[1].Logprob > g.Logprob {
		t.Errorf("greedy token logprob %+v: its own id should top the alternatives", g)
	}
}

// TestGenerateReusesPrefix: continuing a state that holds a prefix gives the
// same tokens as starting fresh, and reports the cached tokens.
func TestGenerateReusesPrefix(t *testing.T) {
	e, ref := open(t)
	prompt, _ := ref.Ints("greedy1.prompt_ids")
	fresh, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	s := e.NewState()
	if err := e.Model.Forward(s, prompt[:5], model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	res, err := e.Generate(context.Background(), s, engine.Request{Prompt: prompt, MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.CachedTokens != 5 || res.PromptTokens != len(prompt)-5 {
		t.Errorf("cached %d, prefilled %d; want 5 and %d", res.CachedTokens, res.PromptTokens, len(prompt)-5)
	}
	if strings.Join(strings.Fields(res.Text), " ") != strings.Join(strings.Fields(fresh.Text), " ") || len(res.Tokens) != len(fresh.Tokens) {
		t.Errorf("with a cached prefix %q, fresh %q", res.Text, fresh.Text)
	}
	if _, err := e.Generate(context.Background(), s, engine.Request{Prompt: []int32{1, 2, 3}}); err == nil {
		t.Error("a state that is not a prefix of the prompt was accepted")
	}
}

// TestChunkBoundedByContext: a chunk longer than --max-context is cut to
// it (no pass holds more tokens than a sequence), one within it is kept.
func TestChunkBoundedByContext(t *testing.T) {
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("oracle data not found at %s: %v", sharedDir, err)
	}
	for _, c := range []struct{ chunk, context, want int }{{4096, 100, 100}, {64, 100, 64}, {4096, 0, 4096}} {
		e, err := engine.Open(filepath.Join(sharedDir, "tiny-qwen36-moe-4bit"), engine.Options{Backend: cpu.New(), Chunk: c.chunk, MaxContext: c.context})
		if err != nil {
			t.Fatal(err)
		}
		if e.Model.Chunk != c.want {
			t.Errorf("chunk %d, max context %d: the model's chunk %d, want %d", c.chunk, c.context, e.Model.Chunk, c.want)
		}
		e.Close()
	}
}
