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
	K, V   [][]float32 // per layer: [len(Tokens), KVHeads*HeadDim]
	Conv   [][]float32 // per layer: [K-1, channels]
	Recur  [][]float32 // per layer: [value heads, value dim, key dim]
}

// Export copies a state to host memory. It panics if the device cannot
// be read, which the CPU backend never fails to do; Snapshot returns the error.
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
		K:      make([][]float32, d.Layers), V: make([][]float32, d.Layers),
		Conv: make([][]float32, d.Layers), Recur: make([][]float32, d.Layers),
	}
	var err error
	read := func(b backend.Buffer, n int) []float32 {
		v := make([]float32, n)
		if b.Mem != nil && err == nil { // a state never run holds zeros
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

// Import builds a state from host memory, checking every size against the
// model, with room for maxContext tokens.
func (m *Model) Import(data StateData, maxContext int) (*State, error) {
	d := &m.Dims
	n := len(data.Tokens)
	if len(data.K) != d.Layers || len(data.V) != d.Layers || len(data.Conv) != d.Layers || len(data.Recur) != d.Layers {
		return nil, fmt.Errorf("model: state has %d/%d/%d/%d layers, the model %d", len(data.K), len(data.V), len(data.Conv), len(data.Recur), d.Layers)
	}
	for _, t := range data.Tokens {
		if t < 0 || int(t) >= d.Vocab {
			return nil, fmt.Errorf("model: state holds token id %d outside the vocabulary of %d", t, d.Vocab)
		}
	}
	s := m.NewState(maxContext)
	if err := m.reserve(s, n); err != nil {
		s.Free(m.be)
		return nil, err
	}
	var err error
	write := func(dst backend.Buffer, v []float32) {
		if err == nil {
			err = m.be.Write(dst, v)
		}
	}
	for i, full := range d.Full {
		want := map[string][2]int{}
		if full {
			want["K"] = [2]int{len(data.K[i]), n * d.kvWidth()}
			want["V"] = [2]int{len(data.V[i]), n * d.kvWidth()}
			want["conv"] = [2]int{len(data.Conv[i]), 0}
			want["recurrent"] = [2]int{len(data.Recur[i]), 0}
		} else {
			want["K"] = [2]int{len(data.K[i]), 0}
			want["V"] = [2]int{len(data.V[i]), 0}
			want["conv"] = [2]int{len(data.Conv[i]), s.Conv[i].Len}
			want["recurrent"] = [2]int{len(data.Recur[i]), s.Recur[i].Len}
		}
		for name, got := range want {
			if got[0] != got[1] {
				s.Free(m.be)
				return nil, fmt.Errorf("model: layer %d %s state has %d values, want %d", i, name, got[0], got[1])
			}
		}
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
		s.Free(m.be)
		return nil, fmt.Errorf("model: writing the state: %w", err)
	}
	s.Tokens = append([]int32(nil), data.Tokens...)
	return s, nil
}
