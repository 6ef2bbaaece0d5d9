package model

import (
	"fmt"

	"petal/engine/backend"
)

// State is one sequence's memory: the tokens so far, the KV cache of every
// full-attention layer, and the conv and recurrent state of every Gated
// DeltaNet layer. The recurrent state has a fixed size whatever the length;
// the KV cache grows with the context up to MaxContext. Device memory is
// allocated on first use (Forward, Restore), where an error can be returned.
//
// A State owns its buffers and the programs compiled over them, which run
// unchanged at every position. Restore writes a snapshot into an existing
// State, and Free hands the buffers and programs to the model for its next
// NewState or Import, so a run of jobs one after another, each restoring a
// snapshot into a fresh state, compiles its programs once. Programs are
// compiled again only when the buffers really change: when the KV cache
// grows (never, when the model sizes it up front, Model.FullKV).
type State struct {
	Tokens     []int32 // history; len(Tokens) is the next position
	MaxContext int

	m         *Model           // the model whose buffers these are
	kv        backend.DType    // element type of the KV caches
	allocated bool             // the fixed-size buffers below exist
	stale     bool             // the buffers hold another sequence: zero them before use
	pos       backend.Buffer   // i32 [1]: the position on the device, len(Tokens) between runs
	capacity  int              // rows allocated in each KV cache
	KCache    []backend.Buffer // per layer; zero Buffer for DeltaNet layers
	VCache    []backend.Buffer //
	Conv      []backend.Buffer // per layer [K-1, channels]; zero for attention layers
	Recur     []backend.Buffer // per layer [value heads, value dim, key dim] float32
	// recurrent is the one allocation that Conv and Recur are views of, so
	// that a decode step's backup is one device copy, not two a layer.
	recurrent backend.Buffer
	programs  map[int]*program // recorded ops by chunk length, tied to these buffers
}

// Pos is the number of tokens already in the state (the next RoPE position).
func (s *State) Pos() int { return len(s.Tokens) }

// KVType is the element type of the state's KV caches.
func (s *State) KVType() backend.DType { return s.kv }

// NewState starts an empty sequence state. The KV cache starts small and
// grows on demand up to maxContext tokens (or is sized for all of them at
// once, Model.FullKV). It takes over the buffers and compiled programs of
// the last state freed, if any.
func (m *Model) NewState(maxContext int) *State {
	if s := m.spare; s != nil {
		m.spare = nil
		if s.kv == m.KV {
			s.MaxContext, s.Tokens, s.stale = maxContext, nil, true
			return s
		}
		s.release()
	}
	d := &m.Dims
	return &State{
		MaxContext: maxContext,
		m:          m,
		kv:         m.KV,
		KCache:     make([]backend.Buffer, d.Layers),
		VCache:     make([]backend.Buffer, d.Layers),
		Conv:       make([]backend.Buffer, d.Layers),
		Recur:      make([]backend.Buffer, d.Layers),
		programs:   map[int]*program{},
	}
}

// allocate makes the fixed-size buffers of a new state, and zeroes those of
// a state taken over from an earlier sequence.
func (m *Model) allocate(s *State) error {
	if s.allocated {
		if s.stale {
			return m.clearState(s)
		}
		return nil
	}
	d := &m.Dims
	var err error
	if s.pos, err = m.be.Alloc(1, backend.I32); err != nil {
		return fmt.Errorf("model: position: %w", err)
	}
	convLen, recurLen := (d.ConvK-1)*d.ConvChannels(), d.ValueHeads*d.ValueDim*d.KeyDim
	conv, recur := make([]int, d.Layers), make([]int, d.Layers) // each view's offset
	total := 0
	for i := range d.Layers {
		if d.Full[i] {
			continue
		}
		conv[i], total = total, alignState(total+convLen)
		recur[i], total = total, alignState(total+recurLen)
	}
	if total > 0 {
		if s.recurrent, err = m.be.Alloc(total, backend.F32); err != nil {
			return fmt.Errorf("model: the Gated DeltaNet layers' conv and recurrent states (%d floats): %w", total, err)
		}
	}
	for i := range d.Layers {
		if !d.Full[i] {
			s.Conv[i], s.Recur[i] = s.recurrent.View(conv[i], convLen), s.recurrent.View(recur[i], recurLen)
		}
	}
	s.allocated = true
	return nil
}

