package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/quant"
)

// Synthetic models have the shape of a real checkpoint and random weights,
// for measuring speed without the checkpoint's file. They compute nothing
// meaningful, but every op sees the sizes and the value ranges it would
// see on the real model, so the time each one takes is the real time.

// syntheticGroup is the quantisation group size of every MLX conversion.
const syntheticGroup = 64

// Bit widths as mlx-lm's conversion leaves them: routers and the shared
// expert gate at 8 bits, every other linear at 4.
const (
	syntheticBits       = 4
	syntheticRouterBits = 8
)

// syntheticShapes are the named shapes, as the text configs of their
// checkpoints give them (the tiny one is the oracle model's).
var syntheticShapes = map[string]checkpoint.Config{
	"qwen3.6-35b-a3b": {
		ModelType: "qwen3_5_moe_text", HiddenSize: 2048, NumHiddenLayers: 40, VocabSize: 248320,
		NumAttentionHeads: 16, NumKeyValueHeads: 2, HeadDim: 256, AttnOutputGate: true,
		LinearNumKeyHeads: 16, LinearNumValueHeads: 32, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
		LinearConvKernelDim: 4, NumExperts: 256, NumExpertsPerTok: 8,
		MoeIntermediateSize: 512, SharedExpertIntermediateSize: 512, NormTopKProb: true,
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, RopeType: "default",
		MaxPositionEmbeddings: 262144, BOSTokenID: -1,
	},
	"tiny": {
		ModelType: "qwen3_5_moe_text", HiddenSize: 256, NumHiddenLayers: 8, VocabSize: 4096,
		NumAttentionHeads: 8, NumKeyValueHeads: 1, HeadDim: 256, AttnOutputGate: true,
		LinearNumKeyHeads: 4, LinearNumValueHeads: 8, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
		LinearConvKernelDim: 4, NumExperts: 32, NumExpertsPerTok: 8,
		MoeIntermediateSize: 64, SharedExpertIntermediateSize: 128, NormTopKProb: true,
		RMSNormEps: 1e-6, RopeTheta: 1e7, PartialRotaryFactor: 0.25, RopeType: "default",
		MaxPositionEmbeddings: 32768, BOSTokenID: -1,
	},
}

// syntheticAliases name the same shape under other names: Qwen3.5-35B-A3B
// is Qwen3.6-35B-A3B's architecture with other weights.
var syntheticAliases = map[string]string{"qwen3.5-35b-a3b": "qwen3.6-35b-a3b"}

