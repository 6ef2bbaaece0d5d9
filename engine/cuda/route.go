package cuda

import (
	"fmt"

	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
)

const routeWarps = 8 // ROUTE_WARPS in route.cu

// LoadRouteModule loads the router kernels embedded in the binary.
func LoadRouteModule(c *driver.Context) (*driver.Module, error) {
	ptx, err := kernels.PTX("route")
	if err != nil {
		return nil, err
	}
	return c.LoadModule(ptx, "route")
}

// Route launches the MoE router of one token (spec 2.8 steps 1-2): the
// router mat-vec, the top-k experts (the lower id first on ties) and their
// softmax weights, in one kernel whose last block selects.
type Route struct {
	fn4, fn8 *driver.Function
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
	return &Route{fn4: fn4, fn8: fn8}, nil
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
	if router.GroupSize != 64 || (router.Bits != 4 && router.Bits != 8) {
		return fmt.Errorf("cuda: router of %d-bit weights in groups of %d is not built (4 or 8 bits in groups of 64)", router.Bits, router.GroupSize)
	}
	E, C := router.Rows, router.Cols
	if topK < 1 || topK > 32 || topK > E {
		return fmt.Errorf("cuda: router top-%d of %d experts: the kernel selects 1 to min(32, experts)", topK, E)
	}
	if E > 1024 {
		return fmt.Errorf("cuda: router with %d experts: the kernel takes at most 1024", E)
	}
	fn := k.fn4
	if router.Bits == 8 {
		fn = k.fn8
	}
	grid := (E + routeWarps - 1) / routeWarps
	norm := int32(0)
	if normalize {
		norm = 1
	}
	var a driver.Args
	a.Ptr(router.Words).Ptr(router.Scales).Ptr(router.Biases).Ptr(b.X).Ptr(b.Logits).Ptr(b.IDs).Ptr(b.Weights).Ptr(b.Counter).
		I32(int32(E)).I32(int32(C)).I32(int32(topK)).I32(norm)
	return s.Launch(fn, driver.D1(grid), driver.D1(routeWarps*32), 4*(C+E), &a)
}