// alignState rounds an offset in the state's allocation up to 64 floats:
// every view starts 256 bytes aligned, as a buffer of its own would (the
// GPU kernels load 16 bytes at a time).
func alignState(n int) int { return (n + 63) &^ 63 }

// clearState zeroes the position and the DeltaNet states on the device (the
// KV rows past the position are never read).
func (m *Model) clearState(s *State) error {
	d := &m.Dims
	n := max((d.ConvK-1)*d.ConvChannels(), d.ValueHeads*d.ValueDim*d.KeyDim)
	if m.zeros.Len < n {
		if m.zeros.Mem != nil {
			m.be.Free(m.zeros)
		}
		var err error
		if m.zeros, err = m.be.Alloc(n, backend.F32); err != nil {
			return fmt.Errorf("model: zeroing a state: %w", err)
		}
	}
	if err := m.be.WriteInts(s.pos, []int32{0}); err != nil {
		return fmt.Errorf("model: zeroing a state: %w", err)
	}
	for i, full := range d.Full {
		if full {
			continue
		}
		for _, b := range []backend.Buffer{s.Conv[i], s.Recur[i]} {
			if err := m.be.Copy(b, m.zeros.View(0, b.Len)); err != nil {
				return fmt.Errorf("model: zeroing a state: %w", err)
			}
		}
	}
	s.stale = false
	return nil
}

// kvWidth is the number of values one token adds to a layer's K (or V) cache.
func (d *Dims) kvWidth() int { return d.KVHeads * d.HeadDim }

// reserve makes room in the KV caches for n positions, growing them by
// doubling (capped at MaxContext; all of MaxContext at once when the model
// sizes caches up front) and copying what is cached on the device. The
// programs over the old caches are dropped; they are compiled again when
// next needed.
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
	if m.FullKV {
		capacity = s.MaxContext
	}
	capacity = min(capacity, s.MaxContext)
	w := m.Dims.kvWidth()
	used := s.Pos() * w
	for i, full := range m.Dims.Full {
		if !full {
			continue
		}
		for _, c := range []*backend.Buffer{&s.KCache[i], &s.VCache[i]} {
			grown, err := m.be.Alloc(capacity*w, s.kv)
			if err != nil {
				return fmt.Errorf("model: layer %d KV cache of %d tokens: %w", i, capacity, err)
			}
			if c.Mem != nil {
				if used > 0 {
					if err := m.be.Copy(grown.View(0, used), c.View(0, used)); err != nil {
						m.be.Free(grown)
						return err
					}
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

// Free ends the state. Its buffers and compiled programs go to the model,
// for the next NewState or Import (one such state is kept: the one with
// the larger KV cache); Model.FreeSpare releases them. s itself is left
// empty, holding nothing of the device's.
func (s *State) Free(be backend.Backend) {
	if s.m == nil || !s.allocated || be != s.m.be {
		s.release()
		return
	}
	kept := *s
	kept.Tokens = nil
	*s = State{MaxContext: s.MaxContext, m: s.m, kv: s.kv,
		KCache: make([]backend.Buffer, len(kept.KCache)), VCache: make([]backend.Buffer, len(kept.VCache)),
		Conv: make([]backend.Buffer, len(kept.Conv)), Recur: make([]backend.Buffer, len(kept.Recur)),
		programs: map[int]*program{}}
	m := kept.m
	if old := m.spare; old != nil {
		if old.capacity > kept.capacity {
			kept.release()
			return
		}
		old.release()
	}
	m.spare = &kept
}

// FreeSpare releases the buffers of the last state freed, which the model
// keeps for the next state.
func (m *Model) FreeSpare() {
	if m.spare != nil {
		m.spare.release()
		m.spare = nil
	}
}

// release frees the state's device memory.
func (s *State) release() {
	if s.m == nil {
		return
	}
	for _, set := range [][]backend.Buffer{s.KCache, s.VCache, {s.recurrent}, {s.pos}} {
		for i, b := range set {
			if b.Mem != nil {
				s.m.be.Free(b)
				set[i] = backend.Buffer{}
			}
		}
	}
	clear(s.Conv) // views of recurrent
	clear(s.Recur)
	s.pos, s.recurrent = backend.Buffer{}, backend.Buffer{}
	s.allocated, s.capacity = false, 0
	s.programs = map[int]*program{}
}
