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
	// routeUp8 and routeDown are moe_route.cu's moe_route_up_<variant>_r8
	// and moe_route_down_<variant> (AddRouteForms; moelayer=cluster); nil
	// until then, or for a variant without them.
	routeUp8, routeDown      *driver.Function
	routeUpOcc, routeDownOcc occupancy
}

// LoadMoERouteModule loads moe_route.cu's MoE block in two launches, the
// router inside the gate/up launch's clusters (moelayer=cluster).
func LoadMoERouteModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "moe_route")
}

// AddRouteForms finds moe_route.cu's kernels for k's variant in mod
// (LoadMoERouteModule); a variant they are not built for (other than
// qmv=exact's and qmv=fast's kinds) keeps none, and LaunchRouteUp says so.
func (k *MoE) AddRouteForms(c *driver.Context, mod *driver.Module) error {
	v := k.variant
	if !v.SB || (v.Kind != QI8x3 && v.Kind != QI8x2) {
		return nil
	}
	up, err := mod.Function("moe_route_up_" + v.String() + "_r8")
	if err != nil {
		return err
	}
	down, err := mod.Function("moe_route_down_" + v.String())
	if err != nil {
		return err
	}
	k.routeUp8, k.routeDown = up, down
	k.routeUpOcc, k.routeDownOcc = newOccupancy(c, up), newOccupancy(c, down)
	return nil
}

// moeRouteCluster is MR_BLOCKS in moe_route.cu: moe_route_up's cluster,
// each block computing the logits of an eighth of the experts.
const moeRouteCluster = 8

// routeUpShared is moe_route_up's dynamic shared memory: the staged x, x
// again for the router (68 floats a group of 64, from a 16-byte boundary),
// the block's logits, and all the logits and the selection's candidates.
func routeUpShared(kind QKind, E, H int) int {
	return (kind.stageBytes(H/64)+15)&^15 + 4*(H/64*68+E/moeRouteCluster+2*E)
}

// routeUpGrid is moe_route_up's grid for tasks row tasks at perBlock a
// block, resident blocks at once: a block a perBlock tasks up to what the
// GPU holds, in whole clusters, at least one (the blocks loop over the
// tasks, so fewer than the tasks need is fine; every cluster computes the
// router, so more clusters than the GPU holds would only repeat it).
func routeUpGrid(tasks, perBlock, resident int) int {
	grid := min((tasks+perBlock-1)/perBlock, resident)
	return max(grid/moeRouteCluster, 1) * moeRouteCluster
}

// routeLayerFits says why moelayer=cluster does not take w and router
// (nil where it does): an 8-bit router in groups of 64 of experts a
// multiple of moeRouteCluster, at most 1024, over the hidden size, and
// the variants of qmv=exact and qmv=fast.
func (k *MoE) routeLayerFits(w *MoEWeights, router *QMatrix) error {
	if k.routeUp8 == nil {
		return fmt.Errorf("cuda: moelayer=cluster is not built for %s weights (qmv=exact's and qmv=fast's kinds, or not loaded)", k.variant)
	}
	E, H := w.Experts, w.Hidden
	if router.Bits != 8 || router.GroupSize != 64 || router.Rows != E || router.Cols != H || E%moeRouteCluster != 0 || E > 1024 {
		return fmt.Errorf("cuda: moelayer=cluster does not take a %d-bit router of %dx%d in groups of %d for %d experts of hidden size %d "+
			"(an 8-bit router in groups of 64, experts a multiple of %d, at most 1024)",
			router.Bits, router.Rows, router.Cols, router.GroupSize, E, H, moeRouteCluster)
	}
	return nil
}

// routeLayerArgs checks w, router and b for moelayer=cluster's kernels
// and packs their operands (layerArgs).
func (k *MoE) routeLayerArgs(w *MoEWeights, router *QMatrix, b MoELayerBuffers, normalize bool) ([]byte, error) {
	if err := w.check(k.variant.SB); err != nil {
		return nil, err
	}
	if err := k.routeLayerFits(w, router); err != nil {
		return nil, err
	}
	if b.Act%16 != 0 {
		return nil, fmt.Errorf("cuda: moelayer=cluster: the activations (%#x) must be 16-byte aligned", uint64(b.Act))
	}
	return k.layerArgs(w, router, b, normalize, 0)
}

