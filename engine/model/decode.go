package model

import (
	"fmt"

	"petal/engine/backend"
)

// The pieces of a decode loop on the device (engine/decode runs them): the
// sampling buffers of the model, the compiled programs that sample from
// the logits buffer and that run one whole decode step (forward the token
// in the token buffer, sample the next into it, advance), and a backup of
// a state's recurrent part so that a step issued ahead can be undone.

// MaxTopLogprobs is the most alternatives the Logprobs op reports.
const MaxTopLogprobs = 20

// Sampler is the device side of sampling, shared by every state of the
// model (one generation runs at a time on a model). Status, LogprobOut and
// LogprobIDs come in two, by the parity of the step that writes them, so a
// step issued ahead never overwrites what the host has not read yet.
type Sampler struct {
	Params     backend.Buffer    // f32 [backend.SampleParamCount]
	Config     backend.Buffer    // i32 [backend.SampleConfigCount]
	Counts     backend.Buffer    // i32 [vocab]
	InPrompt   backend.Buffer    // i32 [vocab]
	Status     [2]backend.Buffer // i32 [2]: the chosen id, the non-finite flag
	LogprobOut [2]backend.Buffer // f32 [1+MaxTopLogprobs]
	LogprobIDs [2]backend.Buffer // i32 [MaxTopLogprobs]

	programs map[int]backend.Program // sampling alone, by variant
}

// Sampler returns the model's sampling buffers, allocated on first use.
func (m *Model) Sampler() (*Sampler, error) {
	if m.sampler != nil {
		return m.sampler, nil
	}
	V := m.Dims.Vocab
	sp := &Sampler{programs: map[int]backend.Program{}}
	var held []backend.Buffer
	alloc := func(dst *backend.Buffer, n int, t backend.DType) error {
		b, err := m.be.Alloc(n, t)
		if err != nil {
			for _, h := range held {
				m.be.Free(h)
			}
			return fmt.Errorf("model: sampling buffers: %w", err)
		}
		held = append(held, b)
		*dst = b
		return nil
	}
	for _, a := range []struct {
		dst *backend.Buffer
		n   int
		t   backend.DType
	}{
		{&sp.Params, backend.SampleParamCount, backend.F32}, {&sp.Config, backend.SampleConfigCount, backend.I32},
		{&sp.Counts, V, backend.I32}, {&sp.InPrompt, V, backend.I32},
		{&sp.Status[0], 2, backend.I32}, {&sp.Status[1], 2, backend.I32},
		{&sp.LogprobOut[0], 1 + MaxTopLogprobs, backend.F32}, {&sp.LogprobOut[1], 1 + MaxTopLogprobs, backend.F32},
		{&sp.LogprobIDs[0], MaxTopLogprobs, backend.I32}, {&sp.LogprobIDs[1], MaxTopLogprobs, backend.I32},
	} {
		if err := alloc(a.dst, a.n, a.t); err != nil {
			return nil, err
		}
	}
	m.sampler = sp
	return sp, nil
}

// sampleOps chooses the next token from the logits buffer into the token
// buffer, the status of the given parity (and the log-probabilities).
func (m *Model) sampleOps(sp *Sampler, parity int, logprobs bool) []backend.Op {
	V, tok := m.Dims.Vocab, m.ws.tokens.View(0, 1)
	ops := []backend.Op{&backend.Sample{Logits: m.ws.logits, Params: sp.Params, Config: sp.Config,
		Counts: sp.Counts, InPrompt: sp.InPrompt, Token: tok, Status: sp.Status[parity], Vocab: V}}
	if logprobs {
		ops = append(ops, &backend.Logprobs{Logits: m.ws.logits, Token: tok, Out: sp.LogprobOut[parity],
			TopIDs: sp.LogprobIDs[parity], Vocab: V, TopN: MaxTopLogprobs})
	}
	return ops
}

func variant(parity int, logprobs bool) int {
	if logprobs {
		return 2 + parity
	}
	return parity
}