// SyntheticNames lists the shapes NamedConfig knows, sorted.
func SyntheticNames() []string {
	var names []string
	for n := range syntheticShapes {
		names = append(names, n)
	}
	for n := range syntheticAliases {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NamedConfig is the text config of a named shape: layer types follow the
// family's pattern, three Gated DeltaNet layers then one full attention.
func NamedConfig(name string) (checkpoint.Config, error) {
	key := strings.ToLower(name)
	if a, ok := syntheticAliases[key]; ok {
		key = a
	}
	c, ok := syntheticShapes[key]
	if !ok {
		return c, fmt.Errorf("model: no synthetic shape named %q (known: %s)", name, strings.Join(SyntheticNames(), ", "))
	}
	c.LayerTypes = make([]string, c.NumHiddenLayers)
	for i := range c.LayerTypes {
		c.LayerTypes[i] = checkpoint.LinearAttention
		if i%4 == 3 {
			c.LayerTypes[i] = checkpoint.FullAttention
		}
	}
	return c, nil
}

// NamedDims are the sizes of a named shape, checked as a checkpoint's are.
func NamedDims(name string) (Dims, error) {
	c, err := NamedConfig(name)
	if err != nil {
		return Dims{}, err
	}
	return NewDims(&c)
}

// syntheticMatrix is one quantised matrix of a synthetic model; module is
// its name in the layer (BindWeights' name without "model.layers.N.").
type syntheticMatrix struct {
	module                    string
	experts, rows, cols, bits int
}

func (s syntheticMatrix) bytes() int64 {
	perRow := int64(s.cols)*int64(s.bits)/8 + 2*2*int64(s.cols/syntheticGroup)
	return int64(s.experts) * int64(s.rows) * perRow
}

// layerMatrices lists a layer's matrices in binding order (the order
// BindWeights reads them), so sizes and construction cannot disagree.
func (d *Dims) layerMatrices(i int) []syntheticMatrix {
	H, b := d.Hidden, syntheticBits
	var out []syntheticMatrix
	if d.Full[i] {
		out = []syntheticMatrix{
			{"self_attn.q_proj", 1, d.QHeads * d.HeadDim * 2, H, b}, {"self_attn.k_proj", 1, d.kvWidth(), H, b},
			{"self_attn.v_proj", 1, d.kvWidth(), H, b}, {"self_attn.o_proj", 1, H, d.QHeads * d.HeadDim, b},
		}
	} else {
		out = []syntheticMatrix{
			{"linear_attn.in_proj_qkv", 1, d.ConvChannels(), H, b}, {"linear_attn.in_proj_z", 1, d.ValueWidth(), H, b},
			{"linear_attn.in_proj_b", 1, d.ValueHeads, H, b}, {"linear_attn.in_proj_a", 1, d.ValueHeads, H, b},
			{"linear_attn.out_proj", 1, H, d.ValueWidth(), b},
		}
	}
	return append(out,
		syntheticMatrix{"mlp.gate", 1, d.Experts, H, syntheticRouterBits},
		syntheticMatrix{"mlp.switch_mlp.gate_proj", d.Experts, d.Inter, H, b},
		syntheticMatrix{"mlp.switch_mlp.up_proj", d.Experts, d.Inter, H, b},
		syntheticMatrix{"mlp.switch_mlp.down_proj", d.Experts, H, d.Inter, b},
		syntheticMatrix{"mlp.shared_expert.gate_proj", 1, d.SharedInter, H, b},
		syntheticMatrix{"mlp.shared_expert.up_proj", 1, d.SharedInter, H, b},
		syntheticMatrix{"mlp.shared_expert.down_proj", 1, H, d.SharedInter, b},
		syntheticMatrix{"mlp.shared_expert_gate", 1, 1, H, syntheticRouterBits},
	)
}

// syntheticVector is one float vector of a layer: its name in the layer
// and its shape as a checkpoint stores it.
type syntheticVector struct {
	name  string
	shape []int
}

func (v syntheticVector) floats() int {
	n := 1
	for _, s := range v.shape {
		n *= s
	}
	return n
}

// layerVectors lists a layer's norms and DeltaNet parameters in the order
// randomLayer makes them.
func (d *Dims) layerVectors(i int) []syntheticVector {
	out := []syntheticVector{{"input_layernorm.weight", []int{d.Hidden}}, {"post_attention_layernorm.weight", []int{d.Hidden}}}
	if d.Full[i] {
		return append(out, syntheticVector{"self_attn.q_norm.weight", []int{d.HeadDim}}, syntheticVector{"self_attn.k_norm.weight", []int{d.HeadDim}})
	}
	return append(out,
		syntheticVector{"linear_attn.conv1d.weight", []int{d.ConvChannels(), d.ConvK, 1}}, // MLX layout [C, K, 1]
		syntheticVector{"linear_attn.dt_bias", []int{d.ValueHeads}},
		syntheticVector{"linear_attn.A_log", []int{d.ValueHeads}},
		syntheticVector{"linear_attn.norm.weight", []int{d.ValueDim}},
	)
}

// layerVectorFloats is the number of float32 values in a layer's norms and
// DeltaNet parameters.
func (d *Dims) layerVectorFloats(i int) int {
	n := 0
	for _, v := range d.layerVectors(i) {
		n += v.floats()
	}
	return n
}

// SyntheticWeightBytes is the memory the weights of a synthetic model of
// these sizes take: 4-bit codes (8-bit routers) with a bfloat16 scale and
// bias per group of 64, an untied output head, float32 vectors.
func SyntheticWeightBytes(d Dims) int64 {
	embed := syntheticMatrix{"", 1, d.Vocab, d.Hidden, syntheticBits}
	total := 2*embed.bytes() + int64(d.Hidden)*4
	for i := range d.Layers {
		for _, m := range d.layerMatrices(i) {
			total += m.bytes()
		}
		total += int64(d.layerVectorFloats(i)) * 4
	}
	return total
}

// FromWeights makes a model of bound weights that did not come from a
// checkpoint (chunk as in Load).
func FromWeights(d Dims, w *Weights, be backend.Backend, chunk int) (*Model, error) {
	if chunk < 1 {
		return nil, fmt.Errorf("model: chunk size %d, want at least 1", chunk)
	}
	if len(w.Layers) != d.Layers || len(d.Full) != d.Layers {
		return nil, fmt.Errorf("model: %d bound layers and %d layer kinds for %d layers", len(w.Layers), len(d.Full), d.Layers)
	}
	m := newModel(d, w, chunk, be)
	var err error
	if m.ws, err = newWorkspace(be, &d, chunk); err != nil {
		return nil, err
	}
	return m, nil
}

// Synthetic builds a model of the given sizes with random weights: every
// linear quantised like a real conversion (quant.RandomMatrix, group 64),
// norms near 1, A_log = log(U(1, 16)), small dt_bias and conv taps, so that
// activations stay in the ranges a trained model gives. The same seed gives
// the same weights. Layers are generated in parallel on the host, then
// uploaded in order.
func Synthetic(d Dims, be backend.Backend, chunk int, seed uint64) (*Model, error) {
	if err := checkSynthetic(&d); err != nil {
		return nil, err
	}
	rng := func(stream uint64) *rand.Rand { return syntheticRNG(seed, stream) }
	up := &uploader{be: be}
	top := rng(headStream)
	w := &Weights{
		Embed:     up.matrix(quant.RandomMatrix(top, 1, d.Vocab, d.Hidden, syntheticBits, syntheticGroup)),
		LMHead:    up.matrix(quant.RandomMatrix(top, 1, d.Vocab, d.Hidden, syntheticBits, syntheticGroup)),
		FinalNorm: up.vector(normWeights(top, d.Hidden)),
		Layers:    make([]Layer, d.Layers),
	}
	// Batches of layers bound the host memory held before upload to a few
	// layers' worth, whatever the backend does with it.
	batch := max(1, runtime.GOMAXPROCS(0))
	for start := 0; start < d.Layers && up.err == nil; start += batch {
		end := min(start+batch, d.Layers)
		host := make([]hostLayer, end-start)
		var wg sync.WaitGroup
		for i := start; i < end; i++ {
			wg.Go(func() { host[i-start] = randomLayer(&d, i, rng(uint64(i))) })
		}
		wg.Wait()
		for j, h := range host {
			w.Layers[start+j] = up.layer(h)
		}
	}
	if up.err != nil {
		return nil, up.err
	}
	return FromWeights(d, w, be, chunk)
}

// checkSynthetic refuses sizes Synthetic cannot quantise.
func checkSynthetic(d *Dims) error {
	if len(d.Full) != d.Layers {
		return fmt.Errorf("model: %d layer kinds for %d layers", len(d.Full), d.Layers)
	}
	for i := range d.Layers {
		for _, m := range d.layerMatrices(i) {
			if m.cols%syntheticGroup != 0 {
				return fmt.Errorf("model: layer %d has a matrix %d wide, not a multiple of the group size %d", i, m.cols, syntheticGroup)
			}
		}
	}
	if d.Hidden%syntheticGroup != 0 {
		return fmt.Errorf("model: hidden size %d is not a multiple of the group size %d", d.Hidden, syntheticGroup)
	}
	return nil
}

// syntheticRNG is the generator of one stream of a seed: a layer's
// (stream = its index), or the embedding's and output head's (headStream).
func syntheticRNG(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

const headStream = math.MaxUint64

// hostLayer is one layer's random weights before upload: matrices in
// layerMatrices order, vectors in binding order.
type hostLayer struct {
	full     bool
	matrices []quant.Matrix
	vectors  [][]float32
}

func randomLayer(d *Dims, i int, rng *rand.Rand) hostLayer {
	h := hostLayer{full: d.Full[i]}
	for _, s := range d.layerMatrices(i) {
		h.matrices = append(h.matrices, quant.RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, syntheticGroup))
	}
	h.vectors = [][]float32{normWeights(rng, d.Hidden), normWeights(rng, d.Hidden)}
	if h.full {
		h.vectors = append(h.vectors, normWeights(rng, d.HeadDim), normWeights(rng, d.HeadDim))
		return h
	}
	conv := uniform(rng, d.ConvChannels()*d.ConvK, -0.3, 0.3)
	dtBias := uniform(rng, d.ValueHeads, -0.5, 0.5)
	aLog := uniform(rng, d.ValueHeads, 1, 16)
	for j, a := range aLog {
		aLog[j] = float32(math.Log(float64(a)))
	}
	h.vectors = append(h.vectors, conv, dtBias, aLog, normWeights(rng, d.ValueDim))
	return h
}

// normWeights are RMSNorm weights as MLX files store them (1+w): near 1.
func normWeights(rng *rand.Rand, n int) []float32 { return uniform(rng, n, 0.9, 1.1) }

func uniform(rng *rand.Rand, n int, lo, hi float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = lo + (hi-lo)*rng.Float32()
	}
	return v
}

// uploader hands host weights to a backend, keeping the first error.
type uploader struct {
	be  backend.Backend
	err error
}

func (u *uploader) matrix(m quant.Matrix) backend.Matrix {
	dm, err := u.be.Upload(m)
	if err != nil && u.err == nil {
		u.err = fmt.Errorf("model: synthetic weights: %w", err)
	}
	return dm
}

func (u *uploader) vector(v []float32) backend.Buffer {
	buf, err := backend.AllocFloats(u.be, backend.F32, v)
	if err != nil && u.err == nil {
		u.err = fmt.Errorf("model: synthetic weights: %w", err)
	}
	return buf
}

// layer binds one layer's host weights in the order randomLayer made them.
func (u *uploader) layer(h hostLayer) Layer {
	m, v := h.matrices, h.vectors
	mat := func() backend.Matrix {
		x := u.matrix(m[0])
		m = m[1:]
		return x
	}
	vec := func() backend.Buffer {
		x := u.vector(v[0])
		v = v[1:]
		return x
	}
	l := Layer{InputNorm: vec(), PostNorm: vec()}
	if h.full {
		l.Attn = &AttnWeights{QProj: mat(), KProj: mat(), VProj: mat(), OProj: mat(), QNorm: vec(), KNorm: vec()}
	} else {
		l.DeltaNet = &DeltaNetWeights{InQKV: mat(), InZ: mat(), InB: mat(), InA: mat(), OutProj: mat(),
			Conv: vec(), DtBias: vec(), ALog: vec(), Norm: vec()}
	}
	l.MoE = MoEWeights{Router: mat(), Gate: mat(), Up: mat(), Down: mat(),
		SharedGate: mat(), SharedUp: mat(), SharedDown: mat(), SharedExpertGate: mat()}
	return l
}
