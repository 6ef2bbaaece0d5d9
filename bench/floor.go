package bench

import (
	"petal/engine/backend"
	"petal/engine/model"
)

// The floors: what a token must cost at the least on a machine, from the
// model's sizes alone. A decoded token (batch 1) is bound by the bytes it
// must read, a prefilled token by its matrix work; the measured ceilings
// (backend.Peaks) turn each into the most tokens per second the machine
// could reach, and a measured speed into a share of that.

// Weight storage the floors assume: the checkpoints petal runs, 4-bit
// codes (8-bit for the router and the shared expert's gate) with a
// bfloat16 scale and bias per group of 64 columns.
const (
	floorBits, floorRouterBits, floorGroup = 4, 8, 64
)

// matrixBytes is the storage of a rows×cols matrix of that form.
func matrixBytes(rows, cols, bits int) int64 {
	return int64(rows) * (int64(cols)*int64(bits)/8 + 4*int64(cols/floorGroup))
}

// ActiveWeightBytes is what one decoded token reads of the weights: in
// every layer its mixer's projections (full attention: q with its gate,
// k, v, o; Gated DeltaNet: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a,
// out_proj), the router (8-bit), TopK routed experts and the shared expert
// (gate, up, down each) and the shared expert's gate (8-bit); then the
// lm_head, and one row of the embedding table. Norm vectors and the
// DeltaNet's small parameters are left out (under 0.1 %).
func ActiveWeightBytes(d *model.Dims) int64 {
	H, b := d.Hidden, floorBits
	var total int64
	for i := range d.Layers {
		if d.Full[i] {
			q, kv := d.QHeads*d.HeadDim, d.KVHeads*d.HeadDim
			total += matrixBytes(2*q, H, b) + 2*matrixBytes(kv, H, b) + matrixBytes(H, q, b)
		} else {
			total += matrixBytes(d.ConvChannels(), H, b) + matrixBytes(d.ValueWidth(), H, b) +
				2*matrixBytes(d.ValueHeads, H, b) + matrixBytes(H, d.ValueWidth(), b)
		}
		total += matrixBytes(d.Experts, H, floorRouterBits) + matrixBytes(1, H, floorRouterBits)
		total += int64(d.TopK) * (2*matrixBytes(d.Inter, H, b) + matrixBytes(H, d.Inter, b))
		total += 2*matrixBytes(d.SharedInter, H, b) + matrixBytes(H, d.SharedInter, b)
	}
	return total + matrixBytes(d.Vocab, H, b) + matrixBytes(1, H, b)
}

// DecodeBytes is what a decoded token at context tokens of context must
// read: the active weights (ActiveWeightBytes), K and V of every earlier
// token in every full-attention layer in elements of kvElem bytes
// (KVBytesPerToken), and every DeltaNet layer's recurrent and conv state
// (StateBytes, float32). Writes (the new K/V row, the updated state) are
// not counted: the floor is a lower bound.
func DecodeBytes(d *model.Dims, context, kvElem int) int64 {
	return ActiveWeightBytes(d) + cacheBytes(d, context, kvElem)
}

// ModelDecodeBytes is DecodeBytes with the weights as m holds them
// (ModelActiveWeightBytes) and its KV cache's element type.
func ModelDecodeBytes(m *model.Model, context int) int64 {
	return ModelActiveWeightBytes(m) + cacheBytes(&m.Dims, context, kvElem(m))
}

// cacheBytes is the KV cache at context tokens and the recurrent state.
func cacheBytes(d *model.Dims, context, kvElem int) int64 {
	return int64(context)*KVBytesPerToken(d, kvElem) + StateBytes(d)
}

// ActiveMatrixParams is the number of weights of the matrices every
// prefilled token goes through: the mixers' projections, the router, TopK
// routed experts, the shared expert and its gate, in every layer (the
// lm_head is counted apart: prefill computes logits for the last token
// only).
func ActiveMatrixParams(d *model.Dims) int64 {
	H := int64(d.Hidden)
	var n int64
	for i := range d.Layers {
		if d.Full[i] {
			q, kv := int64(d.QHeads*d.HeadDim), int64(d.KVHeads*d.HeadDim)
			n += H * (2*q + 2*kv + q)
		} else {
			n += H * int64(d.ConvChannels()+2*d.ValueWidth()+2*d.ValueHeads)
		}
		n += H * int64(d.Experts+1+3*d.TopK*d.Inter+3*d.SharedInter)
	}
	return n
}

// PrefillFLOPs is the matrix work per token of a prompt of n tokens from
// an empty state, a multiply-add counted as two: 2 × ActiveMatrixParams;
// in every full-attention layer, causal attention's q·k and p·v, 4 ×
// HeadDim per key per query head, over (n+1)/2 keys on average; and the
// lm_head's 2 × Vocab × Hidden once, shared by the n tokens. The delta
// rule's work per token (a few times its state, about 4 % of the rest at
// the 35B shape) is left out, as the floor leaves it: it is not
// dense matrix work at the batch-1 sizes of a chunk.
func PrefillFLOPs(d *model.Dims, n int) float64 {
	attn := 4 * float64(d.QHeads*d.HeadDim) * float64(n+1) / 2 * float64(fullLayers(d))
	head := 2 * float64(d.Vocab) * float64(d.Hidden) / float64(n)
	return 2*float64(ActiveMatrixParams(d)) + attn + head
}

// ModelActiveWeightBytes is ActiveWeightBytes from the model's own
// matrices: their bit widths and groups as loaded (a checkpoint with 8-bit
// experts reads twice the bytes of a 4-bit one), a scale and a bias of two
// bytes per group, TopK of the routed experts' rows.
func ModelActiveWeightBytes(m *model.Model) int64 {
	bytes := func(w backend.Matrix, rows int) int64 {
		if w == nil {
			return 0
		}
		s := w.Shape()
		group := s.GroupSize
		if group <= 0 {
			group = s.Cols
		}
		return int64(rows) * (int64(s.Cols)*int64(s.Bits)/8 + 4*int64(s.Cols/group))
	}
	all := func(ws ...backend.Matrix) int64 {
		var n int64
		for _, w := range ws {
			if w != nil {
				n += bytes(w, w.Shape().Rows*w.Shape().Experts)
			}
		}
		return n
	}
	topK := func(ws ...backend.Matrix) int64 {
		var n int64
		for _, w := range ws {
			if w != nil {
				n += bytes(w, w.Shape().Rows*min(m.Dims.TopK, w.Shape().Experts))
			}
		}
		return n
	}
	w := m.W
	total := all(w.LMHead) + bytes(w.Embed, 1)
	for _, l := range w.Layers {
		if a := l.Attn; a != nil {
			total += all(a.QProj, a.KProj, a.VProj, a.OProj)
		}
		if d := l.DeltaNet; d != nil {
			total += all(d.InQKV, d.InZ, d.InB, d.InA, d.OutProj)
		}
		e := &l.MoE
		total += all(e.Router, e.SharedGate, e.SharedUp, e.SharedDown, e.SharedExpertGate) + topK(e.Gate, e.Up, e.Down)
	}
	return total
}
