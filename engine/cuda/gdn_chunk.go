package cuda

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
)

// The chunked delta rule of gdn_chunk.cu (GC_C, GC_VT, GC_THREADS and
// GC_SHARED there): blocks of deltaChunkTokens tokens, each launch block
// owning deltaChunkSlice rows of one value head's 128x128 state.
const (
	deltaChunkName    = "gdn_chunk"
	deltaChunkTokens  = 32
	deltaChunkSlice   = 32
	deltaChunkThreads = 128
)

// deltaChunkShared is GC_SHARED: the log-gate sums (float64), the block's
// keys and queries and the state's rows (padded to 132 floats), the
// decayed k·k and q·k (rows of 36), R, Vn, the decayed Vn and S0·q times
// γ (rows of 36), and beta, γ and the decays to the block's end.
func deltaChunkShared() int {
	const c, lk, lc, lv = deltaChunkTokens, GDNHeadDim + 4, deltaChunkTokens + 4, deltaChunkSlice + 4
	return 4 * (2*c + 2*c*lk + deltaChunkSlice*lk + 2*c*lc + 4*c*lv + 3*c)
}

// chunkableDelta says whether o takes gdn_chunk.cu: heads of 128 keys and
// values and at least deltaChunkMinRows tokens (others take the
// sequential kernel).
func chunkableDelta(o *backend.DeltaRule) bool {
	return o.Rows >= deltaChunkMinRows && o.KeyDim == GDNHeadDim && o.ValueDim == GDNHeadDim && o.KeyHeads >= 1 && o.ValueHeads%o.KeyHeads == 0
}

// deltaChunkMinRows is the fewest tokens the chunked form takes: on the
// H200 a block costs about 26 µs however few of its 32 tokens are used,
// the sequential kernel about 3 µs a token, and below 16 rows (a decode
// step with fused=off among them) it is also float32's error, not the
// chunked form's 1e-4.
const deltaChunkMinRows = 16

// deltaChunkFunction loads gdn_chunk.cu's module the first time an op is
// lowered to it (programs are compiled before any is captured) and raises
// its shared-memory limit.
func (b *Backend) deltaChunkFunction() (*driver.Function, error) {
	if fn := b.fn[deltaChunkName]; fn != nil {
		return fn, nil
	}
	if need, max := deltaChunkShared(), b.ctx.Device().SharedOptIn; need > max {
		return nil, fmt.Errorf("cuda: the chunked delta rule needs %d bytes of shared memory; the GPU allows %d", need, max)
	}
	ptx, err := kernels.PTX("gdn_chunk")
	if err != nil {
		return nil, err
	}
	m, err := b.ctx.LoadModule(ptx, "gdn_chunk")
	if err != nil {
		return nil, err
	}
	b.mods = append(b.mods, m)
	fn, err := m.Function(deltaChunkName)
	if err != nil {
		return nil, err
	}
	if err := fn.SetMaxDynamicShared(deltaChunkShared()); err != nil {
		return nil, err
	}
	b.fn[deltaChunkName] = fn
	return fn, nil
}

// deltaRuleChunked lowers o (chunkableDelta) to one gdn_chunk launch over
// the checked buffers.
func (b *Backend) deltaRuleChunked(o *backend.DeltaRule, qkv, bb, aa, aLog, dt, st, out driver.Ptr) ([]step, error) {
	fn, err := b.deltaChunkFunction()
	if err != nil {
		return nil, err
	}
	grid := driver.D1(o.ValueHeads * (GDNHeadDim / deltaChunkSlice))
	return []step{{kernels: 1, name: deltaChunkName, launch: func(s *driver.Stream) error {
		var a driver.Args
		a.Ptr(qkv).Ptr(bb).Ptr(aa).Ptr(aLog).Ptr(dt).Ptr(st).Ptr(out).
			I32(int32(o.Rows)).I32(int32(o.KeyHeads)).I32(int32(o.ValueHeads))
		return s.Launch(fn, grid, driver.D1(deltaChunkThreads), deltaChunkShared(), &a)
	}}}, nil
}
