package cuda

import (
	"fmt"

	"petal/engine/cuda/driver"
)

// GDNHeadDim is the key and value head size the Gated DeltaNet kernel is
// built for (GDN_D in gdn.cu; 128 in every model of the family), and
// GDNConvK its conv width.
const (
	GDNHeadDim  = 128
	GDNConvK    = 4
	gdnThreads  = 256
	gdnMaxSplit = 16
)

// GDNSplits are the compiled row splits of a value head's state over
// blocks (gdn_step_s<n>); GDNClusterSplits those with a cluster form
// (gdn_cl.cu's gdn_step_s<n>_cl, a value head's blocks one cluster).
var (
	GDNSplits        = []int{1, 2, 4, 8, 16}
	GDNClusterSplits = []int{2, 4, 8}
)

// LoadGDNModule loads the Gated DeltaNet kernels embedded in the binary.
func LoadGDNModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "gdn")
}

// LoadGDNClusterModule loads gdn_cl.cu's cluster forms (gdnnorm=cluster).
func LoadGDNClusterModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "gdn_cl")
}

// GDN launches the Gated DeltaNet step of one token after its projections
// (spec 2.5 steps 2-8): conv and SiLU with the conv state update, q/k L2
// norms, the gates, the delta rule on the float32 state, and the gated
// RMSNorm of the output, in one kernel.
type GDN struct {
	fns   map[int]*driver.Function
	Split int // blocks per value head; DefaultGDNSplit unless set
	// Cluster takes the cluster forms (AddClusterForms): the gated norm's
	// sum of squares traded through the cluster's shared memory, not a
	// ticket and the last block (gdnnorm=cluster)
	Cluster bool
	clfns   map[int]*driver.Function
}

// AddClusterForms finds gdn_cl.cu's kernels in mod (LoadGDNClusterModule).
func (k *GDN) AddClusterForms(mod *driver.Module) error {
	k.clfns = map[int]*driver.Function{}
	for _, n := range GDNClusterSplits {
		fn, err := mod.Function(fmt.Sprintf("gdn_step_s%d_cl", n))
		if err != nil {
			return err
		}
		k.clfns[n] = fn
	}
	return nil
}

// DefaultGDNSplit is the split NewGDN starts with.
var DefaultGDNSplit = 4

// NewGDN finds the kernels in mod.
func NewGDN(mod *driver.Module) (*GDN, error) {
	k := &GDN{fns: map[int]*driver.Function{}, Split: DefaultGDNSplit}
	for _, n := range GDNSplits {
		fn, err := mod.Function(fmt.Sprintf("gdn_step_s%d", n))
		if err != nil {
			return nil, err
		}
		k.fns[n] = fn
	}
	return k, nil
}

// GDNBuffers are one layer's device vectors, all float32: the projections
// QKV [2·Hk·128 + Hv·128] (q heads, k heads, v heads, before the conv), Z
// [Hv·128], B and A [Hv]; ConvW [channels][4]; ConvState [3][channels]
// (the three previous QKV, oldest first; advanced); ALog, DtBias [Hv];
// NormW [128]; State [Hv][128][128] (advanced); Out [Hv·128]; and
// Counters, Hk+Hv u32 zeroed when allocated (left as found by every
// complete launch; one set per stream the layers run on).
type GDNBuffers struct {
	QKV, Z, B, A, ConvW, ConvState, ALog, DtBias, NormW, State, Out, Counters driver.Ptr
}

// Launch queues one step of a layer with hk key and hv value heads on s.
func (k *GDN) Launch(s *driver.Stream, b GDNBuffers, hk, hv int, eps float32) error {
	fn, ok := k.fns[k.Split]
	if !ok {
		return fmt.Errorf("cuda: Gated DeltaNet split %d is not built (%v)", k.Split, GDNSplits)
	}
	if k.Cluster {
		if fn, ok = k.clfns[k.Split]; !ok {
			return fmt.Errorf("cuda: Gated DeltaNet split %d has no cluster form loaded (%v)", k.Split, GDNClusterSplits)
		}
	}
	if hk < 1 || hv < hk || hv%hk != 0 {
		return fmt.Errorf("cuda: Gated DeltaNet with %d key heads and %d value heads: value heads must be a multiple of key heads", hk, hv)
	}
	for _, p := range []struct {
		name string
		p    driver.Ptr
	}{{"conv weights", b.ConvW}, {"state", b.State}} {
		if p.p%16 != 0 {
			return fmt.Errorf("cuda: Gated DeltaNet %s at %#x are not 16-byte aligned", p.name, uint64(p.p))
		}
	}
	var a driver.Args
	a.Ptr(b.QKV).Ptr(b.Z).Ptr(b.B).Ptr(b.A).Ptr(b.ConvW).Ptr(b.ConvState).Ptr(b.ALog).Ptr(b.DtBias).Ptr(b.NormW).
		Ptr(b.State).Ptr(b.Out).Ptr(b.Counters).I32(int32(hk)).I32(int32(hv)).F32(eps)
	if k.Cluster {
		return s.LaunchCluster(fn, driver.D1(hv*k.Split), driver.D1(gdnThreads), driver.D1(k.Split), 0, &a)
	}
	return s.Launch(fn, driver.D1(hv*k.Split), driver.D1(gdnThreads), 0, &a)
}
