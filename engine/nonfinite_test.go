package engine_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/cpu"
	"petal/engine/sample"
	"petal/fixtures"
)

// openEmbedded opens the embedded default model.
func openEmbedded(t *testing.T) *engine.Engine {
	t.Helper()
	dir, err := fixtures.DefaultModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(dir, engine.Options{Backend: cpu.New(), Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// poisonFinalNorm writes v into one weight of the final norm, which every
// logit depends on.
func poisonFinalNorm(e *engine.Engine, v float32) {
	w := make([]float32, e.Model.Dims.Hidden)
	for i := range w {
		w[i] = 1
	}
	w[7] = v
	e.Model.Backend().Write(e.Model.W.FinalNorm, w)
}

// TestGenerateNonFiniteLogits: a row of logits holding NaN or an infinity
// is an error naming its position, in the prompt's last row, in a prompt
// row scored for logprobs, and in a row produced while decoding.
func TestGenerateNonFiniteLogits(t *testing.T) {
	e := openEmbedded(t)
	prompt := e.Encode("def fibonacci(n):")
	want := func(err error, pos int) {
		t.Helper()
		msg := fmt.Sprintf("the model produced non-finite logits at position %d", pos)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("error %v, want %q", err, msg)
		}
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		poisonFinalNorm(e, v)
		_, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 4})
		want(err, len(prompt)-1)
		_, err = e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 4, PromptLogprobs: true, Logprobs: true, TopLogprobs: 2})
		want(err, 0)
		for _, temp := range []float64{0, 1} {
			poisonFinalNorm(e, 1)
			s := e.NewState()
			_, err = e.Generate(context.Background(), s, engine.Request{
				Prompt: prompt, MaxTokens: 8, Sampling: samplingAt(temp),
				OnText: func(string) { poisonFinalNorm(e, v) }, // after the first token's text
			})
			want(err, len(prompt))
		}
	}
	poisonFinalNorm(e, 1)
	if _, err := e.Generate(context.Background(), e.NewState(), engine.Request{Prompt: prompt, MaxTokens: 4}); err != nil {
		t.Errorf("unpoisoned: %v", err)
	}
}

func samplingAt(temperature float64) sample.Params {
	return sample.Params{Temperature: temperature, Seed: 1}
}
