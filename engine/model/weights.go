package model

import (
	"errors"
	"fmt"
	"slices"

	"petal/engine/backend"
	"petal/engine/checkpoint"
)

// Weights of the whole model, bound once; afterwards the forward pass uses
// fields, never tensor names.
type Weights struct {
	Embed     backend.Matrix // [vocab, hidden]
	FinalNorm backend.Buffer // [hidden], stored as 1+w
	LMHead    backend.Matrix // [vocab, hidden]; the embedding when tied
	Layers    []Layer
}

// Layer is one decoder layer: a token mixer (exactly one of Attn, DeltaNet)
// and a mixture of experts, each behind a zero-centred RMSNorm.
type Layer struct {
	InputNorm, PostNorm backend.Buffer
	Attn                *AttnWeights
	DeltaNet            *DeltaNetWeights
	MoE                 MoEWeights
}

// AttnWeights of a gated full-attention layer.
type AttnWeights struct {
	QProj, KProj, VProj, OProj backend.Matrix
	QNorm, KNorm               backend.Buffer
}

// DeltaNetWeights of a Gated DeltaNet layer.
type DeltaNetWeights struct {
	InQKV, InZ, InB, InA, OutProj backend.Matrix
	Conv                          backend.Buffer // [channels, K]
	DtBias, ALog                  backend.Buffer // [value heads]
	Norm                          backend.Buffer // [value dim], used as stored
}

// MoEWeights: the router, the stacked routed experts and the gated shared expert.
type MoEWeights struct {
	Router                           backend.Matrix
	Gate, Up, Down                   backend.Matrix
	SharedGate, SharedUp, SharedDown backend.Matrix
	SharedExpertGate                 backend.Matrix
}

// binder takes tensors from a checkpoint by name, checks their shapes and
// uploads them, collecting the problems so the user sees them at once (the
// first maxBindErrors of them, and how many more there were).
type binder struct {
	ck   *checkpoint.Checkpoint
	be   backend.Backend
	errs []error
	more int // problems past maxBindErrors
}

const maxBindErrors = 20

func (b *binder) fail(err error) {
	if len(b.errs) < maxBindErrors {
		b.errs = append(b.errs, err)
	} else {
		b.more++
	}
}

// err joins the problems, one per line.
func (b *binder) err() error {
	if b.more > 0 {
		return errors.Join(append(b.errs, fmt.Errorf("model: and %d more problems", b.more))...)
	}
	return errors.Join(b.errs...)
}

func (b *binder) matrix(module string, experts, rows, cols int) backend.Matrix {
	m, err := b.ck.TakeQuant(module, experts, rows, cols)
	if err != nil {
		b.fail(err)
		return nil
	}
	dm, err := b.be.Upload(m)
	if err != nil {
		b.fail(fmt.Errorf("model: %s: %w", module, err))
	}
	return dm
}

func (b *binder) vector(name string, shape ...int) backend.Buffer {
	t, err := b.ck.Take(name)
	if err != nil {
		b.fail(err)
		return backend.Buffer{}
	}
	if !slices.Equal(t.Shape, shape) {
		b.fail(fmt.Errorf("model: tensor %s has shape %v, want %v", name, t.Shape, shape))
		return backend.Buffer{}
	}
	v := t.Float32s()
	buf, err := backend.AllocFloats(b.be, backend.F32, v)
	if err != nil {
		b.errs = append(b.errs, fmt.Errorf("model: %s: %w", name, err))
	}
	return buf
}

// BindWeights binds every tensor of the text model, strictly: a missing or
// misshapen tensor, or one left over, is an error naming it.
func BindWeights(ck *checkpoint.Checkpoint, be backend.Backend, d Dims) (*Weights, error) {
	if err := ck.RequireQuantized(); err != nil {
		return nil, err
	}
	b := &binder{ck: ck, be: be}
	H := d.Hidden
	w := &Weights{
		Embed:     b.matrix("model.embed_tokens", 0, d.Vocab, H),
		FinalNorm: b.vector("model.norm.weight", H),
	}
	if ck.Config.TieWordEmbeddings {
		w.LMHead = w.Embed
	} else {
		w.LMHead = b.matrix("lm_head", 0, d.Vocab, H)
	}
	for i := 0; i < d.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		l := Layer{
			InputNorm: b.vector(p+"input_layernorm.weight", H),
			PostNorm:  b.vector(p+"post_attention_layernorm.weight", H),
		}
		if d.Full[i] {
			a := p + "self_attn."
			l.Attn = &AttnWeights{
				QProj: b.matrix(a+"q_proj", 0, d.QHeads*d.HeadDim*2, H),
				KProj: b.matrix(a+"k_proj", 0, d.KVHeads*d.HeadDim, H),
				VProj: b.matrix(a+"v_proj", 0, d.KVHeads*d.HeadDim, H),
				OProj: b.matrix(a+"o_proj", 0, H, d.QHeads*d.HeadDim),
				QNorm: b.vector(a+"q_norm.weight", d.HeadDim),
				KNorm: b.vector(a+"k_norm.weight", d.HeadDim),
			}
		} else {
			g := p + "linear_attn."
			l.DeltaNet = &DeltaNetWeights{
				InQKV:   b.matrix(g+"in_proj_qkv", 0, d.ConvChannels(), H),
				InZ:     b.matrix(g+"in_proj_z", 0, d.ValueWidth(), H),
				InB:     b.matrix(g+"in_proj_b", 0, d.ValueHeads, H),
				InA:     b.matrix(g+"in_proj_a", 0, d.ValueHeads, H),
				OutProj: b.matrix(g+"out_proj", 0, H, d.ValueWidth()),
				// MLX layout [C, K, 1]: w[c][j] = t[c][j][0]
				Conv:   b.vector(g+"conv1d.weight", d.ConvChannels(), d.ConvK, 1),
				DtBias: b.vector(g+"dt_bias", d.ValueHeads),
				ALog:   b.vector(g+"A_log", d.ValueHeads),
				Norm:   b.vector(g+"norm.weight", d.ValueDim),
			}
		}
		m := p + "mlp."
		l.MoE = MoEWeights{
			Router:           b.matrix(m+"gate", 0, d.Experts, H),
			Gate:             b.matrix(m+"switch_mlp.gate_proj", d.Experts, d.Inter, H),
			Up:               b.matrix(m+"switch_mlp.up_proj", d.Experts, d.Inter, H),
			Down:             b.matrix(m+"switch_mlp.down_proj", d.Experts, H, d.Inter),
			SharedGate:       b.matrix(m+"shared_expert.gate_proj", 0, d.SharedInter, H),
			SharedUp:         b.matrix(m+"shared_expert.up_proj", 0, d.SharedInter, H),
			SharedDown:       b.matrix(m+"shared_expert.down_proj", 0, H, d.SharedInter),
			SharedExpertGate: b.matrix(m+"shared_expert_gate", 0, 1, H),
		}
		w.Layers = append(w.Layers, l)
	}
	for _, name := range ck.Unused() {
		b.fail(fmt.Errorf("model: extra tensor %s (not part of this model)", name))
	}
	if len(b.errs) > 0 {
		return nil, b.err()
	}
	return w, nil
}