// LaunchRouteUp queues moe_route_up on s (moelayer=cluster): the
// add-and-norm of b.H and b.Delta (the sum not written back: LaunchRouteDown
// does that), the router's top-MoETopK in every cluster (b.Logits, b.IDs,
// b.Weights and the normed row b.X written once), and the experts' gate/up
// rows into b.Act and b.Logit.
func (k *MoE) LaunchRouteUp(s *driver.Stream, w *MoEWeights, router *QMatrix, b MoELayerBuffers, normalize bool) error {
	buf, err := k.routeLayerArgs(w, router, b, normalize)
	if err != nil {
		return err
	}
	if b.H%16 != 0 {
		return fmt.Errorf("cuda: moelayer=cluster: h (%#x) must be 16-byte aligned", uint64(b.H))
	}
	E, H, I := w.Experts, w.Hidden, w.Inter
	shared := routeUpShared(k.variant.Kind, E, H)
	perSM, err := k.routeUpOcc.blocksPerSM(moeUpWarps*32, shared, fmt.Sprintf("the MoE gate/up kernel with its router, hidden size %d", H))
	if err != nil {
		return err
	}
	perBlock := moeUpWarps * (32 / teamFor(H/64)) * moeUpRows
	tasks := (MoETopK+1)*I + 1
	grid := routeUpGrid(tasks, perBlock, k.routeUpOcc.sms*perSM)
	var a driver.Args
	a.Struct(buf)
	return s.LaunchCluster(k.routeUp8, driver.D1(grid), driver.D1(moeUpWarps*32), driver.D1(moeRouteCluster), shared, &a)
}

// LaunchRouteDown queues moe_route_down on s, after LaunchRouteUp: b.Out
// from the activations and the routing, and the norm's sum, b.H += b.Delta.
func (k *MoE) LaunchRouteDown(s *driver.Stream, w *MoEWeights, router *QMatrix, b MoELayerBuffers, normalize bool) error {
	buf, err := k.routeLayerArgs(w, router, b, normalize)
	if err != nil {
		return err
	}
	H, I := w.Hidden, w.Inter
	shared := k.variant.Kind.stageBytes((MoETopK + 1) * I / 64)
	perSM, err := k.routeDownOcc.blocksPerSM(moeDownWarps*32, shared, fmt.Sprintf("the MoE down kernel with the norm's sum, expert size %d", I))
	if err != nil {
		return err
	}
	perBlock := moeDownWarps * (32 / teamFor(I/64))
	grid := min((H+perBlock-1)/perBlock, k.routeDownOcc.sms*perSM)
	var a driver.Args
	a.Struct(buf)
	return s.Launch(k.routeDown, driver.D1(grid), driver.D1(moeDownWarps*32), shared, &a)
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
	buf, err := k.layerArgs(w, router, b, normalize, routerBlocks)
	if err != nil {
		return err
	}
	var a driver.Args
	a.Struct(buf)
	return s.Launch(fn, driver.D1(grid), driver.D1(moeUpWarps*32), shared, &a)
}

// layerArgs packs MoELayerArgs (moe.cu) for moe_layer and moe_route.cu's
// kernels (which leave the ticket, the barrier and routerBlocks unused).
func (k *MoE) layerArgs(w *MoEWeights, router *QMatrix, b MoELayerBuffers, normalize bool, routerBlocks int) ([]byte, error) {
	le := binary.LittleEndian
	buf := make([]byte, 0, moeLayerArgsSize)
	ptr := func(p driver.Ptr) { buf = le.AppendUint64(buf, uint64(p)) }
	bar := driver.Ptr(0) // moe_layer's grid barrier; moe_route.cu's kernels have no counter
	if b.Counter != 0 {
		bar = b.Counter + 8
	}
	for _, p := range []driver.Ptr{b.H, b.Delta, b.NormW, b.X, router.Words, router.Scales, router.Biases,
		b.Logits, b.IDs, b.Weights, b.Counter, bar} {
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
		return nil, fmt.Errorf("cuda: moe_layer's arguments are %d bytes, want %d", len(buf), moeLayerArgsSize)
	}
	return buf, nil
}
