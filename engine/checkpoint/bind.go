package checkpoint

import (
	"fmt"
	"slices"
	"sort"

	"petal/engine/quant"
)

// Tensor returns a tensor by normalised name without marking it used.
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	t, ok := c.tensors[name]
	return t, ok
}

// Names lists the text model's tensors by normalised name, sorted.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Ignored lists, by original name and sorted, the tensors outside the text
// model (vision tower, multi-token prediction) that were skipped.
func (c *Checkpoint) Ignored() []string { return append([]string(nil), c.ignored...) }

// Quant returns the quantisation config.json gives a module (normalised
// path such as "model.layers.0.mlp.gate"): its override, else the defaults.
// The zero QuantSpec means unquantised.
func (c *Checkpoint) Quant(module string) QuantSpec { return c.quant.spec(module) }

// Take returns a tensor by normalised name and marks it used, for the
// model's strict loader.
func (c *Checkpoint) Take(name string) (*Tensor, error) {
	t, ok := c.tensors[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint: tensor %q is missing from %s", name, c.Dir)
	}
	c.mu.Lock()
	c.used[name] = true
	c.mu.Unlock()
	return t, nil
}

// Unused lists the text model's tensors never taken, sorted: a strict
// loader reports them as extra tensors.
func (c *Checkpoint) Unused() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range c.names {
		if !c.used[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// TakeQuant binds the quantised module <module>.weight/.scales/.biases as a
// [rows, cols] matrix (logical shape), or a stack of experts such matrices
// when experts > 0, and marks all three used. The bit width read from the
// shapes, 32*wordCols/(scalesCols*group), must equal config.json's.
func (c *Checkpoint) TakeQuant(module string, experts, rows, cols int) (quant.Matrix, error) {
	spec := c.Quant(module)
	if !spec.Quantized() {
		why := "config.json has no quantization block"
		if c.quant.present {
			why = "config.json's quantization marks it false"
		}
		return quant.Matrix{}, fmt.Errorf("checkpoint: module %q is not quantised (%s)", module, why)
	}
	w, err := c.Take(module + ".weight")
	if err != nil {
		return quant.Matrix{}, err
	}
	s, err := c.Take(module + ".scales")
	if err != nil {
		return quant.Matrix{}, err
	}
	b, err := c.Take(module + ".biases")
	if err != nil {
		return quant.Matrix{}, err
	}
	for _, x := range []struct {
		t    *Tensor
		want DType
	}{{w, U32}, {s, BF16}, {b, BF16}} {
		if x.t.DType != x.want {
			return quant.Matrix{}, fmt.Errorf("checkpoint: tensor %q is %s, want %s", x.t.Name, x.t.DType, x.want)
		}
	}
	if cols%spec.GroupSize != 0 || cols*spec.Bits%32 != 0 {
		return quant.Matrix{}, fmt.Errorf("checkpoint: module %q: %d columns do not split into groups of %d", module, cols, spec.GroupSize)
	}

	lead := []int{rows}
	if experts > 0 {
		lead = []int{experts, rows}
	}
	wantW := append(append([]int(nil), lead...), cols*spec.Bits/32)
	if len(w.Shape) != len(wantW) || !slices.Equal(w.Shape[:len(lead)], lead) {
		return quant.Matrix{}, fmt.Errorf("checkpoint: tensor %q has shape %v, want %v (%d columns at %d bits)",
			w.Name, w.Shape, wantW, cols, spec.Bits)
	}
	groups := cols / spec.GroupSize
	for _, t := range []*Tensor{s, b} {
		if want := append(append([]int(nil), lead...), groups); !slices.Equal(t.Shape, want) {
			return quant.Matrix{}, fmt.Errorf("checkpoint: tensor %q has shape %v, want %v (%d columns in groups of %d)",
				t.Name, t.Shape, want, cols, spec.GroupSize)
		}
	}
	if words := w.Shape[len(lead)]; words != wantW[len(lead)] {
		found := "no whole bit width"
		if 32*words%cols == 0 {
			found = fmt.Sprintf("%d-bit codes", 32*words/cols)
		}
		return quant.Matrix{}, fmt.Errorf("checkpoint: tensor %q has shape %v: %d words per row of %d columns hold %s, but config.json quantises module %q at %d bits",
			w.Name, w.Shape, words, cols, found, module, spec.Bits)
	}
	m := quant.Matrix{
		Rows: rows, Cols: cols, Experts: max(experts, 1), Bits: spec.Bits, GroupSize: spec.GroupSize,
		Words: w.Uint32s(), Scales: s.Uint16s(), Biases: b.Uint16s(),
	}
	if err := m.Validate(); err != nil {
		return quant.Matrix{}, fmt.Errorf("checkpoint: module %q: %w", module, err)
	}
	return m, nil
}
