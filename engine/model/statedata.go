package model

import (
	"fmt"

	"petal/engine/backend"
)

// StateData is a host copy of a sequence state, for snapshots: the token
// history, the used rows of each full-attention layer's K and V caches, and
// each Gated DeltaNet layer's conv and recurrent state. Slices of layers of
// the other kind are nil.
type StateData struct {
	Tokens []int32
	// KV is the element type the K and V caches were kept in: every value
	// of K and V is exact in it (bf16 caches hold bf16 values). 0 is F32.
	// The conv and recurrent states are always float32.
	KV    backend.DType
	K, V  [][]float32 // per layer: [len(Tokens), KVHeads*HeadDim]
	Conv  [][]float32 // per layer: [K-1, channels]
	Recur [][]float32 // per layer: [value heads, value dim, key dim]
}

// KVType is the element type of the K and V values (F32 when unset).
func (d *StateData) KVType() backend.DType {
	if d.KV == 0 {
		return backend.F32
	}
	return d.KV
}

// Export is Snapshot for tests on the CPU backend, whose reads never fail:
// it panics on an error.
//
// Deprecated: use Snapshot, which returns the error.
func (m *Model) Export(s *State) StateData {
	data, err := m.Snapshot(s)
	if err != nil {
		panic(err)
	}
	return data
}

// Snapshot copies a state to host memory.
func (m *Model) Snapshot(s *State) (StateData, error) {
	d := &m.Dims
	n := s.Pos()
	out := StateData{
		Tokens: append([]int32(nil), s.Tokens...),
		KV:     s.kv,
		K:      make([][]float32, d.Layers), V: make([][]float32, d.Layers),
		Conv: make([][]float32, d.Layers), Recur: make([][]float32, d.Layers),
	}
	var err error
	fresh := !s.allocated || s.stale // a state never run holds zeros
	read := func(b backend.Buffer, n int) []float32 {
		v := make([]float32, n)
		if !fresh && err == nil {
			err = m.be.Read(b.View(0, n), v)
		}
		return v
	}
	for i, full := range d.Full {
		if full {
			out.K[i] = read(s.KCache[i], n*d.kvWidth())
			out.V[i] = read(s.VCache[i], n*d.kvWidth())
		} else {
			out.Conv[i] = read(s.Conv[i], (d.ConvK-1)*d.ConvChannels())
			out.Recur[i] = read(s.Recur[i], d.ValueHeads*d.ValueDim*d.KeyDim)
		}
	}
	if err != nil {
		return StateData{}, fmt.Errorf("model: reading the state: %w", err)
	}
	return out, nil
}

// Import builds a state from host memory with room for maxContext tokens
// (NewState, then Restore).
func (m *Model) Import(data StateData, maxContext int) (*State, error) {
	s := m.NewState(maxContext)
	if err := m.Restore(s, data); err != nil {
		s.Free(m.be)
		return nil, err
	}
	return s, nil
}

// Restore writes a snapshot into s, replacing what it held; its buffers
// (and so its compiled programs) stay unless the KV cache must grow. Every
// size is checked against the model, and the KV element type against the
// state's, before anything is written: a refused snapshot leaves s as it
// was. A state whose device write fails is left empty.
func (m *Model) Restore(s *State, data StateData) error {
	if err := m.checkData(&data); err != nil {
		return err
	}
	if got := data.KVType(); got != s.kv {
		return fmt.Errorf("model: the snapshot's KV cache is %s, this state keeps %s (the kv= option of the backend): a state is restored only into the element type it was computed in", got, s.kv)
	}
	n := len(data.Tokens)
	if n > s.MaxContext {
		return fmt.Errorf("model: the snapshot's %d tokens exceed the maximum context of %d", n, s.MaxContext)
	}
	s.Tokens = nil  // nothing of the old sequence is kept, so growing copies nothing
	s.stale = false // every buffer that matters is written below
	err := m.reserve(s, n)
	write := func(dst backend.Buffer, v []float32) {
		if err == nil {
			err = m.be.Write(dst, v)
		}
	}
	for i, full := range m.Dims.Full {
		if full {
			if n > 0 {
				write(s.KCache[i].View(0, len(data.K[i])), data.K[i])
				write(s.VCache[i].View(0, len(data.V[i])), data.V[i])
			}
		} else {
			write(s.Conv[i], data.Conv[i])
			write(s.Recur[i], data.Recur[i])
		}
	}
	if err == nil {
		err = m.be.WriteInts(s.pos, []int32{int32(n)})
	}
	if err != nil {
		s.Tokens, s.stale = nil, s.allocated
		return fmt.Errorf("model: writing the state: %w", err)
	}
	s.Tokens = append([]int32(nil), data.Tokens...)
	return nil
}

// checkData checks a snapshot's layers, sizes and token ids against the
// model.
func (m *Model) checkData(data *StateData) error {
	d := &m.Dims
	n := len(data.Tokens)
	if len(data.K) != d.Layers || len(data.V) != d.Layers || len(data.Conv) != d.Layers || len(data.Recur) != d.Layers {
		return fmt.Errorf("model: state has %d/%d/%d/%d layers, the model %d", len(data.K), len(data.V), len(data.Conv), len(data.Recur), d.Layers)
	}
	if t := data.KVType(); !t.IsFloat() {
		return fmt.Errorf("model: state has a KV cache of element type %s", t)
	}
	for _, t := range data.Tokens {
		if t < 0 || int(t) >= d.Vocab {
			return fmt.Errorf("model: state holds token id %d outside the vocabulary of %d", t, d.Vocab)
		}
	}
	convLen, recurLen := (d.ConvK-1)*d.ConvChannels(), d.ValueHeads*d.ValueDim*d.KeyDim
	for i, full := range d.Full {
		want := [4]int{n * d.kvWidth(), n * d.kvWidth(), 0, 0}
		if !full {
			want = [4]int{0, 0, convLen, recurLen}
		}
		got := [4]int{len(data.K[i]), len(data.V[i]), len(data.Conv[i]), len(data.Recur[i])}
		for j, name := range [4]string{"K", "V", "conv", "recurrent"} {
			if got[j] != want[j] {
				return fmt.Errorf("model: layer %d %s state has %d values, want %d", i, name, got[j], want[j])
			}
		}
	}
	return nil
}
