package cpu

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/sample"
)

// The sampling ops run engine/sample's Kernel, the definition of Sample and
// Logprobs, on the buffers in place.

func (b *Backend) sample(o *backend.Sample) {
	par, cfg := F(o.Params), I(o.Config)
	s := sample.Settings{
		Temperature: par[backend.SampleTemperature], TopP: par[backend.SampleTopP], MinP: par[backend.SampleMinP],
		Presence: par[backend.SamplePresence], Frequency: par[backend.SampleFrequency],
		Repetition: par[backend.SampleRepetition], TopK: cfg[backend.SampleTopK],
		Seed: uint64(uint32(cfg[backend.SampleSeedLow])) | uint64(uint32(cfg[backend.SampleSeedHigh]))<<32,
	}
	draw := uint64(uint32(cfg[backend.SampleDraw]))
	counts := I(o.Counts)
	id, finite := b.sampler.Choose(F(o.Logits), counts, I(o.InPrompt), &s, sample.Uniform(s.Seed, draw))
	counts[id]++
	cfg[backend.SampleDraw]++
	I(o.Token)[0] = id
	status := I(o.Status)
	status[0], status[1] = id, 0
	if !finite {
		status[1] = 1
	}
}

func (b *Backend) logprobs(o *backend.Logprobs) error {
	id := I(o.Token)[0]
	if id < 0 || int(id) >= o.Vocab {
		return fmt.Errorf("token id %d outside the vocabulary of %d", id, o.Vocab)
	}
	var top []int32
	if o.TopN > 0 {
		top = I(o.TopIDs)
	}
	b.sampler.Logprobs(F(o.Logits), id, top, F(o.Out))
	return nil
}

// checkSampling checks the lengths of the sampling ops' buffers.
func checkSampling(op backend.Op) error {
	want := func(what string, buf backend.Buffer, n int) error {
		if buf.Len != n {
			return fmt.Errorf("%s of %d elements, want %d", what, buf.Len, n)
		}
		return nil
	}
	var errs []error
	switch o := op.(type) {
	case *backend.Sample:
		if o.Vocab < 1 {
			return fmt.Errorf("a vocabulary of %d tokens", o.Vocab)
		}
		errs = []error{want("logits", o.Logits, o.Vocab), want("params", o.Params, backend.SampleParamCount),
			want("config", o.Config, backend.SampleConfigCount), want("counts", o.Counts, o.Vocab),
			want("prompt flags", o.InPrompt, o.Vocab), want("token", o.Token, 1), want("status", o.Status, 2)}
	case *backend.Logprobs:
		if o.Vocab < 1 {
			return fmt.Errorf("a vocabulary of %d tokens", o.Vocab)
		}
		errs = []error{want("logits", o.Logits, o.Vocab), want("token", o.Token, 1), want("output", o.Out, 1+o.TopN)}
		if o.TopN > 0 {
			errs = append(errs, want("top ids", o.TopIDs, o.TopN))
		}
		if o.TopN < 0 || o.TopN > o.Vocab {
			errs = append(errs, fmt.Errorf("top %d of a %d-token vocabulary", o.TopN, o.Vocab))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
