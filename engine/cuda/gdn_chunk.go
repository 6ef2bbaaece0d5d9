package cuda

import (
	"fmt"
	"maps"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// The chunked delta rule of gdn_chunk.cu in its two kernels (GC_C, GC_VT,
// GC_WS, GC_PREP_THREADS, GC_STATE_THREADS, GC_PREP_SHARED and
// GC_STATE_SHARED there): gdn_chunk_prep over every (value head, block of
// deltaChunkTokens tokens) writes deltaChunkWS floats of state-independent
// work each to a workspace in the program's scratch; gdn_chunk_state, a
// launch block per deltaChunkSlice rows of a value head's 128x128 state,
// then walks the blocks in order.
const (
	deltaChunkPrepName     = "gdn_chunk_prep"
	deltaChunkStateName    = "gdn_chunk_state"
	deltaChunkStateILPName = "gdn_chunk_state_ilp"
	deltaChunkStateSKName  = "gdn_chunk_state_sk"
	// gdn_chunk_tf32.cu's state kernels (delta=tf32): gdn_chunk_state_ilp's
	// and gdn_chunk_state_sk's tiles with one tf32 product a pair
	deltaChunkStateTF32Name   = "gdn_chunk_state_tf32"
	deltaChunkStateTF32SKName = "gdn_chunk_state_tf32_sk"
	// gdn_chunk_frag.cu's prep and state kernels (delta=tf32frag): the
	// workspace in the tensor cores' fragment order, the tf32 kernels' tiles
	deltaChunkFragPrepName    = "gdn_chunk_prep_frag"
	deltaChunkFragStateName   = "gdn_chunk_state_frag"
	deltaChunkFragStateSKName = "gdn_chunk_state_frag_sk"
	// gdn_chunk_flow.cu's kernels (deltaflow=on): gdn_chunk_frag's prep and
	// state pass at once, each block of tokens handed over by a flag
	deltaChunkFlowPrepName  = "gdn_chunk_prep_flow"
	deltaChunkFlowStateName = "gdn_chunk_state_flow"
	// gdn_chunk_pair.cu's prep (deltapair=on): gdn_chunk_frag's for two
	// value heads of a key head a block
	deltaChunkPairPrepName = "gdn_chunk_prep_pair"
	// gdn_chunk_pairflow.cu's (deltaflow=pair): gdn_chunk_flow's prep with
	// the pair's work, one block a multiprocessor beside a state block
	deltaChunkPairFlowPrepName = "gdn_chunk_prep_pair_flow"
	deltaChunkPairThreads      = 256
	// deltaFlowPrepBlocks is the flow prep's blocks a multiprocessor: two
	// leave room for a state pass block beside them (shared memory 2 x 39
	// + 145 KB, registers 2 x 16K + 32K of 64K)
	deltaFlowPrepBlocks    = 2
	deltaChunkTokens       = 32
	deltaChunkSlice        = 32
	deltaChunkWS           = 4*deltaChunkTokens*GDNHeadDim + deltaChunkTokens*deltaChunkTokens + 4
	deltaChunkPrepThreads  = 128
	deltaChunkStateThreads = 256
)

// deltaChunkPrepShared is GC_PREP_SHARED: the log-gate sums (float64), the
// block's keys and queries (rows padded to 132 floats), the decayed k·k
// (rows of 36), and beta, γ and the decays to the block's end.
func deltaChunkPrepShared() int {
	const c, lk, lc = deltaChunkTokens, GDNHeadDim + 4, deltaChunkTokens + 4
	return 8*c + 4*(2*c*lk+c*lc+3*c)
}

// deltaChunkPairShared is GC_PAIR_SHARED: a head's log-gate sums
// (float64) each, the block's keys and queries (rows of 132), then a head's
// W (rows of 132), decayed k·k (rows of 36), beta, γ and decays each.
func deltaChunkPairShared() int {
	const c, lk, lc = deltaChunkTokens, GDNHeadDim + 4, deltaChunkTokens + 4
	return 2*8*c + 4*(2*c*lk+2*(c*lk+c*lc+3*c))
}

// deltaChunkStateShared is GC_STATE_SHARED: the state's slice (rows of
// 132), two buffers of a block's workspace (W and γ·Q in rows of 132, the
// decayed K in rows of 136, U's slice in rows of 40, the masked q·k in rows
// of 36, γ at the end and 3 floats), Vn and γ·S0·q (rows of 40).
func deltaChunkStateShared() int {
	const c, lk, lkd, lv, lc = deltaChunkTokens, GDNHeadDim + 4, GDNHeadDim + 8, deltaChunkSlice + 8, deltaChunkTokens + 4
	return deltaStateSharedOf(2*c*lk + c*lkd + c*lv + c*lc + 4)
}

// deltaChunkFragShared is GC_STATE_SHARED under GC_FRAG: a buffer holds W,
// γ·Q and the decayed K in fragment order (no padding), U's slice in rows
// of 40, the masked q·k (no padding), γ and 3 floats.
func deltaChunkFragShared() int {
	const c, d, lv = deltaChunkTokens, GDNHeadDim, deltaChunkSlice + 8
	return deltaStateSharedOf(3*c*d + c*lv + c*c + 4)
}

// deltaStateSharedOf is a state pass's shared memory with buffers of buf
// floats: the state's slice (rows of 132), two buffers, Vn and γ·S0·q
// (rows of 40).
func deltaStateSharedOf(buf int) int {
	return 4 * (deltaChunkSlice*(GDNHeadDim+4) + 2*buf + 2*deltaChunkTokens*(deltaChunkSlice+8))
}

// deltaSKPartials is the bytes GC_STATE_SK_SHARED adds: the eight warps'
// partial sums of Vn and γ·S0·q (rows of 40).
const deltaSKPartials = 4 * (deltaChunkStateThreads / 32) * 2 * deltaChunkTokens * (deltaChunkSlice + 8)

// deltaChunkStateSKShared and deltaChunkFragSKShared are
// GC_STATE_SK_SHARED: the state pass's and the warps' partial sums.
func deltaChunkStateSKShared() int { return deltaChunkStateShared() + deltaSKPartials }
func deltaChunkFragSKShared() int  { return deltaChunkFragShared() + deltaSKPartials }

// deltaFragKernels are gdn_chunk_frag.cu's state kernels (delta=tf32frag)
// with their shared memory, and deltaFragKernel the one it launches.
var deltaFragKernels = map[string]func() int{
	deltaChunkFragStateName:   deltaChunkFragShared,
	deltaChunkFragStateSKName: deltaChunkFragSKShared,
}

var deltaFragKernel = deltaChunkFragStateName

// deltaStateKernels are gdn_chunk.cu's state kernels with the dynamic
// shared memory each takes: the same products, float32 sums in other
// orders (gc_state's ILP 0, 1, 2).
var deltaStateKernels = map[string]func() int{
	deltaChunkStateName:    deltaChunkStateShared,
	deltaChunkStateILPName: deltaChunkStateShared,
	deltaChunkStateSKName:  deltaChunkStateSKShared,
}

// mergedKernels is the union of kernel maps.
func mergedKernels(ms ...map[string]func() int) map[string]func() int {
	all := map[string]func() int{}
	for _, m := range ms {
		maps.Copy(all, m)
	}
	return all
}

// deltaTF32Kernels are gdn_chunk_tf32.cu's state kernels (delta=tf32), in
// a module of their own, with their shared memory.
var deltaTF32Kernels = map[string]func() int{
	deltaChunkStateTF32Name:   deltaChunkStateShared,
	deltaChunkStateTF32SKName: deltaChunkStateSKShared,
}

// deltaTF32Kernel is delta=tf32's state kernel.
var deltaTF32Kernel = deltaChunkStateTF32Name

// deltaTF32Bar is delta=tf32's bar against the float64 reference (largest
// error over the RMS, outputs and state): its products take each operand
// rounded to tf32 (2^-11 relative) where deltaChunkBar's take float32's
// error. On an H100 (docs/bench/cuda/2026-12-07-delta1) the outputs were
// 3.0e-3 of the RMS at 16 tokens to 7.0e-3 at 4096 and the state 2.4e-3
// to 3.1e-3, against 1.1e-5 to 1.2e-5 and 1.6e-6 to 2.1e-6 for the
// default's; the oracle's figures under it are the default's (top-1
// 99.6-100 %, mean KL 4.5e-5 to 1.8e-4).
const deltaTF32Bar = 1e-2

// deltaChunkWorkspace is the bytes of scratch o's gdn_chunk_prep writes:
// deltaChunkWS floats per value head and block of tokens (36 MB for the
// 35B model's 32 value heads at 512 tokens, 285 MB at 4096).
func deltaChunkWorkspace(o *backend.DeltaRule) int64 {
	blocks := (o.Rows + deltaChunkTokens - 1) / deltaChunkTokens
	return 4 * deltaChunkWS * int64(o.ValueHeads) * int64(blocks)
}

// chunkableDelta says whether o takes gdn_chunk.cu: heads of 128 keys and
// values and at least deltaChunkMinRows tokens (others take the
// sequential kernel).
func chunkableDelta(o *backend.DeltaRule) bool {
	return o.Rows >= deltaChunkMinRows && o.KeyDim == GDNHeadDim && o.ValueDim == GDNHeadDim && o.KeyHeads >= 1 && o.ValueHeads%o.KeyHeads == 0
}

// deltaChunkMinRows is the fewest tokens the chunked form takes: below
// 16 rows (a decode step with fused=off among them) the sequential kernel
// is as fast (a block of tokens costs the same however few of its 32 are
// used) and keeps the conformance suite's float32 bar of 2e-5, where the
// chunked form was measured at up to 1.2e-5 of the RMS over 16 to 4096
// tokens (its own bar, deltaChunkBar, is 5e-5).
const deltaChunkMinRows = 16

// deltaStateKernel is the state pass's kernel, gdn_chunk_state_sk: its
// first products (Vn and γ·S0·q) split over k among the warps, so that each
// operand element is split into its tf32 parts once, the rest as
// gdn_chunk_state_ilp's (four accumulators a tile: chains of 16 and 8
// dependent mma where gdn_chunk_state has 48). The delta rule on an H100
// (docs/bench/cuda/2026-12-06-deltask1), 4096 / 512 tokens: 765 / 116 us,
// against 870 / 130 (ilp) and 907 / 134; the same error against the float64
// reference (out 1.23e-5 of the RMS at 4096). The next block's copies
// issued after a block's first barrier (a barrier fewer a block) measured
// under 1 % faster and went (2026-12-06-wgr1). The tests run each.
var deltaStateKernel = deltaChunkStateSKName

// deltaState is the state pass a backend launches (deltaChunkStateThreads
// threads, deltaChunkSlice state rows a block): its kernel and the
// kernel's dynamic shared memory.
type deltaState struct {
	fn     *driver.Function
	shared int
	flow   bool // gdn_chunk_flow's: the prep and the state pass take the flags
}

// deltaChunkFunctions loads gdn_chunk.cu's module (and the state pass's
// own under delta=tf32) the first time an op is lowered
// to it (programs are compiled before any is captured) and raises its
// kernels' shared-memory limits; state is deltaStateKernel unless an
// option names another, and step names the prep and state kernels.
func (b *Backend) deltaChunkFunctions() (prep *driver.Function, state deltaState, step string, err error) {
	stateName, kernels, family, prepName := deltaStateKernel, deltaStateKernels, "", deltaChunkPrepName
	switch {
	case b.o.DeltaFrag && b.o.DeltaFlow:
		stateName, family, prepName, state.flow = deltaChunkFlowStateName, "gdn_chunk_flow", deltaChunkFlowPrepName, true
		kernels = map[string]func() int{prepName: deltaChunkPrepShared, stateName: deltaChunkFragShared}
	case b.o.DeltaFrag:
		// its own prep, which lays the workspace out for its state pass
		stateName, family, prepName = deltaFragKernel, "gdn_chunk_frag", deltaChunkFragPrepName
		kernels = mergedKernels(deltaFragKernels, map[string]func() int{prepName: deltaChunkPrepShared})
		if b.o.DeltaPair && b.fn[deltaChunkPairPrepName] == nil {
			if err := b.loadDeltaFamily("gdn_chunk_pair", map[string]func() int{deltaChunkPairPrepName: deltaChunkPairShared}); err != nil {
				return nil, deltaState{}, "", err
			}
		}
	case b.o.DeltaTF32:
		stateName, kernels, family = deltaTF32Kernel, deltaTF32Kernels, "gdn_chunk_tf32"
	}
	state.shared = kernels[stateName]()
	step = prepName + "+" + stateName
	if prepName == deltaChunkPrepName && b.fn[prepName] == nil {
		prep := map[string]func() int{deltaChunkPrepName: deltaChunkPrepShared}
		if err := b.loadDeltaFamily("gdn_chunk", mergedKernels(prep, deltaStateKernels)); err != nil {
			return nil, deltaState{}, "", err
		}
	}
	if b.fn[stateName] == nil && family != "" {
		if err := b.loadDeltaFamily(family, kernels); err != nil {
			return nil, deltaState{}, "", err
		}
		if state.flow {
			// the prep's blocks and the state pass's side by side on a
			// multiprocessor: set once, as the module is loaded
			for _, fn := range []*driver.Function{b.fn[prepName], b.fn[stateName]} {
				if err := fn.PreferMaxShared(); err != nil {
					return nil, deltaState{}, "", err
				}
			}
		}
	}
	if state.flow && b.o.DeltaFlowPair && b.fn[deltaChunkPairFlowPrepName] == nil {
		if err := b.loadDeltaFamily("gdn_chunk_pairflow", map[string]func() int{deltaChunkPairFlowPrepName: deltaChunkPairShared}); err != nil {
			return nil, deltaState{}, "", err
		}
		if err := b.fn[deltaChunkPairFlowPrepName].PreferMaxShared(); err != nil {
			return nil, deltaState{}, "", err
		}
	}
	state.fn = b.fn[stateName]
	return b.fn[prepName], state, step, nil
}

// loadDeltaFamily loads family and finds its kernels in b.fn, each with
// its dynamic shared memory limit raised to what kernels gives for it.
func (b *Backend) loadDeltaFamily(family string, kernels map[string]func() int) error {
	shared := map[string]int{}
	for name, size := range kernels {
		shared[name] = size()
		if max := b.ctx.Device().SharedOptIn; shared[name] > max {
			return fmt.Errorf("cuda: the chunked delta rule's %s needs %d bytes of shared memory; the GPU allows %d", name, shared[name], max)
		}
	}
	m, err := loadFamily(b.ctx, family)
	if err != nil {
		return err
	}
	b.mods = append(b.mods, m)
	fns := map[string]*driver.Function{}
	for name, need := range shared {
		fn, err := m.Function(name)
		if err != nil {
			return err
		}
		if err := fn.SetMaxDynamicShared(need); err != nil {
			return err
		}
		fns[name] = fn
	}
	for name, fn := range fns {
		b.fn[name] = fn
	}
	return nil
}

// deltaRuleChunked lowers o (chunkableDelta) to gdn_chunk_prep, writing
// its workspace to p's scratch, and gdn_chunk_state over the checked
// buffers.
func (b *Backend) deltaRuleChunked(p *program, o *backend.DeltaRule, qkv driver.Ptr, d deltaBuffers) ([]step, error) {
	prep, state, name, err := b.deltaChunkFunctions()
	if err != nil {
		return nil, err
	}
	slices := driver.D1(o.ValueHeads * (GDNHeadDim / deltaChunkSlice))
	var off int64
	wsOff := p.reserve(&off, deltaChunkWorkspace(o))
	blocks := (o.Rows + deltaChunkTokens - 1) / deltaChunkTokens
	prepGrid, prepThreads, prepShared := o.ValueHeads*blocks, deltaChunkPrepThreads, deltaChunkPrepShared()
	even := (o.ValueHeads/o.KeyHeads)%2 == 0
	if pair := b.fn[deltaChunkPairPrepName]; b.o.DeltaPair && !state.flow && pair != nil && even {
		// a block for each two value heads of a key head
		prep, name = pair, deltaChunkPairPrepName+"+"+deltaFragKernel
		prepGrid, prepThreads, prepShared = o.ValueHeads/2*blocks, deltaChunkPairThreads, deltaChunkPairShared()
	}
	var flags driver.Ptr
	if state.flow {
		// zero between launches (the state pass takes down what the prep raises)
		if flags, err = b.grow(&b.deltaFlags, 4*int64(o.ValueHeads*blocks), "the delta rule's flags"); err != nil {
			return nil, err
		}
		prepBlocks := deltaFlowPrepBlocks
		if pf := b.fn[deltaChunkPairFlowPrepName]; b.o.DeltaFlowPair && pf != nil && even {
			// deltaflow=pair: a block of two value heads a multiprocessor
			prep, name = pf, deltaChunkPairFlowPrepName+"+"+deltaChunkFlowStateName
			prepGrid, prepThreads, prepShared, prepBlocks = o.ValueHeads/2*blocks, deltaChunkPairThreads, deltaChunkPairShared(), 1
		}
		prepGrid = min(prepGrid, prepBlocks*b.ctx.Device().SMs)
	}
	return []step{{kernels: 2, name: name, launch: func(s *driver.Stream) error {
		ws := p.scratch.Add(wsOff)
		var a driver.Args
		a.Ptr(qkv).Ptr(d.b).Ptr(d.a).Ptr(d.aLog).Ptr(d.dtBias).Ptr(ws).I32(int32(o.Rows)).I32(int32(o.KeyHeads)).I32(int32(o.ValueHeads))
		if state.flow {
			a.Ptr(flags)
		}
		if err := s.Launch(prep, driver.D1(prepGrid), driver.D1(prepThreads), prepShared, &a); err != nil {
			return err
		}
		var c driver.Args
		c.Ptr(ws).Ptr(d.state).Ptr(d.out).I32(int32(o.Rows)).I32(int32(o.ValueHeads))
		if state.flow {
			c.Ptr(flags)
		}
		return s.Launch(state.fn, slices, driver.D1(deltaChunkStateThreads), state.shared, &c)
	}}}, nil
}

// deltaBuffers are a DeltaRule's buffers but its q, k and v.
type deltaBuffers struct {
	b, a, aLog, dtBias, state, out driver.Ptr
}

// deltaRuleBuffers checks o's buffers but q, k and v, as c's errors say.
func deltaRuleBuffers(c *checks, o *backend.DeltaRule) deltaBuffers {
	return deltaBuffers{
		b: c.buf("b", o.B, backend.F32, o.Rows*o.ValueHeads), a: c.buf("a", o.A, backend.F32, o.Rows*o.ValueHeads),
		aLog: c.buf("A_log", o.ALog, backend.F32, o.ValueHeads), dtBias: c.buf("dt_bias", o.DtBias, backend.F32, o.ValueHeads),
		state: c.buf("the state", o.State, backend.F32, o.ValueHeads*o.ValueDim*o.KeyDim),
		out:   c.buf("the output", o.Out, backend.F32, o.Rows*o.ValueHeads*o.ValueDim),
	}
}
