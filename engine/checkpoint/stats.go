package checkpoint

import "strings"

// Stats summarises the text model's tensors.
type Stats struct {
	Params           int64           // logical weights: a quantised matrix counts rows*cols, not words, scales or biases
	BytesByDType     map[DType]int64 // stored bytes per dtype
	QuantBytesByBits map[int]int64   // bytes of quantised modules (codes, scales, biases) per bit width
	Tensors          int             // text-model tensors
	IgnoredTensors   int             // tensors skipped (vision tower, MTP)
}

// Stats counts parameters and bytes. The parameter count follows mlx-lm's
// (the total_parameters of an MLX index).
func (c *Checkpoint) Stats() Stats {
	st := Stats{
		BytesByDType:     map[DType]int64{},
		QuantBytesByBits: map[int]int64{},
		Tensors:          len(c.names),
		IgnoredTensors:   len(c.ignored),
	}
	inQuantModule := map[string]bool{}
	for _, name := range c.names {
		st.BytesByDType[c.tensors[name].DType] += int64(len(c.tensors[name].Data))
		module, ok := strings.CutSuffix(name, ".scales")
		if !ok {
			continue
		}
		w, s, b := c.tensors[module+".weight"], c.tensors[name], c.tensors[module+".biases"]
		group := c.Quant(module).GroupSize
		if w == nil || b == nil || w.DType != U32 || group == 0 || len(w.Shape) == 0 || len(s.Shape) == 0 {
			continue
		}
		logical := int64(s.NumElements()) * int64(group)
		words := int64(w.NumElements())
		if logical == 0 || 32*words%logical != 0 {
			continue
		}
		st.Params += logical
		st.QuantBytesByBits[int(32*words/logical)] += int64(len(w.Data) + len(s.Data) + len(b.Data))
		for _, n := range []string{module + ".weight", name, module + ".biases"} {
			inQuantModule[n] = true
		}
	}
	for _, name := range c.names {
		if !inQuantModule[name] {
			st.Params += int64(c.tensors[name].NumElements())
		}
	}
	return st
}
