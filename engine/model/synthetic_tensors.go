package model

import (
	"fmt"
	"iter"
	"strings"

	"petal/engine/checkpoint"
	"petal/engine/quant"
)

// A synthetic model can also be written out as a checkpoint folder, so that
// a real load (memory maps, Load, the backend's uploads) can be timed on a
// machine that has no real checkpoint. SyntheticLayout is the inverse of
// BindWeights for the weights Synthetic makes: the same names, the MLX
// dtypes and layouts Load reads, and the same values for the same seed.

// SyntheticTensor is one tensor of a synthetic model as a checkpoint stores
// it, under BindWeights' (normalised) name. Exactly one of Words (U32
// packed codes), Halves (BF16 scales and biases) and Floats (F32 vectors)
// holds its values once made.
type SyntheticTensor struct {
	Name   string
	DType  checkpoint.DType
	Shape  []int
	Words  []uint32
	Halves []uint16
	Floats []float32
}

// Bytes is the size of the tensor's data in a safetensors file.
func (t *SyntheticTensor) Bytes() int64 {
	n := int64(t.DType.Size())
	for _, s := range t.Shape {
		n *= int64(s)
	}
	return n
}

// SyntheticPart is a run of tensors made together: the embedding, one
// layer, or the output head and the final norm.
type SyntheticPart struct {
	Name    string
	Tensors []SyntheticTensor // names, dtypes and shapes only
}

// SyntheticLayout is the synthetic model of some sizes and seed laid out as
// checkpoint tensors, a part at a time, so a writer never holds more than
// a part or two of a 20 GB model.
type SyntheticLayout struct {
	Parts []SyntheticPart
	// Bits is the bit width of every quantised module (normalised path,
	// such as "model.layers.0.mlp.gate"), for config.json's quantization.
	Bits map[string]int
	// GroupSize is the quantisation group of every module.
	GroupSize int

	d    Dims
	seed uint64
}

// NewSyntheticLayout lays out the model Synthetic(d, ..., seed) would build.
func NewSyntheticLayout(d Dims, seed uint64) (*SyntheticLayout, error) {
	if err := checkSynthetic(&d); err != nil {
		return nil, err
	}
	l := &SyntheticLayout{Bits: map[string]int{}, GroupSize: syntheticGroup, d: d, seed: seed}
	l.Parts = append(l.Parts, SyntheticPart{Name: "embedding", Tensors: l.matrixTensors("model.embed_tokens", l.embedShape(), nil)})
	for i := range d.Layers {
		l.Parts = append(l.Parts, SyntheticPart{Name: fmt.Sprintf("layer %d", i), Tensors: l.layerTensors(i, nil)})
	}
	l.Parts = append(l.Parts, SyntheticPart{Name: "output head", Tensors: l.headTensors(nil, nil)})
	return l, nil
}

func (l *SyntheticLayout) embedShape() syntheticMatrix {
	return syntheticMatrix{"", 1, l.d.Vocab, l.d.Hidden, syntheticBits}
}

// Generate makes the parts' values in order, as Synthetic does, yielding
// each part's index and its tensors (fresh slices the caller may keep).
// The parts share one generator stream, so they come in order only.
func (l *SyntheticLayout) Generate() iter.Seq2[int, []SyntheticTensor] {
	return func(yield func(int, []SyntheticTensor) bool) {
		top := syntheticRNG(l.seed, headStream)
		embed := quant.RandomMatrix(top, 1, l.d.Vocab, l.d.Hidden, syntheticBits, syntheticGroup)
		if !yield(0, l.matrixTensors("model.embed_tokens", l.embedShape(), &embed)) {
			return
		}
		for i := range l.d.Layers {
			h := randomLayer(&l.d, i, syntheticRNG(l.seed, uint64(i)))
			if !yield(1+i, l.layerTensors(i, &h)) {
				return
			}
		}
		// Synthetic draws the output head, then the final norm, after the embedding.
		head := quant.RandomMatrix(top, 1, l.d.Vocab, l.d.Hidden, syntheticBits, syntheticGroup)
		norm := normWeights(top, l.d.Hidden)
		yield(1+l.d.Layers, l.headTensors(&head, norm))
	}
}

// matrixTensors are a quantised module's three tensors (MLX layout): U32
// codes [rows, words], BF16 scales and biases [rows, groups], with the
// experts of a stack leading. The scales and biases are equal in size, so
// the next module's codes stay 4-byte aligned in the file.
func (l *SyntheticLayout) matrixTensors(module string, s syntheticMatrix, m *quant.Matrix) []SyntheticTensor {
	if m == nil {
		l.Bits[module] = s.bits // laid out once, by NewSyntheticLayout
	}
	lead := []int{s.rows}
	if strings.Contains(module, ".switch_mlp.") {
		// the routed experts are stored [experts, rows, words] as BindWeights reads them
		lead = []int{s.experts, s.rows}
	}
	shape := func(last int) []int { return append(append([]int(nil), lead...), last) }
	t := []SyntheticTensor{
		{Name: module + ".weight", DType: checkpoint.U32, Shape: shape(s.cols * s.bits / 32)},
		{Name: module + ".scales", DType: checkpoint.BF16, Shape: shape(s.cols / syntheticGroup)},
		{Name: module + ".biases", DType: checkpoint.BF16, Shape: shape(s.cols / syntheticGroup)},
	}
	if m != nil {
		t[0].Words, t[1].Halves, t[2].Halves = m.Words, m.Scales, m.Biases
	}
	return t
}

// layerTensors are layer i's tensors: its matrices in layerMatrices order,
// then its vectors (F32, so the values are exactly Synthetic's).
func (l *SyntheticLayout) layerTensors(i int, h *hostLayer) []SyntheticTensor {
	prefix := fmt.Sprintf("model.layers.%d.", i)
	var out []SyntheticTensor
	for j, s := range l.d.layerMatrices(i) {
		var m *quant.Matrix
		if h != nil {
			m = &h.matrices[j]
		}
		out = append(out, l.matrixTensors(prefix+s.module, s, m)...)
	}
	for j, v := range l.d.layerVectors(i) {
		t := SyntheticTensor{Name: prefix + v.name, DType: checkpoint.F32, Shape: v.shape}
		if h != nil {
			t.Floats = h.vectors[j]
		}
		out = append(out, t)
	}
	return out
}

// headTensors are the untied output head and the final norm.
func (l *SyntheticLayout) headTensors(head *quant.Matrix, norm []float32) []SyntheticTensor {
	out := l.matrixTensors("lm_head", l.embedShape(), head)
	return append(out, SyntheticTensor{Name: "model.norm.weight", DType: checkpoint.F32, Shape: []int{l.d.Hidden}, Floats: norm})
}
