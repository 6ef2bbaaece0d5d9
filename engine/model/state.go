package model

import (
	"fmt"

	"petal/engine/backend"
)

// State is one sequence's memory: the tokens so far, the KV cache of every
// full-attention layer, and the conv and recurrent state of every Gated
// DeltaNet layer. The recurrent state has a fixed size whatever the length;
// the KV cache grows with the context up to MaxContext. Device memory is
// allocated on first use (Forward, Import), where an error can be returned.
type State struct {
	Tokens     []int32 // history; len(Tokens) is the next position
	MaxContext int

	allocated bool             // the fixed-size buffers below exist
	pos       backend.Buffer   // i32 [1]: the position on the device, len(Tokens) between runs
	capacity  int              // rows allocated in each KV cache
	KCache    []backend.Buffer // per layer; zero Buffer for DeltaNet layers
	VCache    []backend.Buffer //
	Conv      []backend.Buffer // per layer [K-1, channels]; zero for attention layers
	Recur     []backend.Buffer // per layer [value heads, value dim, key dim] float32
	programs  map[int]*program // recorded ops by chunk length, tied to these buffers
}

// Pos is the number of tokens already in the state (the next RoPE position).
func (s *State) Pos() int { return len(s.Tokens) }

// NewState starts an empty sequence state. The KV cache starts small and
// grows on demand up to maxContext tokens.
func (m *Model) NewState(maxContext int) *State {
	d := &m.Dims
	return &State{
		MaxContext: maxContext,
		KCache:     make([]backend.Buffer, d.Layers),
		VCache:     make([]backend.Buffer, d.Layers),
		Conv:       make([]backend.Buffer, d.Layers),
		Recur:      make([]backend.Buffer, d.Layers),
		programs:   map[int]*program{},
	}
}

// allocate makes the fixed-size buffers of a new state.
func (m *Model) allocate(s *State) error {
	if s.allocated {
		return nil
	}
	d := &m.Dims
	var err error
	if s.pos, err = m.be.Alloc(1, backend.I32); err != nil {
		return fmt.Errorf("model: position: %w", err)
	}
	for i := range d.Layers {
		if d.Full[i] {
			continue
		}
		if s.Conv[i], err = m.be.Alloc((d.ConvK-1)*d.ConvChannels(), backend.F32); err != nil {
			return fmt.Errorf("model: layer %d conv state: %w", i, err)
		}
		if s.Recur[i], err = m.be.Alloc(d.ValueHeads*d.ValueDim*d.KeyDim, backend.F32); err != nil {
			return fmt.Errorf("model: layer %d recurrent state: %w", i, err)
		}
	}
	s.allocated = true
	return nil
}

// kvWidth is the number of values one token adds to a layer's K (or V) cache.
func (d *Dims) kvWidth() int { return d.KVHeads * d.HeadDim }

// reserve makes room in the KV caches for n positions, growing them by
// doubling (capped at MaxContext) and copying what is cached on the device.
func (m *Model) reserve(s *State, n int) error {
	if n > s.MaxContext {
		return fmt.Errorf("model: %d tokens exceed the maximum context of %d", n, s.MaxContext)
	}
	if err := m.allocate(s); err != nil {
		return err
	}
	if n <= s.capacity {
		return nil
	}
	capacity := max(256, s.capacity)
	for capacity < n {
		capacity *= 2
	}
	capacity = min(capacity, s.MaxContext)
	w := m.Dims.kvWidth()
	used := s.Pos() * w
	for i, full := range m.Dims.Full {
		if !full {
			continue
		}
		for _, c := range []*backend.Buffer{&s.KCache[i], &s.VCache[i]} {
			grown, err := m.be.Alloc(capacity*w, backend.F32)
			if err != nil {
				return fmt.Errorf("model: layer %d KV cache of %d tokens: %w", i, capacity, err)
			}
			if c.Mem != nil {
				if err := m.be.Copy(grown.View(0, used), c.View(0, used)); err != nil {
					m.be.Free(grown)
					return err
				}
				m.be.Free(*c)
			}
			*c = grown
		}
	}
	s.capacity = capacity
	clear(s.programs) // they point at the old caches
	return nil
}

// Free releases the state's device memory.
func (s *State) Free(be backend.Backend) {
	for _, set := range [][]backend.Buffer{s.KCache, s.VCache, s.Conv, s.Recur, {s.pos}} {
		for _, b := range set {
			if b.Mem != nil {
				be.Free(b)
			}
		}
	}
	s.programs = nil
}
