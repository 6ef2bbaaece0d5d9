package cuda

import (
	"fmt"
	"math"

	"petal/engine/cuda/driver"
)

// The attention kernels are built for heads of 256 dims and 8 query heads
// per KV head (ATT_D, ATT_G in attn.cu: every model of the family).
const (
	AttnHeadDim   = 256
	AttnGroup     = 8
	attnWarps     = 8
	attnSplitSmem = attnWarps*AttnGroup*AttnHeadDim*4 + attnWarps*AttnGroup*2*4
)

// KVType is the element type of a KV cache.
type KVType int

const (
	KVBF16 KVType = iota
	KVF32
)

func (k KVType) String() string { return [...]string{"bf16", "f32"}[k] }

// Bytes is the size of one element.
func (k KVType) Bytes() int { return [...]int{2, 4}[k] }

// LoadAttnModule loads the attention kernels embedded in the binary.
func LoadAttnModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "attn")
}

// Attn launches gated attention of one token (spec 2.4): QKPrep (q/k
// norms, RoPE at the device position, the KV write), then the split
// attention over the cache and the combine with the output gate.
type Attn struct {
	prep, split map[KVType]*driver.Function
	combine     *driver.Function
	// MaxSplits bounds the chunks of the cache per KV head and MinChunk is
	// the fewest rows a chunk takes; the chunks are ceil(n/MinChunk), at
	// most MaxSplits, chosen on the device from the position.
	MaxSplits, MinChunk int
}

// NewAttn finds the kernels in mod, with MaxSplits filling the GPU once for
// two KV heads.
func NewAttn(c *driver.Context, mod *driver.Module) (*Attn, error) {
	k := &Attn{prep: map[KVType]*driver.Function{}, split: map[KVType]*driver.Function{},
		MaxSplits: max(1, c.Device().SMs/2), MinChunk: 64}
	for _, kv := range []KVType{KVBF16, KVF32} {
		var err error
		if k.prep[kv], err = mod.Function("qk_prep_" + kv.String()); err != nil {
			return nil, err
		}
		if k.split[kv], err = mod.Function("attn_split_" + kv.String()); err != nil {
			return nil, err
		}
		if err := k.split[kv].SetMaxDynamicShared(attnSplitSmem); err != nil {
			return nil, err
		}
	}
	var err error
	if k.combine, err = mod.Function("attn_combine"); err != nil {
		return nil, err
	}
	return k, nil
}

// AttnShape is a layer's attention: query and KV heads, rotary dims, the
// RoPE base, the norm epsilon, the cache's rows and element type.
type AttnShape struct {
	QHeads, KVHeads, RotaryDim int
	RopeTheta                  float64
	Eps                        float32
	MaxPos                     int
	KV                         KVType
}

func (sh AttnShape) check() error {
	if sh.KVHeads < 1 || sh.QHeads != AttnGroup*sh.KVHeads {
		return fmt.Errorf("cuda: attention with %d query heads on %d KV heads: the kernels take %d query heads per KV head", sh.QHeads, sh.KVHeads, AttnGroup)
	}
	if sh.RotaryDim < 2 || sh.RotaryDim%2 != 0 || sh.RotaryDim > AttnHeadDim {
		return fmt.Errorf("cuda: attention rotary dims %d: want an even number up to %d", sh.RotaryDim, AttnHeadDim)
	}
	return nil
}

// InvFreq is the RoPE table the prep kernel reads: theta^(-2i/rot) for i
// < rot/2, in float64 (the device multiplies by the position in float64).
func (sh AttnShape) InvFreq() []float64 {
	f := make([]float64, sh.RotaryDim/2)
	for i := range f {
		f[i] = math.Pow(sh.RopeTheta, -float64(2*i)/float64(sh.RotaryDim))
	}
	return f
}

