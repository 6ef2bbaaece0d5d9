package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"petal/engine/cuda/driver"
)

// MoETopK is the routed experts per token the MoE kernels are built for
// (MOE_TOPK in moe.cu; 8 in every model of the family).
const MoETopK = 8

const (
	moeUpWarps   = 8 // MOE_UP_WARPS
	moeUpRows    = 1 // R of the gate/up kernels
	moeDownWarps = 8 // MOE_DOWN_WARPS
)

// MoEWeights are one layer's MoE matrices on the device (spec 2.8): the
// routed expert stacks (Gate and Up of Experts·Inter rows by Hidden
// columns, Down of Experts·Hidden rows by Inter), the shared expert's three
// matrices, and its 8-bit 1×Hidden gate.
type MoEWeights struct {
	Experts, Hidden, Inter           int
	Gate, Up, Down                   *QMatrix
	SharedGate, SharedUp, SharedDown *QMatrix
	SharedExpertGate                 *QMatrix
}

// Bytes is the weight bytes one token's MoE reads: MoETopK routed experts'
// three matrices, the shared expert's and its gate.
func (w *MoEWeights) Bytes() int64 {
	perExpert := (w.Gate.Bytes + w.Up.Bytes + w.Down.Bytes) / int64(w.Experts)
	return MoETopK*perExpert + w.SharedGate.Bytes + w.SharedUp.Bytes + w.SharedDown.Bytes + w.SharedExpertGate.Bytes
}

func (w *MoEWeights) check(sb bool) error {
	E, H, I := w.Experts, w.Hidden, w.Inter
	want := []struct {
		name       string
		m          *QMatrix
		rows, cols int
		bits       int
	}{
		{"gate", w.Gate, E * I, H, 4}, {"up", w.Up, E * I, H, 4}, {"down", w.Down, E * H, I, 4},
		{"shared gate", w.SharedGate, I, H, 4}, {"shared up", w.SharedUp, I, H, 4}, {"shared down", w.SharedDown, H, I, 4},
		{"shared expert gate", w.SharedExpertGate, 1, H, 8},
	}
	if E < MoETopK {
		return fmt.Errorf("cuda: MoE with %d experts: the kernels route to %d", E, MoETopK)
	}
	for _, x := range want {
		if x.m == nil {
			return fmt.Errorf("cuda: MoE: no %s matrix", x.name)
		}
		if x.m.Rows != x.rows || x.m.Cols != x.cols || x.m.Bits != x.bits || x.m.GroupSize != 64 {
			return fmt.Errorf("cuda: MoE %s is %d×%d %d-bit in groups of %d; want %d×%d %d-bit in groups of 64",
				x.name, x.m.Rows, x.m.Cols, x.m.Bits, x.m.GroupSize, x.rows, x.cols, x.bits)
		}
		if sb && x.bits == 4 && x.m.ScaleBias == 0 {
			return fmt.Errorf("cuda: MoE %s: the interleaved scales and biases were not uploaded", x.name)
		}
	}
	return nil
}

// MoEVariant is one compiled form of moe.cu.
type MoEVariant struct {
	Kind QKind
	SB   bool
}

func (v MoEVariant) String() string {
	if v.SB {
		return v.Kind.String() + "_sb"
	}
	return v.Kind.String()
}

// MoEVariants are the variants compiled in moe.cu.
var MoEVariants = []MoEVariant{{QF32, false}, {QF32, true}, {QI8x2, true}, {QI8x3, true}}

// LoadMoEModule loads the MoE kernels embedded in the binary.
func LoadMoEModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "moe")
}

// MoE launches the routed and shared experts of one token: gate and up
// projections with the SwiGLU, then the down projection with the routing
// weights, the gated shared expert and the residual add.
type MoE struct {
	up, down       *driver.Function
	upOcc, downOcc occupancy
	variant        MoEVariant
	// layer8 is moe_layer (the norm, router and experts of a token in one
	// launch) for an 8-bit router, the family's; nil for a variant without
	// it (other than qmv=exact's and qmv=fast's kinds).
	layer8    *driver.Function
	layer8Occ occupancy
	// layerPerSM, where not 0, caps moe_layer's blocks a multiprocessor
	// (measurements).
	layerPerSM int
}

// NewMoE finds variant v in mod.
func NewMoE(c *driver.Context, mod *driver.Module, v MoEVariant) (*MoE, error) {
	up, err := mod.Function("moe_gate_up_" + v.String())
	if err != nil {
		return nil, err
	}
	down, err := mod.Function("moe_down_" + v.String())
	if err != nil {
		return nil, err
	}
	k := &MoE{up: up, down: down, upOcc: newOccupancy(c, up), downOcc: newOccupancy(c, down), variant: v}
	if v.SB && (v.Kind == QI8x3 || v.Kind == QI8x2) {
		if k.layer8, err = mod.Function("moe_layer_" + v.String() + "_r8"); err != nil {
			return nil, err
		}
		k.layer8Occ = newOccupancy(c, k.layer8)
	}
	return k, nil
}

