package cuda

import (
	"fmt"

	"petal/engine/cuda/driver"
)

const routeWarps = 8 // ROUTE_WARPS in route.cu

// LoadRouteModule loads the router kernels embedded in the binary.
func LoadRouteModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "route")
}

// Route launches the MoE router of one token (spec 2.8 steps 1-2): the
// router mat-vec, the top-k experts (the lower id first on ties) and their
// softmax weights, in one kernel whose last block selects.
type Route struct {
	fn4, fn8     *driver.Function
	norm4, norm8 *driver.Function // route_norm4/8: the add-and-norm first
}

// NewRoute finds the router kernels in mod.
func NewRoute(mod *driver.Module) (*Route, error) {
	fn4, err := mod.Function("route4")
	if err != nil {
		return nil, err
	}
	fn8, err := mod.Function("route8")
	if err != nil {
		return nil, err
	}
	r := &Route{fn4: fn4, fn8: fn8}
	if r.norm4, err = mod.Function("route_norm4"); err != nil {
		return nil, err
	}
	if r.norm8, err = mod.Function("route_norm8"); err != nil {
		return nil, err
	}
	return r, nil
}

// RouteNorm is the add-and-norm LaunchNorm does before routing (an
// AddRMSNorm of one row): H += Delta (Delta 0: none), X = H/rms(H)·W
// written to Out, Eps in the rms.
type RouteNorm struct {
	H, Delta, W, Out driver.Ptr
	Eps              float32
}

// LaunchNorm is Launch with the add-and-norm of n first, in the same
// kernel: x is computed from n (bit for bit what add_rmsnorm writes) and
// written to n.Out with the sum to n.H; b.X is not read.
func (k *Route) LaunchNorm(s *driver.Stream, router *QMatrix, b RouteBuffers, n RouteNorm, topK int, normalize bool) error {
	fn, grid, norm, err := k.shape(router, topK, normalize)
	if err != nil {
		return err
	}
	fn = k.norm4
	if router.Bits == 8 {
		fn = k.norm8
	}
	E, C := router.Rows, router.Cols
	var a driver.Args
	a.Ptr(router.Words).Ptr(router.Scales).Ptr(router.Biases).Ptr(n.H).Ptr(n.Delta).Ptr(n.W).Ptr(n.Out).F32(n.Eps).
		Ptr(b.Logits).Ptr(b.IDs).Ptr(b.Weights).Ptr(b.Counter).I32(int32(E)).I32(int32(C)).I32(int32(topK)).I32(norm)
	return s.Launch(fn, driver.D1(grid), driver.D1(routeWarps*32), routeShared(C, E), &a)
}

// RouteBuffers are the device vectors of one routing: the input X [Cols],
// Logits [Experts] (scratch the kernel's blocks meet in, left holding the
// logits), Counter (one u32, zero when allocated, left as found by every
// complete launch; one per stream the router runs on), and the outputs IDs
// (int32) and Weights [TopK], which the MoE kernels read.
type RouteBuffers struct {
	X, Logits, Counter, IDs, Weights driver.Ptr
}

// Launch queues the routing of b.X by router on s: topK experts, the
// weights renormalised over them when normalize.
func (k *Route) Launch(s *driver.Stream, router *QMatrix, b RouteBuffers, topK int, normalize bool) error {
	fn, grid, norm, err := k.shape(router, topK, normalize)
	if err != nil {
		return err
	}
	E, C := router.Rows, router.Cols
	var a driver.Args
	a.Ptr(router.Words).Ptr(router.Scales).Ptr(router.Biases).Ptr(b.X).Ptr(b.Logits).Ptr(b.IDs).Ptr(b.Weights).Ptr(b.Counter).
		I32(int32(E)).I32(int32(C)).I32(int32(topK)).I32(norm)
	return s.Launch(fn, driver.D1(grid), driver.D1(routeWarps*32), routeShared(C, E), &a)
}

// routeFits says whether the router kernels take a router and a top-k:
// 4- or 8-bit weights in groups of 64, 1 to min(32, experts) chosen of at
// most 1024 experts, x, the logits and their keys within 48 KB of shared memory.
func routeFits(router *QMatrix, topK int) bool {
	E, C := router.Rows, router.Cols
	return router.GroupSize == 64 && (router.Bits == 4 || router.Bits == 8) && topK >= 1 && topK <= 32 && topK <= E &&
		E <= 1024 && routeShared(C, E) <= 48<<10
}

// routeShared is the dynamic shared memory of the router kernels: x (68
// floats a group of 64), the logits and the selection's candidates.
func routeShared(C, E int) int { return 4 * (C/64*68 + 2*E) }

// shape checks a routing the kernels take and gives the plain kernel for
// the router's bits, the grid and the normalize flag.
func (k *Route) shape(router *QMatrix, topK int, normalize bool) (*driver.Function, int, int32, error) {
	if router.GroupSize != 64 || (router.Bits != 4 && router.Bits != 8) {
		return nil, 0, 0, fmt.Errorf("cuda: router of %d-bit weights in groups of %d is not built (4 or 8 bits in groups of 64)", router.Bits, router.GroupSize)
	}
	E := router.Rows
	if topK < 1 || topK > 32 || topK > E {
		return nil, 0, 0, fmt.Errorf("cuda: router top-%d of %d experts: the kernel selects 1 to min(32, experts)", topK, E)
	}
	if E > 1024 {
		return nil, 0, 0, fmt.Errorf("cuda: router with %d experts: the kernel takes at most 1024", E)
	}
	fn := k.fn4
	if router.Bits == 8 {
		fn = k.fn8
	}
	norm := int32(0)
	if normalize {
		norm = 1
	}
	return fn, (E + routeWarps - 1) / routeWarps, norm, nil
}