// PartialsBytes is the scratch the split kernel leaves its chunks' states
// in, for k.MaxSplits.
func (k *Attn) PartialsBytes(sh AttnShape) (o, ml int64) {
	n := int64(sh.KVHeads * k.MaxSplits * AttnGroup)
	return 4 * n * AttnHeadDim, 4 * n * 2
}

// AttnBuffers are one layer's device vectors: QG [QHeads·512] (each query
// then its gate), K and V [KVHeads·256], the norm weights QNorm, KNorm
// [256], InvFreq (float64, AttnShape.InvFreq), the prepared queries Q
// [QHeads·256], the caches [MaxPos][KVHeads][256], Pos (int32 [1]), the
// partials (PartialsBytes) and Out [QHeads·256].
type AttnBuffers struct {
	QG, K, V, QNorm, KNorm, InvFreq, Q, KCache, VCache, Pos, PartO, PartML, Out driver.Ptr
}

// Launch queues the three kernels on s.
func (k *Attn) Launch(s *driver.Stream, sh AttnShape, b AttnBuffers) error {
	if err := k.LaunchPrep(s, sh, b); err != nil {
		return err
	}
	return k.LaunchAttention(s, sh, b)
}

// LaunchPrep queues QKPrep: b.Q, and row *Pos of the caches.
func (k *Attn) LaunchPrep(s *driver.Stream, sh AttnShape, b AttnBuffers) error {
	if err := sh.check(); err != nil {
		return err
	}
	var a driver.Args
	k.prepArgs(&a, sh, b)
	return s.Launch(k.prep[sh.KV], driver.D1(sh.QHeads+sh.KVHeads), driver.D1(AttnHeadDim), 0, &a)
}

// prepArgs are qk_prep's arguments (attn_shadow.cu's form takes the
// shadows after them).
func (k *Attn) prepArgs(a *driver.Args, sh AttnShape, b AttnBuffers) {
	a.Ptr(b.QG).Ptr(b.K).Ptr(b.V).Ptr(b.QNorm).Ptr(b.KNorm).Ptr(b.Q).Ptr(b.KCache).Ptr(b.VCache).Ptr(b.Pos).
		I32(int32(sh.MaxPos)).Ptr(b.InvFreq).I32(int32(sh.QHeads)).I32(int32(sh.KVHeads)).I32(int32(sh.RotaryDim)).F32(sh.Eps)
}

// LaunchAttention queues the split attention over rows 0..*Pos and the
// combine into b.Out.
func (k *Attn) LaunchAttention(s *driver.Stream, sh AttnShape, b AttnBuffers) error {
	if err := sh.check(); err != nil {
		return err
	}
	if k.MaxSplits < 1 || k.MinChunk < 1 {
		return fmt.Errorf("cuda: attention with %d splits of at least %d rows", k.MaxSplits, k.MinChunk)
	}
	for _, p := range []driver.Ptr{b.KCache, b.VCache, b.Q} {
		if p%16 != 0 {
			return fmt.Errorf("cuda: attention buffer at %#x is not 16-byte aligned", uint64(p))
		}
	}
	var a driver.Args
	a.Ptr(b.Q).Ptr(b.KCache).Ptr(b.VCache).Ptr(b.Pos).Ptr(b.PartO).Ptr(b.PartML).I32(int32(sh.KVHeads)).
		I32(int32(k.MaxSplits)).I32(int32(k.MinChunk))
	if err := s.Launch(k.split[sh.KV], driver.D1(sh.KVHeads*k.MaxSplits), driver.D1(attnWarps*32), attnSplitSmem, &a); err != nil {
		return err
	}
	a.Reset().Ptr(b.PartO).Ptr(b.PartML).Ptr(b.QG).Ptr(b.Pos).Ptr(b.Out).I32(int32(k.MaxSplits)).I32(int32(k.MinChunk))
	return s.Launch(k.combine, driver.D1(sh.QHeads), driver.D1(AttnHeadDim), 0, &a)
}