// MoEBuffers are the device vectors of one MoE step: the input x [Hidden]
// (the post-attention norm's output), the router's ids [MoETopK] (int32)
// and weights [MoETopK], the SwiGLU activations H [(MoETopK+1)·Inter], the
// shared expert gate's logit [1], the residual and the output [Hidden]
// (Out may be Resid).
type MoEBuffers struct {
	X, IDs, Weights, H, Logit, Resid, Out driver.Ptr
}

// Launch queues the two kernels on s.
func (k *MoE) Launch(s *driver.Stream, w *MoEWeights, b MoEBuffers) error {
	if err := k.LaunchGateUp(s, w, b); err != nil {
		return err
	}
	return k.LaunchDown(s, w, b)
}

// scaleBias returns the scale and bias pointers m is read through.
func (k *MoE) scaleBias(m *QMatrix) (driver.Ptr, driver.Ptr) {
	if k.variant.SB && m.Bits == 4 {
		return m.ScaleBias, 0
	}
	return m.Scales, m.Biases
}

// LaunchGateUp queues the first kernel: b.H and b.Logit from b.X.
func (k *MoE) LaunchGateUp(s *driver.Stream, w *MoEWeights, b MoEBuffers) error {
	sb := k.variant.SB
	if err := w.check(sb); err != nil {
		return err
	}
	if b.X%16 != 0 || b.H%16 != 0 {
		return fmt.Errorf("cuda: MoE input x (%#x) and activations h (%#x) must be 16-byte aligned", uint64(b.X), uint64(b.H))
	}
	H, I := w.Hidden, w.Inter
	kind := k.variant.Kind

	upShared := kind.stageBytes(H / 64)
	perSM, err := k.upOcc.blocksPerSM(moeUpWarps*32, upShared, fmt.Sprintf("the MoE gate/up kernel with hidden size %d", H))
	if err != nil {
		return err
	}
	upTeam := teamFor(H / 64)
	perBlock := moeUpWarps * (32 / upTeam) * moeUpRows
	tasks := (MoETopK+1)*I + 1 // the last task is the shared expert gate
	grid := min((tasks+perBlock-1)/perBlock, k.upOcc.sms*perSM)
	var a driver.Args
	for _, m := range []*QMatrix{w.Gate, w.Up, w.SharedGate, w.SharedUp, w.SharedExpertGate} {
		s1, b1 := k.scaleBias(m)
		a.Ptr(m.Words).Ptr(s1).Ptr(b1)
	}
	a.Ptr(b.IDs).Ptr(b.X).Ptr(b.H).Ptr(b.Logit).I32(int32(I)).I32(int32(H)).I32(int32(upTeam))
	return s.Launch(k.up, driver.D1(grid), driver.D1(moeUpWarps*32), upShared, &a)
}

// LaunchDown queues the second kernel: b.Out from b.H, b.Logit, the routing
// and b.Resid.
func (k *MoE) LaunchDown(s *driver.Stream, w *MoEWeights, b MoEBuffers) error {
	if err := w.check(k.variant.SB); err != nil {
		return err
	}
	if b.H%16 != 0 {
		return fmt.Errorf("cuda: MoE activations h (%#x) must be 16-byte aligned", uint64(b.H))
	}
	H, I := w.Hidden, w.Inter
	downShared := k.variant.Kind.stageBytes((MoETopK + 1) * I / 64)
	perSM, err := k.downOcc.blocksPerSM(moeDownWarps*32, downShared, fmt.Sprintf("the MoE down kernel with expert size %d", I))
	if err != nil {
		return err
	}
	downTeam := teamFor(I / 64)
	perBlock := moeDownWarps * (32 / downTeam)
	grid := min((H+perBlock-1)/perBlock, k.downOcc.sms*perSM)
	var a driver.Args
	for _, m := range []*QMatrix{w.Down, w.SharedDown} {
		s1, b1 := k.scaleBias(m)
		a.Ptr(m.Words).Ptr(s1).Ptr(b1)
	}
	a.Ptr(b.IDs).Ptr(b.Weights).Ptr(b.Logit).Ptr(b.H).Ptr(b.Resid).Ptr(b.Out).I32(int32(H)).I32(int32(I)).I32(int32(downTeam))
	return s.Launch(k.down, driver.D1(grid), driver.D1(moeDownWarps*32), downShared, &a)
}

// MoELayerBuffers are the device memory of LaunchLayer besides the weights:
// the norm's residual H (H += Delta once read; Delta 0 for none), weight
// NormW and output X (the normed row), the router's Logits scratch
// [Experts] and outputs IDs and Weights [MoETopK], the SwiGLU activations
// Act [(MoETopK+1)·Inter] and the shared gate's Logit [1] (scratch), Resid
// and Out [Hidden], and Counter: 16 bytes, zero when allocated, left as
// found by every complete launch (the router's ticket in the first word,
// the grid barrier in the third and fourth).
type MoELayerBuffers struct {
	H, Delta, NormW, X               driver.Ptr
	Logits, IDs, Weights, Act, Logit driver.Ptr
	Resid, Out, Counter              driver.Ptr
	Eps                              float32
}

