package backend

// The op set. Each op's comment gives the unfused computation it equals
// (spec sections in /shared/spec/model.md); buffers are row-major and
// "rows" is the number of tokens in the chunk. Every op carries a label
// (Labeled) that says where the model recorded it.

// Labeled is the label of an op, embedded in every op: where the model
// recorded it, like "L3.attn.q_proj" (layer 3's full attention), "L0.delta.rule",
// "L5.moe.experts" or "head.logits". Profiles and traces name ops by it;
// it changes nothing an op computes.
type Labeled struct {
	Label string
}

// OpLabel is the op's label ("" when none was given).
func (l *Labeled) OpLabel() string { return l.Label }

// SetLabel sets the op's label.
func (l *Labeled) SetLabel(s string) { l.Label = s }

// LabelOf is the label of op, or its name when it has none.
func LabelOf(op Op) string {
	if l, ok := op.(interface{ OpLabel() string }); ok && l.OpLabel() != "" {
		return l.OpLabel()
	}
	return op.Name()
}

// Embed: Out[i] = Table[Tokens[i]] (dequantised row), i < Rows. (2.1)
type Embed struct {
	Labeled
	Tokens Buffer // int [Rows]
	Table  Matrix // [vocab, dim]
	Out    Buffer // [Rows, dim]
	Rows   int
}

// AddRMSNorm: if Delta is set, H += Delta; then Out = H / rms(H) * Weight per
// row. The weight is used as stored (MLX files hold 1+w already). (2.2a, 2.3)
type AddRMSNorm struct {
	Labeled
	H, Delta Buffer // [Rows, Dim]; Delta may be the zero Buffer
	Weight   Buffer // [Dim]
	Out      Buffer // [Rows, Dim]
	Rows     int
	Dim      int
	Eps      float32
}

// QLinear: Y = X · Wᵀ with W affine-quantised, dequantised in the loop. (3.4)
type QLinear struct {
	Labeled
	X    Buffer // [Rows, W.cols]
	W    Matrix
	Y    Buffer // [Rows, W.rows]
	Rows int
}

// QLinearGroup: the projections of one input by several matrices of the
// same width, the outputs side by side: Y holds X·W[0]ᵀ ([Rows, rows of
// W[0]]), then X·W[1]ᵀ, and so on, each block row-major. It equals one
// QLinear per matrix into consecutive views of Y; a backend may run it as
// one pass (a decode step's q, k, v, or qkv, z, b, a projections read one
// input, laid out once).
type QLinearGroup struct {
	Labeled
	X    Buffer // [Rows, cols]
	W    []Matrix
	Y    Buffer // [Σ Rows*rows of W[i]]
	Rows int
}

// Offsets are where each matrix's block starts in Y, and Y's length last.
func (o *QLinearGroup) Offsets() []int {
	off := make([]int, len(o.W)+1)
	for i, w := range o.W {
		s := w.Shape()
		off[i+1] = off[i] + o.Rows*s.Rows*max(s.Experts, 1)
	}
	return off
}

// ConvSiLU: causal depthwise convolution of width K over [State; X] with the
// taps in Weight[c][0..K) (tap K-1 multiplies the current token), then SiLU.
// State (the K-1 previous pre-conv rows, oldest first) is advanced. (2.5.2)
type ConvSiLU struct {
	Labeled
	X      Buffer // [Rows, Channels] pre-conv projections
	State  Buffer // [K-1, Channels]
	Weight Buffer // [Channels, K]
	Out    Buffer // [Rows, Channels]
	Rows   int
	Chans  int
	K      int
}

// DeltaRule is the gated delta rule of Gated DeltaNet (2.5 steps 3-7):
// split QKV into q, k (KeyHeads x KeyDim each) and v (ValueHeads x
// ValueDim); L2-normalise q and k per head and scale q by KeyDim^-1/2;
// value head j uses key head j/(ValueHeads/KeyHeads); beta = sigmoid(B),
// g = exp(-exp(ALog) * softplus(A + DtBias)); then per token, in float32:
// S = g*S; d = beta*(v - S·k); S += d⊗k; Out = S·q.
type DeltaRule struct {
	Labeled
	QKV    Buffer // [Rows, 2*KeyHeads*KeyDim + ValueHeads*ValueDim] after ConvSiLU
	B, A   Buffer // [Rows, ValueHeads] raw projections
	ALog   Buffer // [ValueHeads]
	DtBias Buffer // [ValueHeads]
	State  Buffer // [ValueHeads, ValueDim, KeyDim] float32 recurrent state
	Out    Buffer // [Rows, ValueHeads*ValueDim]
	Rows   int

	KeyHeads, KeyDim, ValueHeads, ValueDim int
}

// GatedRMSNorm: per head of Dim values, Out = X/rms(X) * Weight * silu(Z). (2.2b)
type GatedRMSNorm struct {
	Labeled
	X, Z   Buffer // [Rows, Heads*Dim]
	Weight Buffer // [Dim]
	Out    Buffer
	Rows   int
	Heads  int
	Dim    int
	Eps    float32
}

// QKPrep prepares gated attention's queries and keys (2.4 steps 1-5): the
// query of head h is QG[h*2*HeadDim : h*2*HeadDim+HeadDim] (its gate follows
// it); q and k get their RMSNorm (weights as stored), then RoPE on the first
// RotaryDim dims with pairs (i, i+RotaryDim/2) at positions p+t, where p is
// the value of Pos; k and v are written to the caches at rows p..p+Rows-1.
// The angle of pair i at position P is P·RopeTheta^(-2i/RotaryDim) computed
// in float64 (or as exactly: at 128K positions a float32 product is off by
// hundredths of a radian), its sine and cosine rounded once.
type QKPrep struct {
	Labeled
	QG     Buffer // [Rows, QHeads*2*HeadDim]
	K, V   Buffer // [Rows, KVHeads*HeadDim]
	QNorm  Buffer // [HeadDim]
	KNorm  Buffer // [HeadDim]
	Q      Buffer // out: [Rows, QHeads*HeadDim]
	KCache Buffer // [MaxPos, KVHeads*HeadDim]
	VCache Buffer
	Pos    Buffer // i32 [1]: the position of row 0
	Rows   int

	QHeads, KVHeads, HeadDim, RotaryDim int
	RopeTheta                           float64
	Eps                                 float32
}

