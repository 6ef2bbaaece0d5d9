package cuda

import (
	"encoding/binary"
	"fmt"
	"time"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// Backend runs petal's ops on one NVIDIA GPU (backend.Backend). All its
// work goes to one stream in order: a Run returns once the program's
// kernels are queued (backend.Asynchronous), and a Read, a Sync or the
// next Run's read-back waits for them. Weights are uploaded once; buffers
// are plain device allocations, zeroed when made.
type Backend struct {
	o   Options
	ctx *driver.Context
	s   *driver.Stream
	up  *driver.Uploader

	mods  []*driver.Module
	fn    map[string]*driver.Function
	qmv   *QMV
	moe   *MoE
	route *Route
	attn  *Attn
	gdn   *GDN
	gemm  *GEMM // the tensor-core GEMMs of prefill (nil with gemm=plain)

	counter    driver.Ptr                  // the router's and qmv_group_norm's ticket, moe_layer's grid barrier at +8 (left as found by every launch)
	scratch    grower                      // temporaries of one op at a time (ops run in order)
	zeros      grower                      // never written: the MoE kernel's residual input
	tickets    grower                      // the Gated DeltaNet kernel's counters (left as found by every launch)
	deltaFlags grower                      // deltaflow's flags, a (value head, block of tokens) each (left at zero by every launch)
	ropes      map[ropeKey]driver.Ptr      // float64 inverse frequencies per (rotary dims, theta)
	last       *program                    // the last program run, named in errors that surface later
	rb         readback                    // reads that wait only for their buffer's writer (readback.go)
	side       sideStream                  // a prompt chunk's shared expert beside the routed ones (sharedside=on, side.go)
	held       []driver.Ptr                // memory freed at Close
	pooled     []driver.Ptr                // pool memory freed at Close (grown scratch's old allocations)
	primed     bool                        // the pool's reserve mapped (pool=on)
	shadows    map[[2]driver.Ptr]*kvShadow // the bf16 shadows of float32 KV caches by (K, V) cache (kvshadow=on)
	certBounds map[*matrix]driver.Ptr      // router=cert's bounds by router (route_cert_bound)
}

type ropeKey struct {
	rot   int
	theta float64
}

// grower is device memory that only grows: a program keeps the address it
// was compiled with, so a smaller allocation is kept (until Close) when a
// larger one replaces it.
type grower struct {
	p     driver.Ptr
	bytes int64
}

// uploadChunk is the size of each of the two pinned staging buffers.
const uploadChunk = 64 << 20

// modules are the kernel families the backend loads.
var modules = []string{"ops", "sample", "qmv", "moe", "route", "attn", "gdn"}

// noticeFamilies are the families whose PTX the driver would compile on a
// first run under o (modules, the prefill kernels' gemm, gemm_wg,
// attn_prefill, attn_prefill_wg and gdn_chunk, and the families only some
// options load): those without current cubins for the GPU are compiled,
// and the notice names them.
func noticeFamilies(o Options) []string {
	fams := append([]string{"gemm", "gemm_wg", "attn_prefill", "attn_prefill_wg", "gdn_chunk"}, modules...)
	if o.GDNCluster {
		fams = append(fams, "gdn_cl")
	}
	if fam, ok := routerFamily(o.Router); ok {
		fams = append(fams, fam)
	}
	if o.Router == RouterCert { // and router=i8wg's, for the routes it does not take
		fams = append(fams, qiShapes[RouterI8WG].family)
	}
	if o.MoEFit {
		fams = append(fams, "gemm_fit")
	}
	if o.MoEFit && o.MoEFitWidth {
		fams = append(fams, "gemm_fitw")
	}
	if o.WGProducer || o.WGThree {
		fams = append(fams, "gemm_ws")
	}
	if o.MoEYsBF16 {
		fams = append(fams, "gemm_downbf")
	}
	if o.MoEGroupBlocks {
		fams = append(fams, "moe_group")
	}
	if o.NormBF16 {
		fams = append(fams, "norm_bf")
	}
	if o.NormBF16 && o.NormF32Lean {
		fams = append(fams, "norm_bfo")
	}
	if o.NormBF16 && o.CombineNorm {
		fams = append(fams, "norm_comb")
	}
	if o.QKRowsWarp {
		fams = append(fams, "qk_rows")
	}
	if o.kvShadowed() {
		fams = append(fams, "attn_shadow")
	}
	if o.ChunkedDelta && o.DeltaTF32 {
		fams = append(fams, "gdn_chunk_tf32")
	}
	if o.ChunkedDelta && o.DeltaFrag {
		fams = append(fams, "gdn_chunk_frag")
	}
	if o.ChunkedDelta && o.DeltaFrag && o.DeltaFlow {
		fams = append(fams, "gdn_chunk_flow")
	}
	if o.ChunkedDelta && o.DeltaFrag && o.DeltaPair && !o.DeltaFlow {
		fams = append(fams, "gdn_chunk_pair")
	}
	if o.ChunkedDelta && o.DeltaFrag && o.DeltaFlowPair {
		fams = append(fams, "gdn_chunk_pairflow")
	}
	if o.FlashWG && o.FlashWGPipe && o.FlashWGOver {
		fams = append(fams, "attn_prefill_wgo")
	}
	if o.NormBF16 && o.TensorCores && o.ConvGEMM && o.WGMMA && o.WGRegA {
		fams = append(fams, "gemm_conv")
	}
	return fams
}

// New opens GPU o.Device and loads the kernels. Where the machine has no
// usable GPU the error says why (no driver, no GPU, a GPU too old).
func New(o Options) (*Backend, error) {
	switch o.KV {
	case 0:
		o.KV = backend.F32
	case backend.F32, backend.BF16:
	default:
		return nil, fmt.Errorf("cuda: KV caches of element type %s, want f32 or bf16", o.KV)
	}
	if err := checkSASSEnv(); err != nil {
		return nil, err
	}
	ctx, err := driver.Open(o.Device)
	if err != nil {
		return nil, err
	}
	b := &Backend{o: o, ctx: ctx, fn: map[string]*driver.Function{}, ropes: map[ropeKey]driver.Ptr{}}
	said := ""
	if o.Notice != nil {
		fams := noticeFamilies(o)
		if said = kernelCacheNotice(cubinsMissing(ctx, fams), len(fams)); said != "" {
			o.Notice(said)
		}
	}
	start := time.Now()
	if err := b.init(); err != nil {
		b.Close()
		return nil, err
	}
	if m := slowLoadNotice(time.Since(start), said != ""); m != "" && o.Notice != nil {
		o.Notice(m)
	}
	return b, nil
}

func (b *Backend) init() error {
	var err error
	if b.s, err = b.ctx.NewStream("cuda backend"); err != nil {
		return err
	}
	b.s.SetProgrammatic(b.o.PDL && !b.o.PDLSome) // pdl=some: step by step (launchStep)
	if b.o.Pool && !b.ctx.Device().MemoryPools {
		b.o.Pool = false // a driver or device without memory pools: cuMemAlloc
	}
	if b.o.Pool {
		if err := b.ctx.KeepPoolMemory(b.s, poolReserve, 0); err != nil {
			return err
		}
	}
	if b.up, err = b.ctx.NewUploader(b.s, uploadChunk); err != nil {
		return err
	}
	if b.rb.side, err = b.ctx.NewStream("cuda backend reads"); err != nil {
		return err
	}
	if b.rb.stage, err = b.ctx.AllocHost(readStageBytes, "read staging"); err != nil {
		return err
	}
	mods := map[string]*driver.Module{}
	for _, name := range modules {
		m, err := loadFamily(b.ctx, name)
		if err != nil {
			return err
		}
		b.mods = append(b.mods, m)
		mods[name] = m
	}
	for _, name := range plainKernels {
		if b.fn[name], err = mods["ops"].Function(name); err != nil {
			return err
		}
	}
	for _, name := range routerWideKernels {
		if err := b.fn[name].SetMaxDynamicShared(qfWideShared); err != nil {
			return err
		}
	}
	if fam, ok := routerFamily(b.o.Router); ok {
		if err := b.loadFamilyKernels(fam); err != nil {
			return err
		}
	}
	if b.o.Router == RouterCert { // router=i8wg's kernels for the routes router=cert does not take
		if err := b.loadFamilyKernels(qiShapes[RouterI8WG].family); err != nil {
			return err
		}
	}
	for _, name := range []string{"sample_prep", "sample_row", "logprobs_row"} {
		if b.fn[name], err = mods["sample"].Function(name); err != nil {
			return err
		}
	}
	if b.o.SamplerTopK {
		if err := b.fn["sample_row"].SetMaxDynamicShared(sampleFastKeys); err != nil {
			return err
		}
	}
	qv, mv := DefaultQMV, MoEVariant{QI8x3, true}
	if b.o.FastQMV {
		qv, mv = FastQMV, MoEVariant{QI8x2, true}
	}
	if b.qmv, err = NewQMV(b.ctx, mods["qmv"], qv); err != nil {
		return err
	}
	if b.moe, err = NewMoE(b.ctx, mods["moe"], mv); err != nil {
		return err
	}
	if b.route, err = NewRoute(mods["route"]); err != nil {
		return err
	}
	if b.attn, err = NewAttn(b.ctx, mods["attn"]); err != nil {
		return err
	}
	if b.gdn, err = NewGDN(mods["gdn"]); err != nil {
		return err
	}
	if b.KVShadowed() {
		if err := b.loadFamilyKernels("attn_shadow"); err != nil {
			return err
		}
	}
	if b.o.QKRowsWarp {
		if err := b.loadFamilyKernels("qk_rows"); err != nil {
			return err
		}
	}
	if b.o.NormBF16 && b.o.TensorCores {
		if err := b.loadFamilyKernels("norm_bf"); err != nil {
			return err
		}
		if b.o.NormF32Lean {
			if err := b.loadFamilyKernels("norm_bfo"); err != nil {
				return err
			}
		}
		if b.o.CombineNorm {
			if err := b.loadFamilyKernels("norm_comb"); err != nil {
				return err
			}
		}
		if b.o.ConvGEMM && b.o.WGMMA && b.o.WGRegA && wgmmaGPU(b.ctx) {
			if err := b.loadFamilyKernels("gemm_conv"); err != nil {
				return err
			}
		}
	}
	// The cluster form is a module of its own (gdn_cl.cu), so that gdn.ptx
	// stays as it was; it is loaded only under its option.
	if b.o.GDNCluster {
		if err := b.addModule(LoadGDNClusterModule, b.gdn.AddClusterForms); err != nil {
			return err
		}
		b.gdn.Cluster = true
	}
	if b.o.TensorCores {
		// loaded only where used: the driver's first compile of its PTX
		// takes a while, and its cache keeps the result
		m, err := loadFamily(b.ctx, "gemm")
		if err != nil {
			return err
		}
		b.mods = append(b.mods, m)
		if b.gemm, err = NewGEMM(b.ctx, m); err != nil {
			return err
		}
		if b.o.MoEGroupBlocks {
			mg, err := LoadMoEGroupModule(b.ctx)
			if err != nil {
				return err
			}
			b.mods = append(b.mods, mg)
			if err := b.gemm.AddMoEGroup(mg); err != nil {
				return err
			}
			b.gemm.RouteBlocks(true)
		}
		if d := b.ctx.Device(); b.o.WGMMA && d.Major == 9 && d.Minor == 0 {
			wg, err := LoadGEMMWGModule(b.ctx)
			if err != nil {
				return fmt.Errorf("%w (the wgmma GEMMs of gemm=wgr and gemm=wg; --backend cuda:gemm=tc runs prefill without them)", err)
			}
			b.mods = append(b.mods, wg)
			if err := b.gemm.AddWGMMA(wg); err != nil {
				return err
			}
			if err := b.gemm.UseWGMMA(b.o.WGRegA); err != nil {
				return err
			}
			if b.o.WGUndrained {
				b.gemm.UndrainedTiles()
			}
			if (b.o.WGProducer || b.o.WGThree) && b.o.WGRegA && b.o.WGUndrained {
				if err := b.addModule(LoadGEMMWSModule, b.gemm.AddDenseOnlyTiles); err != nil {
					return err
				}
				if b.o.WGProducer {
					b.gemm.DenseIn256("w256rs")
				} else {
					b.gemm.DenseIn256("w256r3")
				}
			}
			if b.o.MoEFit && b.o.WGRegA && b.o.WGUndrained {
				if err := b.addModule(LoadGEMMFitModule, b.gemm.AddFitTiles); err != nil {
					return err
				}
				b.gemm.FitMoETiles(true, b.o.MoEFitAll)
				if b.o.MoEFitWidth {
					if err := b.addModule(LoadGEMMFitWModule, b.gemm.AddWidthTiles); err != nil {
						return err
					}
					b.gemm.WidthMoETiles(true)
				}
			}
			if b.o.MoEYsBF16 && b.o.WGRegA {
				if err := b.addModule(LoadGEMMDownBFModule, b.gemm.AddDownBF); err != nil {
					return err
				}
			}
		}
		if err := b.gemm.Prepare(); err != nil {
			return err
		}
	}
	if b.counter, err = b.alloc(16, "router ticket"); err != nil {
		return err
	}
	return b.s.Sync()
}

// routerFamily is the module of router k where it has one of its own
// (qgemm_i8's shapes), loaded only under its option.
func routerFamily(k RouterKernel) (string, bool) {
	if k == RouterCert {
		return certShape.family, true
	}
	sh, ok := qiShapes[k]
	return sh.family, ok
}

// familyKernels are the entry points of the modules only some options load
// (the integer router's, kvshadow=on's), each with its dynamic shared
// memory, into the backend's table of functions.
var familyKernels = withRouterKernels(map[string]map[string]int{
	"norm_bf":     {"add_rmsnorm_bf": 0, "gated_rmsnorm_bf": 0},
	"norm_bfo":    {"add_rmsnorm_bfo": 0, "gated_rmsnorm_bfo": 0},
	"qk_rows":     {"qk_rows_f32": 0, "qk_rows_bf16": 0, "qk_rows_f32_shadow": 0},
	"attn_shadow": {"qk_prep_f32_shadow": 0, "kv_shadow_rows": 0},
	"norm_comb":   {normCombKernel: 0},
	"gemm_conv":   {convGemmKernel: 0, convFixKernel: 0}, // the GEMM's shared memory set by GEMM.launchTile
	"route_cert": {certShapes[0].kernel: certShapes[0].shared(), certShapes[1].kernel: certShapes[1].shared(),
		certSelectKernel: certSelectMaxShared, certBoundKernel: 0},
})

// withRouterKernels is fams with qgemm_i8's shapes' kernels added to their
// modules.
func withRouterKernels(fams map[string]map[string]int) map[string]map[string]int {
	for _, sh := range qiShapes {
		if fams[sh.family] == nil {
			fams[sh.family] = map[string]int{}
		}
		fams[sh.family][sh.kernel] = sh.shared()
	}
	return fams
}

// addModule loads a module with load, keeps it for Close and hands it to
// add, which finds its kernels.
func (b *Backend) addModule(load func(*driver.Context) (*driver.Module, error), add func(*driver.Module) error) error {
	m, err := load(b.ctx)
	if err != nil {
		return err
	}
	b.mods = append(b.mods, m)
	return add(m)
}

// loadFamilyKernels loads family's module and its familyKernels.
func (b *Backend) loadFamilyKernels(family string) error {
	m, err := loadFamily(b.ctx, family)
	if err != nil {
		return err
	}
	b.mods = append(b.mods, m)
	for name, shared := range familyKernels[family] {
		if b.fn[name], err = m.Function(name); err != nil {
			return err
		}
		if shared > 0 {
			if err := b.fn[name].SetMaxDynamicShared(shared); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainKernels are the entry points of ops.cu.
var plainKernels = []string{
	"embed_rows", "add_rmsnorm", "qgemm", "qgemm_s", "qgemm_f64", "qgemm_f64_w", "qgemm_f64_h", "qgemm_rows", "conv_silu", "delta_rule", "gated_rmsnorm",
	"qk_prep_rows_f32", "qk_prep_rows_bf16", "route_select", "experts_gate_up", "experts_down", "advance", "convert",
	"attn_rows_f32_j2", "attn_rows_f32_j4", "attn_rows_f32_j8", "attn_rows_f32_j16",
	"attn_rows_bf16_j2", "attn_rows_bf16_j4", "attn_rows_bf16_j8", "attn_rows_bf16_j16",
}

// Close waits for the GPU and releases everything the backend holds; its
// buffers, matrices and programs must not be used afterwards.
func (b *Backend) Close() error {
	if b.ctx == nil {
		return nil
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	if b.s != nil {
		keep(b.s.Sync())
	}
	for _, p := range append(b.held, b.counter) {
		if p != 0 {
			keep(b.ctx.Free(p))
		}
	}
	for _, p := range append(b.pooled, b.scratch.p, b.zeros.p, b.tickets.p, b.deltaFlags.p) {
		if p != 0 {
			keep(b.freeOrdered(p))
		}
	}
	for _, p := range b.ropes {
		keep(b.ctx.Free(p))
	}
	for _, sh := range b.shadows {
		keep(b.freeOrdered(sh.ks))
		keep(b.freeOrdered(sh.vs))
	}
	if b.o.Pool && b.s != nil {
		keep(b.s.Sync())
		keep(b.ctx.TrimPool())
	}
	if b.up != nil {
		keep(b.up.Close())
	}
	if b.rb.side != nil {
		keep(b.rb.side.Sync())
		keep(b.rb.side.Close())
	}
	keep(b.side.close())
	if b.rb.stage != nil {
		keep(b.rb.stage.Free())
	}
	for _, m := range b.mods {
		keep(m.Close())
	}
	if b.s != nil {
		keep(b.s.Close())
	}
	keep(b.ctx.Close())
	b.ctx = nil
	return first
}

func (b *Backend) Name() string { return "cuda" }

// Device describes the backend's GPU.
func (b *Backend) Device() driver.Device { return b.ctx.Device() }

// KVCacheType is the element type of the KV caches (Options.KV).
func (b *Backend) KVCacheType() backend.DType { return b.o.KV }

// Asynchronous: Run queues the program and returns.
func (b *Backend) Asynchronous() bool { return true }

// alloc is a zeroed device allocation of at least n bytes.
func (b *Backend) alloc(n int64, label string) (driver.Ptr, error) {
	n = max(16, (n+15)&^15)
	p, err := b.trimmedRetry(func() (driver.Ptr, error) { return b.ctx.Alloc(n, label) })
	if err != nil {
		return 0, err
	}
	if err := b.s.Fill32(p, 0, n/4); err != nil {
		b.ctx.Free(p)
		return 0, err
	}
	return p, nil
}

// trimmedRetry is alloc's result, or, where it fails under pool=on, its
// result once more after the pool's unused memory is handed back to the
// driver (the pool keeps up to poolReserve mapped).
func (b *Backend) trimmedRetry(alloc func() (driver.Ptr, error)) (driver.Ptr, error) {
	p, err := alloc()
	if err != nil && b.o.Pool && b.s.Sync() == nil && b.ctx.TrimPool() == nil {
		p, err = alloc()
	}
	return p, err
}

// allocOrdered is alloc from the device's memory pool in the backend
// stream's order (Options.Pool): zeroed there, usable by everything queued
// after it; without the pool, alloc. Free it with freeOrdered.
func (b *Backend) allocOrdered(n int64, label string) (driver.Ptr, error) {
	if !b.o.Pool {
		return b.alloc(n, label)
	}
	if !b.primed {
		b.primed = true
		_ = b.primePool() // a reserve the device cannot map now only costs time later
	}
	n = max(16, (n+15)&^15)
	p, err := b.trimmedRetry(func() (driver.Ptr, error) { return b.s.Alloc(n, label) })
	if err != nil {
		return 0, err
	}
	if err := b.s.Fill32(p, 0, n/4); err != nil {
		b.s.Free(p)
		return 0, err
	}
	return p, nil
}

// freeOrdered frees an allocation of allocOrdered: back to the pool once
// the work queued before it is done (reads on the side stream wait for
// their copies before they return, so none is left running), or, without
// the pool, at once.
func (b *Backend) freeOrdered(p driver.Ptr) error {
	if !b.o.Pool {
		return b.ctx.Free(p)
	}
	return b.s.Free(p)
}

// poolReserve is the memory the pool maps when first used, after the
// weights (the model's workspace is the first state buffer it allocates),
// at most a quarter of the free memory, and the most freed memory it keeps
// mapped past a synchronisation (more goes back to the driver, for the
// allocations that do not take the pool: weights, modules, graphs): by
// their sizes (computed, not measured), a 4K-token prompt's KV caches,
// shadows and scratch come to about 1.2 GB on the 35B model, a 16K one's
// to about 3.5.
const poolReserve = 2 << 30

func (b *Backend) primePool() error {
	free, _, err := b.ctx.MemInfo()
	if err != nil {
		return err
	}
	return b.ctx.KeepPoolMemory(b.s, poolReserve, min(int64(poolReserve), int64(free)/4))
}

// grow returns g's memory, at least n bytes, replacing it by a larger
// allocation where needed (the old one is kept: programs point at it).
func (b *Backend) grow(g *grower, n int64, label string) (driver.Ptr, error) {
	if n <= g.bytes && g.p != 0 {
		return g.p, nil
	}
	n = max(n, 2*g.bytes, 1<<16)
	p, err := b.allocOrdered(n, label)
	if err != nil {
		return 0, err
	}
	if g.p != 0 {
		b.pooled = append(b.pooled, g.p)
	}
	g.p, g.bytes = p, n
	return p, nil
}

// memory is one allocation of Alloc.
type memory struct {
	b     *Backend
	p     driver.Ptr
	bytes int64
}

func (*memory) Backend() string { return "cuda" }

func (b *Backend) Alloc(n int, t backend.DType) (backend.Buffer, error) {
	if err := backend.CheckAlloc(n, t); err != nil {
		return backend.Buffer{}, err
	}
	bytes := int64(n) * int64(t.Size())
	p, err := b.allocOrdered(bytes, fmt.Sprintf("a buffer of %d %s", n, t))
	if err != nil {
		return backend.Buffer{}, err
	}
	m := &memory{b: b, p: p, bytes: bytes}
	b.rb.queued([]span{{m: m, lo: 0, hi: bytes}}, nil) // the zeroing
	return backend.Buffer{Mem: m, Len: n, Type: t}, nil
}

func (b *Backend) Free(buf backend.Buffer) {
	if m, ok := buf.Mem.(*memory); ok && m.b == b && m.p != 0 {
		b.shadowsFreed(m)
		b.freeOrdered(m.p)
		m.p = 0
	}
}

// addr is the device address of buf's first element, after checking that
// buf is a live allocation of this backend.
func (b *Backend) addr(buf backend.Buffer) (driver.Ptr, error) {
	m, ok := buf.Mem.(*memory)
	switch {
	case buf.Mem == nil:
		return 0, fmt.Errorf("cuda: a buffer is missing")
	case !ok || m.b != b:
		return 0, fmt.Errorf("cuda: a buffer of another backend (%s)", buf.Mem.Backend())
	case m.p == 0:
		return 0, fmt.Errorf("cuda: a freed buffer")
	case int64(buf.Offset+buf.Len)*int64(buf.Type.Size()) > m.bytes:
		return 0, fmt.Errorf("cuda: a view past the end of its allocation")
	}
	return m.p.Add(int64(buf.Offset) * int64(buf.Type.Size())), nil
}

func (b *Backend) hostCheck(buf backend.Buffer, n int, ints bool) (driver.Ptr, error) {
	if err := backend.CheckHost(buf, n, ints); err != nil {
		return 0, err
	}
	return b.addr(buf)
}

func (b *Backend) Write(dst backend.Buffer, src []float32) error {
	p, err := b.hostCheck(dst, len(src), false)
	if err != nil || len(src) == 0 {
		return err
	}
	b.rb.queued(spans([]backend.Buffer{dst}), nil)
	if err := b.s.CopyToDevice(p, backend.Encode(dst.Type, src)); err != nil {
		return b.surfaced(err)
	}
	return b.surfaced(b.shadowsWritten(dst.Mem.(*memory), p, int64(len(src))*int64(dst.Type.Size())))
}

func (b *Backend) WriteInts(dst backend.Buffer, src []int32) error {
	p, err := b.hostCheck(dst, len(src), true)
	if err != nil || len(src) == 0 {
		return err
	}
	b.rb.queued(spans([]backend.Buffer{dst}), nil)
	return b.surfaced(b.s.CopyToDevice(p, bytesOf(src)))
}

// Read waits for the work before it that writes src (readback.go).
func (b *Backend) Read(src backend.Buffer, dst []float32) error {
	p, err := b.hostCheck(src, len(dst), false)
	if err != nil || len(dst) == 0 {
		return err
	}
	if src.Type == backend.F32 {
		return b.readBytes(bytesOf(dst), src, p)
	}
	h := make([]uint16, len(dst))
	if err := b.readBytes(bytesOf(h), src, p); err != nil {
		return err
	}
	backend.Widen(src.Type, h, dst)
	return nil
}

func (b *Backend) ReadInts(src backend.Buffer, dst []int32) error {
	p, err := b.hostCheck(src, len(dst), true)
	if err != nil || len(dst) == 0 {
		return err
	}
	return b.readBytes(bytesOf(dst), src, p)
}

// Copy copies on the device, converting between float types as Write does.
func (b *Backend) Copy(dst, src backend.Buffer) error {
	if err := backend.CheckCopy(dst, src); err != nil {
		return err
	}
	d, err := b.addr(dst)
	if err != nil {
		return err
	}
	s, err := b.addr(src)
	if err != nil {
		return err
	}
	if dst.Len == 0 || d == s {
		return nil
	}
	b.rb.queued(spans([]backend.Buffer{dst}), nil)
	bytes := int64(dst.Len) * int64(dst.Type.Size())
	if dst.Type == src.Type {
		if err := b.s.Copy(d, s, bytes); err != nil {
			return b.surfaced(err)
		}
	} else {
		var a driver.Args
		a.Ptr(s).Ptr(d).I64(int64(dst.Len)).I32(src.Type.ConvertCode()).I32(dst.Type.ConvertCode())
		if err := b.s.Launch(b.fn["convert"], driver.D1((dst.Len+255)/256), driver.D1(256), 0, &a); err != nil {
			return b.surfaced(err)
		}
	}
	return b.surfaced(b.shadowsWritten(dst.Mem.(*memory), d, bytes))
}

// KVShadowed says whether float32 KV caches get a bf16 shadow
// (kvshadow=on): the device memory a context needs counts it.
func (b *Backend) KVShadowed() bool { return b.o.kvShadowed() }

// Sync waits for everything queued; an error of the GPU's surfaces here
// with the program it came from.
func (b *Backend) Sync() error {
	if err := b.s.Sync(); err != nil {
		return b.surfaced(err)
	}
	b.rb.settled()
	return nil
}

// surfaced adds to an error of the device which work it may have come
// from: an asynchronous error (a bad address in a kernel) shows at the
// next call that waits, not where it happened.
func (b *Backend) surfaced(err error) error {
	if err == nil || b.last == nil {
		return err
	}
	return fmt.Errorf("%w (an error of the work queued up to now, the last program run being %s; --backend cuda:sync=op names the op)", err, b.last.desc)
}

// matrix is a quantised matrix on the device: the QMatrix the decode
// kernels read, and a QDesc (rowmath.h) for the plain kernels.
type matrix struct {
	shape quant.Matrix // slices nil: the weights live on the device only
	q     *QMatrix
	desc  driver.Ptr
	raw   [qdescBytes]byte // the QDesc's bytes, for tables of several matrices
}

func (w *matrix) Shape() quant.Matrix { return w.shape }

const qdescBytes = 48

func (b *Backend) Upload(m quant.Matrix) (backend.Matrix, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	label := fmt.Sprintf("a %dx%d %d-bit matrix", m.Rows*m.Experts, m.Cols, m.Bits)
	q, err := UploadQMatrix(b.ctx, b.up, &m, label)
	if err != nil {
		return nil, err
	}
	if m.Bits == 4 && m.GroupSize == 64 {
		if err := q.UploadScaleBias(b.up, &m); err != nil {
			q.Free()
			return nil, err
		}
	}
	w := &matrix{shape: m, q: q}
	w.shape.Words, w.shape.Scales, w.shape.Biases = nil, nil, nil
	le := binary.LittleEndian
	le.PutUint64(w.raw[0:], uint64(q.Words))
	le.PutUint64(w.raw[8:], uint64(q.Scales))
	le.PutUint64(w.raw[16:], uint64(q.Biases))
	for i, v := range []int{q.Rows, q.Cols, q.Bits, q.GroupSize, m.WordsPerRow(), m.GroupsPerRow()} {
		le.PutUint32(w.raw[24+4*i:], uint32(v))
	}
	if w.desc, err = b.alloc(qdescBytes, label+" descriptor"); err != nil {
		q.Free()
		return nil, err
	}
	b.held = append(b.held, w.desc)
	if err := b.s.CopyToDevice(w.desc, w.raw[:]); err != nil {
		return nil, err
	}
	return w, nil
}

// mat is the device form of a matrix of this backend.
func (b *Backend) mat(m backend.Matrix) (*matrix, error) {
	w, ok := m.(*matrix)
	if !ok || w == nil {
		return nil, fmt.Errorf("cuda: a matrix that was not uploaded to this backend")
	}
	return w, nil
}

// ropeTable is the float64 table theta^(-2i/rot) the prep kernels read.
func (b *Backend) ropeTable(rot int, theta float64) (driver.Ptr, error) {
	k := ropeKey{rot, theta}
	if p, ok := b.ropes[k]; ok {
		return p, nil
	}
	f := AttnShape{RotaryDim: rot, RopeTheta: theta}.InvFreq()
	p, err := b.alloc(int64(8*max(1, len(f))), "RoPE table")
	if err != nil {
		return 0, err
	}
	if err := b.s.CopyToDevice(p, bytesOf(f)); err != nil {
		b.ctx.Free(p)
		return 0, err
	}
	b.ropes[k] = p
	return p, nil
}