// moeLayerArgsSize is sizeof(MoELayerArgs) in moe.cu: 37 pointers, a
// float and 7 ints.
const moeLayerArgsSize = 37*8 + 4 + 7*4

// HasLayer says whether LaunchLayer takes a router of these bits.
func (k *MoE) HasLayer(routerBits int) bool { return routerBits == 8 && k.layer8 != nil }

// layerShape is moe_layer's grid and shared memory for w and router: as
// many blocks as the GPU holds at once (at most two a multiprocessor),
// more than the router's.
func (k *MoE) layerShape(w *MoEWeights, router *QMatrix) (fn *driver.Function, grid, shared, routerBlocks int, err error) {
	fn, occ := k.layer8, &k.layer8Occ
	if fn == nil || router.Bits != 8 {
		return nil, 0, 0, 0, fmt.Errorf("cuda: the one-launch MoE layer is not built for %s weights and a %d-bit router", k.variant, router.Bits)
	}
	kind, E, H, I := k.variant.Kind, w.Experts, w.Hidden, w.Inter
	if router.Rows != E || router.Cols != H || router.GroupSize != 64 || E > 1024 {
		return nil, 0, 0, 0, fmt.Errorf("cuda: a router of %dx%d in groups of %d for %d experts of hidden size %d", router.Rows, router.Cols, router.GroupSize, E, H)
	}
	shared = max(kind.stageBytes(H/64)+8*E, kind.stageBytes((MoETopK+1)*I/64))
	perSM, err := occ.blocksPerSM(moeUpWarps*32, shared, fmt.Sprintf("the one-launch MoE layer with hidden size %d", H))
	if err != nil {
		return nil, 0, 0, 0, err
	}
	routerBlocks = (E + routeWarps - 1) / routeWarps
	perSM = min(perSM, 2)
	if k.layerPerSM > 0 {
		perSM = min(perSM, k.layerPerSM)
	}
	grid = occ.sms * perSM
	if grid <= routerBlocks {
		return nil, 0, 0, 0, fmt.Errorf("cuda: the one-launch MoE layer needs more than %d blocks resident at once; the GPU holds %d", routerBlocks, grid)
	}
	return fn, grid, shared, routerBlocks, nil
}

// LaunchLayer queues moe_layer on s: the add-and-norm of b.H and b.Delta,
// the router's top-MoETopK (weights renormalised over them when
// normalize) and the experts, in one launch whose blocks meet at two
// grid-wide barriers; it writes all that add_rmsnorm, the router and the
// two MoE kernels write, bit for bit.
func (k *MoE) LaunchLayer(s *driver.Stream, w *MoEWeights, router *QMatrix, b MoELayerBuffers, normalize bool) error {
	if err := w.check(k.variant.SB); err != nil {
		return err
	}
	fn, grid, shared, routerBlocks, err := k.layerShape(w, router)
	if err != nil {
		return err
	}
	for _, p := range []driver.Ptr{b.H, b.Act} {
		if p%16 != 0 {
			return fmt.Errorf("cuda: the one-launch MoE layer's h (%#x) and activations (%#x) must be 16-byte aligned", uint64(b.H), uint64(b.Act))
		}
	}
	le := binary.LittleEndian
	buf := make([]byte, 0, moeLayerArgsSize)
	ptr := func(p driver.Ptr) { buf = le.AppendUint64(buf, uint64(p)) }
	for _, p := range []driver.Ptr{b.H, b.Delta, b.NormW, b.X, router.Words, router.Scales, router.Biases,
		b.Logits, b.IDs, b.Weights, b.Counter, b.Counter + 8} {
		ptr(p)
	}
	for _, m := range []*QMatrix{w.Gate, w.Up, w.SharedGate, w.SharedUp, w.SharedExpertGate, w.Down, w.SharedDown} {
		s1, b1 := k.scaleBias(m)
		ptr(m.Words)
		ptr(s1)
		ptr(b1)
	}
	for _, p := range []driver.Ptr{b.Act, b.Logit, b.Resid, b.Out} {
		ptr(p)
	}
	buf = le.AppendUint32(buf, math.Float32bits(b.Eps))
	norm := 0
	if normalize {
		norm = 1
	}
	for _, v := range []int{w.Experts, w.Hidden, w.Inter, norm, teamFor(w.Hidden / 64), teamFor(w.Inter / 64), routerBlocks} {
		buf = le.AppendUint32(buf, uint32(int32(v)))
	}
	if len(buf) != moeLayerArgsSize {
		return fmt.Errorf("cuda: moe_layer's arguments are %d bytes, want %d", len(buf), moeLayerArgsSize)
	}
	var a driver.Args
	a.Struct(buf)
	return s.Launch(fn, driver.D1(grid), driver.D1(moeUpWarps*32), shared, &a)
}