// Attention: causal GQA over the cache (row t, at position p+t where p is
// the value of Pos, attends to cache rows 0..p+t; query head h reads KV
// head h/(QHeads/KVHeads)), softmax(q·k/sqrt(HeadDim)) in float32, times
// sigmoid(gate) where the gate of head h follows its query in QG. (2.4 6-7)
type Attention struct {
	Labeled
	Q      Buffer // [Rows, QHeads*HeadDim]
	QG     Buffer // [Rows, QHeads*2*HeadDim], read for the gates
	KCache Buffer
	VCache Buffer
	Out    Buffer // [Rows, QHeads*HeadDim]
	Pos    Buffer // i32 [1]: the position of row 0
	Rows   int

	QHeads, KVHeads, HeadDim int
}

// Route: logits = X·Routerᵀ, p = softmax(logits) over all experts, the TopK
// largest (lower index first on ties), weights p/Σ_selected p when
// Normalize. (2.8 steps 1-2)
type Route struct {
	Labeled
	X         Buffer // [Rows, Dim]
	Router    Matrix // [Experts, Dim]
	Idx       Buffer // int [Rows, TopK]
	Weights   Buffer // [Rows, TopK]
	Rows      int
	TopK      int
	Normalize bool
}

// Experts: Out = Σ_k Weights[k] · down_e(silu(gate_e·x) ⊙ up_e·x) over the
// routed experts e = Idx[k], plus sigmoid(SharedGate·x) · the shared expert
// with the same SwiGLU form. (2.8 steps 3-6)
type Experts struct {
	Labeled
	X                  Buffer // [Rows, Dim]
	Idx                Buffer // int [Rows, TopK]
	Weights            Buffer // [Rows, TopK]
	Gate, Up, Down     Matrix // stacked [Experts, Inter, Dim] / [Experts, Dim, Inter]
	SharedGate         Matrix // [SharedInter, Dim]
	SharedUp           Matrix
	SharedDown         Matrix // [Dim, SharedInter]
	SharedExpertGate   Matrix // [1, Dim]
	Out                Buffer // [Rows, Dim]
	Rows, TopK         int
	Inter, SharedInter int
}

// Advance: Pos += By, the last op of a program that moved a sequence on by
// By tokens.
type Advance struct {
	Labeled
	Pos Buffer // i32 [1]
	By  int
}

func (o *Embed) Name() string        { return "Embed" }
func (o *Advance) Name() string      { return "Advance" }
func (o *AddRMSNorm) Name() string   { return "AddRMSNorm" }
func (o *QLinear) Name() string      { return "QLinear" }
func (o *QLinearGroup) Name() string { return "QLinearGroup" }
func (o *ConvSiLU) Name() string     { return "ConvSiLU" }
func (o *DeltaRule) Name() string    { return "DeltaRule" }
func (o *GatedRMSNorm) Name() string { return "GatedRMSNorm" }
func (o *QKPrep) Name() string       { return "QKPrep" }
func (o *Attention) Name() string    { return "Attention" }
func (o *Route) Name() string        { return "Route" }
func (o *Experts) Name() string      { return "Experts" }

func (o *Embed) Access() (r, w []Buffer) { return []Buffer{o.Tokens}, []Buffer{o.Out} }
func (o *AddRMSNorm) Access() (r, w []Buffer) {
	if o.Delta.Mem != nil {
		return []Buffer{o.H, o.Delta, o.Weight}, []Buffer{o.H, o.Out}
	}
	return []Buffer{o.H, o.Weight}, []Buffer{o.Out}
}
func (o *QLinear) Access() (r, w []Buffer)      { return []Buffer{o.X}, []Buffer{o.Y} }
func (o *QLinearGroup) Access() (r, w []Buffer) { return []Buffer{o.X}, []Buffer{o.Y} }
func (o *ConvSiLU) Access() (r, w []Buffer) {
	return []Buffer{o.X, o.State, o.Weight}, []Buffer{o.Out, o.State}
}
func (o *DeltaRule) Access() (r, w []Buffer) {
	return []Buffer{o.QKV, o.B, o.A, o.ALog, o.DtBias, o.State}, []Buffer{o.State, o.Out}
}
func (o *GatedRMSNorm) Access() (r, w []Buffer) {
	return []Buffer{o.X, o.Z, o.Weight}, []Buffer{o.Out}
}
func (o *QKPrep) Access() (r, w []Buffer) {
	return []Buffer{o.QG, o.K, o.V, o.QNorm, o.KNorm, o.Pos}, []Buffer{o.Q, o.KCache, o.VCache}
}
func (o *Attention) Access() (r, w []Buffer) {
	return []Buffer{o.Q, o.QG, o.KCache, o.VCache, o.Pos}, []Buffer{o.Out}
}
func (o *Advance) Access() (r, w []Buffer) { return []Buffer{o.Pos}, []Buffer{o.Pos} }
func (o *Route) Access() (r, w []Buffer)   { return []Buffer{o.X}, []Buffer{o.Idx, o.Weights} }
func (o *Experts) Access() (r, w []Buffer) {
	return []Buffer{o.X, o.Idx, o.Weights}, []Buffer{o.Out}
}