// SampleProgram samples from the logits a Forward with DeviceLogits (or a
// WriteLogits) left: the first token of a generation.
func (m *Model) SampleProgram(parity int, logprobs bool) (backend.Program, error) {
	sp, err := m.Sampler()
	if err != nil {
		return nil, err
	}
	key := variant(parity, logprobs)
	if p := sp.programs[key]; p != nil {
		return p, nil
	}
	p, err := m.be.Compile(m.sampleOps(sp, parity, logprobs))
	if err != nil {
		return nil, fmt.Errorf("model: compiling the sampling step: %w", err)
	}
	sp.programs[key] = p
	return p, nil
}

// DecodeProgram is one decode step of s as one program: the forward pass
// of the token in the token buffer at the state's device position, the
// sampling of the next token into that buffer, the advance. It is compiled
// once per state and variant (and again after the KV cache grows).
func (m *Model) DecodeProgram(s *State, parity int, logprobs bool) (backend.Program, error) {
	sp, err := m.Sampler()
	if err != nil {
		return nil, err
	}
	key := -1 - variant(parity, logprobs) // apart from the chunk programs' keys
	if p := s.programs[key]; p != nil {
		return p.compiled[0], nil
	}
	p, err := m.record(s, 1, DeviceLogits, false, m.sampleOps(sp, parity, logprobs)...)
	if err != nil {
		return nil, err
	}
	s.programs[key] = p
	return p.compiled[0], nil
}

// Programs is how many compiled programs the state holds (for tests).
func (s *State) Programs() int { return len(s.programs) }

// SetToken writes the token the next decode step runs.
func (m *Model) SetToken(t int32) error {
	if t < 0 || int(t) >= m.Dims.Vocab {
		return fmt.Errorf("model: token id %d outside the vocabulary of %d", t, m.Dims.Vocab)
	}
	m.tokenHost[0] = t
	return m.be.WriteInts(m.ws.tokens.View(0, 1), m.tokenHost[:])
}

// WriteLogits sets the logits buffer the sampling ops read.
func (m *Model) WriteLogits(row []float32) error { return m.be.Write(m.ws.logits, row) }

// Reserve makes room in s for n positions (see Forward); it may recompile
// the state's programs.
func (m *Model) Reserve(s *State, n int) error { return m.reserve(s, n) }

// Backup holds a copy of a state's conv and recurrent buffers on the
// device: what a decode step changes beyond the KV row at its position
// (which the next step at that position overwrites) and the position.
// They are one allocation (State.recurrent), so Save and Restore are one
// copy each.
type Backup struct {
	from, to backend.Buffer
}

// NewBackup allocates a backup for s.
func (m *Model) NewBackup(s *State) (*Backup, error) {
	if err := m.allocate(s); err != nil {
		return nil, err
	}
	b := &Backup{from: s.recurrent}
	if b.from.Mem == nil {
		return b, nil // no Gated DeltaNet layers
	}
	var err error
	if b.to, err = m.be.Alloc(b.from.Len, b.from.Type); err != nil {
		return nil, fmt.Errorf("model: state backup: %w", err)
	}
	return b, nil
}

// Save copies the state's buffers into the backup.
func (b *Backup) Save(be backend.Backend) error {
	if b.from.Mem == nil {
		return nil
	}
	return be.Copy(b.to, b.from)
}

// Restore copies the backup into the state and sets the device position
// back to s.Pos(): the state is again what it was at Save.
func (b *Backup) Restore(m *Model, s *State) error {
	if b.from.Mem != nil {
		if err := m.be.Copy(b.from, b.to); err != nil {
			return err
		}
	}
	m.tokenHost[0] = int32(s.Pos())
	return m.be.WriteInts(s.pos, m.tokenHost[:])
}

// Free releases the backup's device memory.
func (b *Backup) Free(be backend.Backend) {
	if b.to.Mem != nil {
		be.Free(b.to)
	}
	b.from, b.to = backend.Buffer{}, backend.Buffer{}
}
