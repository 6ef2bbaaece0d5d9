package bench

import (
	"fmt"

	"petal/engine/model"
)

// Memory is an amount of memory a machine offers and what kind of figure it
// is: "available" (free for a new allocation now) or "installed" (the total).
type Memory struct {
	Bytes int64
	Kind  string
}

// Need is an estimate of the most memory a sweep holds at once, in bytes.
type Need struct {
	Weights   int64
	KVCache   int64 // every full-attention layer's K and V at Context tokens
	State     int64 // the Gated DeltaNet layers' conv and recurrent state
	Workspace int64 // one chunk's activations, the backend's temporaries, logits
	Snapshot  int64 // host copies of a state made to start decode runs
	Context   int
}

// Total is the sum of the parts.
func (n Need) Total() int64 { return n.Weights + n.KVCache + n.State + n.Workspace + n.Snapshot }

// EstimateNeed is what a sweep up to length longest needs, with weights
// bytes of weights and the options' decode steps, repeats and method.
func EstimateNeed(d *model.Dims, weights int64, chunk, longest int, o Options) Need {
	decode := o.DecodeTokens
	if decode == 0 {
		decode = 32
	}
	context := int64(longest + 1 + decode)
	kv := int64(d.KVHeads*d.HeadDim) * 4 // bytes of K (or V) per token per layer
	n := Need{Weights: weights, Context: int(context)}
	full := int64(fullLayers(d))
	n.State = StateBytes(d)
	n.KVCache = context * KVBytesPerToken(d, 4)
	n.Workspace = WorkspaceBytes(d, chunk)
	switch {
	case !o.PrefillContext:
		n.Snapshot = 2*context*kv + n.State/max(1, int64(d.Layers)-full) // one layer's worth, shared
	case o.Repeats > 1:
		n.Snapshot = n.KVCache + n.State // a full export
	}
	return n
}

// KVBytesPerToken is what one token of context takes in the KV caches: K
// and V, KVHeads·HeadDim elements each, in every full-attention layer, of
// elem bytes (4 for f32, 2 for bf16).
func KVBytesPerToken(d *model.Dims, elem int) int64 {
	return int64(fullLayers(d)) * 2 * int64(d.KVHeads*d.HeadDim) * int64(elem)
}

// KVCopyBytesPerToken is, over a KV cache of elem-byte elements, what one
// token adds to the bf16 copy of one layer's K and V that the CUDA
// backend's prefill attention reads over a float32 cache (kvcopy=on): 0
// for a bf16 cache.
func KVCopyBytesPerToken(d *model.Dims, elem int) int64 {
	if elem != 4 {
		return 0
	}
	return 2 * int64(d.KVHeads*d.HeadDim) * 2
}

// StateBytes is the Gated DeltaNet layers' state in float32: the value
// heads' ValueDim×KeyDim recurrent matrices and the conv's last ConvK-1
// inputs.
func StateBytes(d *model.Dims) int64 {
	per := int64(d.ValueHeads*d.ValueDim*d.KeyDim+(d.ConvK-1)*d.ConvChannels()) * 4
	return int64(d.Layers-fullLayers(d)) * per
}

// WorkspaceBytes is the temporary memory of a prefill chunk of chunk
// tokens, in float32: the activations of every projection's output (width
// per token) and the MoE's temporaries (router scores, conv, the routed
// experts' inputs and hidden states), plus two rows of logits.
func WorkspaceBytes(d *model.Dims, chunk int) int64 {
	c := int64(chunk)
	width := int64(3*d.Hidden + 4*d.QHeads*d.HeadDim + 2*d.KVHeads*d.HeadDim +
		2*d.ConvChannels() + 3*d.ValueWidth() + 2*d.ValueHeads + 2*d.TopK)
	temporaries := int64(d.Experts + 2*d.ConvChannels() + d.TopK*(2*d.Hidden+2*d.Inter) + 2*d.SharedInter)
	return c*(width+temporaries)*4 + 2*int64(d.Vocab)*4
}

func fullLayers(d *model.Dims) int {
	n := 0
	for _, f := range d.Full {
		if f {
			n++
		}
	}
	return n
}

// AllLogitsBytes is the float32 logits of every position of a chunk, which
// scoring (perplexity, prompt log-probabilities) allocates.
func AllLogitsBytes(d *model.Dims, chunk int) int64 { return int64(chunk) * int64(d.Vocab) * 4 }

// MemoryError refuses a sweep that needs more memory than there is.
type MemoryError struct {
	What string // what needs it, e.g. "synthetic qwen3.6-35b-a3b"
	Need Need
	Have Memory
}

func (e *MemoryError) Error() string {
	n := e.Need
	return fmt.Sprintf("%s needs about %s (weights %s, KV cache %s for %d tokens, state and workspace %s); this machine has %s %s",
		e.What, gb(n.Total()), gb(n.Weights), gb(n.KVCache), n.Context, gb(n.State+n.Workspace+n.Snapshot), gb(e.Have.Bytes), e.Have.Kind)
}

// CheckMemory compares a need with what have reports, and refuses with a
// MemoryError when it does not fit. Where have cannot tell, it allows.
func CheckMemory(what string, need Need, have func() (Memory, bool)) error {
	m, ok := have()
	if !ok || need.Total() <= m.Bytes {
		return nil
	}
	return &MemoryError{What: what, Need: need, Have: m}
}

func gb(b int64) string { return fmt.Sprintf("%.1f GB", float64(b)/1e9) }
