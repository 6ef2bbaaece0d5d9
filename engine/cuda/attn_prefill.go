package cuda

import (
	"fmt"
	"strings"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// Flash attention for prefill (attn_prefill.cu): a block takes one KV head
// and 64 query rows (64/G tokens times the G query heads sharing it), the
// scores and the probabilities on the tensor cores in bf16 with float32
// sums and the softmax in float32.
//
// The wide kernels (flash_wide_*, FlashShape.Wide) take 128 query rows a
// block in 8 warps and keep the next key tile's copies in flight while a
// tile's products run.
const (
	flashRows    = 64  // query rows (token, head) per block
	flashThreads = 128 // 4 warps of 16 query rows
	wideRows     = 128
	wideThreads  = 256
	wideKeys     = 32 // keys a tile (FW_BN)
)

// wgShared is flash_wg's dynamic shared memory: two warpgroups' Q tiles
// (FG_QTILE), two K and two V tiles (FG_KVTILE), and the 1024 bytes the
// kernel may skip to align them for the 128-byte swizzle.
const wgShared = 2*64*2*256 + 4*64*2*256 + 1024

// flashHeadDims are the head sizes the kernels are built for.
var flashHeadDims = []int{128, 256}

// FlashShape is one Attention op of a prefill chunk.
type FlashShape struct {
	Rows            int // tokens of the chunk
	QHeads, KVHeads int
	HeadDim         int
	MaxPos          int // rows the caches hold
	KV              KVType
	Wide            bool // the flash_wide kernels
	WG              bool // attn_prefill_wg.cu's flash_wg_bf16_d256 (heads of 256, a bf16 cache)
	WGPipe          bool // with WG, its flash_wgp_bf16_d256 (attn=wgp)
	WGOver          bool // with WG and WGPipe, attn_prefill_wgo.cu's flash_wgo_bf16_d256 (attn=wgo)
}

// FlashBuffers are the op's device buffers: Q [Rows][QH][D] and QG
// [Rows][QH][2D] float32, the caches [MaxPos][KVH][D], Pos i32 [1], Out
// [Rows][QH][D] float32.
type FlashBuffers struct {
	Q, QG, KCache, VCache, Pos, Out driver.Ptr
}

// shared is the Q tile and one K and one V tile of 64 rows of D bf16;
// wide: the Q tile of 128 rows, two K and two V tiles of 32, and
// for a float32 cache the staging of one K and one V tile in float32.
func (sh FlashShape) shared() int {
	if sh.WG {
		return wgShared
	}
	if sh.Wide {
		n := wideRows*2*sh.HeadDim + 4*wideKeys*2*sh.HeadDim
		if sh.KV == KVF32 {
			n += 2 * wideKeys * 4 * sh.HeadDim
		}
		return n
	}
	return 3 * flashRows * 2 * sh.HeadDim
}

// rows and threads are the query rows and threads of a block.
func (sh FlashShape) rows() int {
	if sh.Wide || sh.WG {
		return wideRows
	}
	return flashRows
}

func (sh FlashShape) threads() int {
	if sh.Wide || sh.WG {
		return wideThreads
	}
	return flashThreads
}

func (sh FlashShape) kernel() string {
	kv := "f32"
	if sh.KV == KVBF16 {
		kv = "bf16"
	}
	kind := "attn"
	switch {
	case sh.WG && sh.WGOver:
		return flashWGOKernel
	case sh.WG && sh.WGPipe:
		return flashWGKernels[1]
	case sh.WG:
		return flashWGKernels[0]
	case sh.Wide:
		kind = "wide"
	}
	return fmt.Sprintf("flash_%s_%s_d%d", kind, kv, sh.HeadDim)
}

// Check says why the kernels cannot take sh, or nil.
func (sh FlashShape) Check() error {
	switch {
	case sh.KVHeads < 1 || sh.QHeads%sh.KVHeads != 0:
		return fmt.Errorf("cuda: flash attention: %d query heads over %d KV heads", sh.QHeads, sh.KVHeads)
	case sh.rows()%(sh.QHeads/sh.KVHeads) != 0:
		return fmt.Errorf("cuda: flash attention: %d query heads per KV head; the kernel takes a divisor of %d", sh.QHeads/sh.KVHeads, sh.rows())
	case sh.HeadDim != 128 && sh.HeadDim != 256:
		return fmt.Errorf("cuda: flash attention: heads of %d values; the kernels are built for %v", sh.HeadDim, flashHeadDims)
	case sh.KV != KVF32 && sh.KV != KVBF16:
		return fmt.Errorf("cuda: flash attention: KV element type %v", sh.KV)
	case sh.WG && (sh.HeadDim != 256 || sh.KV != KVBF16):
		return fmt.Errorf("cuda: flash attention on wgmma: heads of %d over a %v cache; it is built for heads of 256 over bf16", sh.HeadDim, sh.KV)
	case sh.Rows < 0 || sh.MaxPos < 1:
		return fmt.Errorf("cuda: flash attention: %d rows over a cache of %d", sh.Rows, sh.MaxPos)
	}
	return nil
}

// grid is (blocks of rows()/G tokens, KV heads).
func (sh FlashShape) grid() driver.Dim3 {
	tokens := sh.rows() / (sh.QHeads / sh.KVHeads)
	return driver.Dim3{X: ceil(sh.Rows, tokens), Y: sh.KVHeads, Z: 1}
}

// args are the kernel's parameters in order.
func (sh FlashShape) args(a *driver.Args, b FlashBuffers) {
	a.Ptr(b.Q).Ptr(b.QG).Ptr(b.KCache).Ptr(b.VCache).Ptr(b.Pos).Ptr(b.Out).
		I32(int32(sh.Rows)).I32(int32(sh.QHeads)).I32(int32(sh.KVHeads)).I32(int32(sh.MaxPos))
}

// checkFlashAligned checks the 16-byte loads of Q and the caches and the
// 8-byte accesses of the gates and the output.
func checkFlashAligned(b FlashBuffers) error {
	if b.Q%16 != 0 || b.KCache%16 != 0 || b.VCache%16 != 0 || b.QG%8 != 0 || b.Out%8 != 0 {
		return fmt.Errorf("cuda: flash attention: q and the caches must be 16-byte aligned, qg and out 8-byte")
	}
	return nil
}

// LoadFlashAttnModule loads the flash attention kernels embedded in the
// binary.
func LoadFlashAttnModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "attn_prefill")
}

// LoadFlashWGModule loads attn_prefill_wg.cu's kernel (sm_90a PTX: a GPU of
// compute capability 9.0 only).
func LoadFlashWGModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "attn_prefill_wg")
}

// flashWGShape is the shape attn_prefill_wg.cu's kernels take.
var flashWGShape = FlashShape{HeadDim: 256, KV: KVBF16, WG: true}

// flashWGKernels are attn_prefill_wg.cu's entry points, one shape:
// flash_wg_bf16_d256 (attn=wg), and flash_wgp_bf16_d256 (attn=wgp,
// FlashShape.WGPipe, the default), whose warpgroups overlap a tile's
// softmax with the tile before's P·V (2.3 % faster prefill at 128K on an
// H100: docs/bench/cuda, pipebench1).
var flashWGKernels = []string{"flash_wg_bf16_d256", "flash_wgp_bf16_d256"}

// LoadFlashWGOModule loads attn_prefill_wgo.cu's kernel (sm_90a, as
// attn_prefill_wg's).
func LoadFlashWGOModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "attn_prefill_wgo")
}

// flashWGOKernel is attn_prefill_wgo.cu's entry point (attn=wgo,
// FlashShape.WGOver): flash_wgp_bf16_d256's arithmetic with its wgmma kept
// pipelined by ptxas.
const flashWGOKernel = "flash_wgo_bf16_d256"

// flashKindShape is the shape flags of a flash kernel named by kind:
// "flash", "wide", or a wgmma kernel's entry point.
func flashKindShape(kind string) FlashShape {
	return FlashShape{Wide: kind == "wide", WG: strings.HasPrefix(kind, "flash_wg"),
		WGPipe: kind == flashWGKernels[1] || kind == flashWGOKernel, WGOver: kind == flashWGOKernel}
}

// wgmmaGPU says whether the GPU takes sm_90a's modules (wgmma).
func wgmmaGPU(c *driver.Context) bool { d := c.Device(); return d.Major == 9 && d.Minor == 0 }

// FlashAttn launches the flash attention kernels of one module.
type FlashAttn struct {
	fn map[string]*driver.Function
}

// flashKernels are the entry points of attn_prefill.cu.
func flashKernels() []FlashShape {
	var shapes []FlashShape
	for _, wide := range []bool{false, true} {
		for _, kv := range []KVType{KVF32, KVBF16} {
			for _, d := range flashHeadDims {
				shapes = append(shapes, FlashShape{HeadDim: d, KV: kv, Wide: wide})
			}
		}
	}
	return shapes
}

// kvCopyKernel is attn_prefill.cu's copy of a float32 cache's rows to
// bf16 (Options.KVCopy).
const kvCopyKernel = "kv_to_bf16"

// NewFlashAttn finds the kernels in mod and raises their shared-memory
// limit (before any graph records a launch of them).
func NewFlashAttn(c *driver.Context, mod *driver.Module) (*FlashAttn, error) {
	f := &FlashAttn{fn: map[string]*driver.Function{}}
	fn, err := mod.Function(kvCopyKernel)
	if err != nil {
		return nil, err
	}
	f.fn[kvCopyKernel] = fn
	return f, f.add(c, mod, flashKernels())
}

// AddWG adds attn_prefill_wg.cu's kernels (flashWGKernels) from their
// module (LoadFlashWGModule).
func (f *FlashAttn) AddWG(c *driver.Context, mod *driver.Module) error {
	pipe := flashWGShape
	pipe.WGPipe = true
	return f.add(c, mod, []FlashShape{flashWGShape, pipe})
}

// AddWGO adds attn_prefill_wgo.cu's kernel (flashWGOKernel) from its
// module (LoadFlashWGOModule).
func (f *FlashAttn) AddWGO(c *driver.Context, mod *driver.Module) error {
	over := flashWGShape
	over.WGPipe, over.WGOver = true, true
	return f.add(c, mod, []FlashShape{over})
}

func (f *FlashAttn) add(c *driver.Context, mod *driver.Module, shapes []FlashShape) error {
	for _, sh := range shapes {
		fn, err := mod.Function(sh.kernel())
		if err != nil {
			return err
		}
		if need, have := sh.shared(), c.Device().SharedOptIn; need > have {
			return fmt.Errorf("cuda: %s needs %d bytes of shared memory; the GPU allows %d", sh.kernel(), need, have)
		}
		if err := fn.SetMaxDynamicShared(sh.shared()); err != nil {
			return err
		}
		f.fn[sh.kernel()] = fn
	}
	return nil
}

// kvCopyGrid is kv_to_bf16's grid: a few blocks a multiprocessor, each
// thread a 16-byte store a step.
func kvCopyGrid(sms int) driver.Dim3 { return driver.D1(4 * sms) }

// KVCopyBuffers are kv_to_bf16's: the float32 caches [MaxPos][width], the
// position, and the bf16 copies of the same shape.
type KVCopyBuffers struct {
	KCache, VCache, Pos, K, V driver.Ptr
}

// LaunchKVCopy queues the bf16 copy of rows 0 .. *pos+rows-1 (at most
// maxPos) of two float32 caches of width floats a row.
func (f *FlashAttn) LaunchKVCopy(s *driver.Stream, sms, rows, maxPos, width int, b KVCopyBuffers) error {
	if width%8 != 0 || b.KCache%16 != 0 || b.VCache%16 != 0 || b.K%16 != 0 || b.V%16 != 0 {
		return fmt.Errorf("cuda: kv_to_bf16: rows of %d floats (want a multiple of 8) or buffers not 16-byte aligned", width)
	}
	var a driver.Args
	kvCopyArgs(&a, rows, maxPos, width, b)
	return s.Launch(f.fn[kvCopyKernel], kvCopyGrid(sms), driver.D1(256), 0, &a)
}

func kvCopyArgs(a *driver.Args, rows, maxPos, width int, b KVCopyBuffers) {
	a.Ptr(b.KCache).Ptr(b.VCache).Ptr(b.Pos).Ptr(b.K).Ptr(b.V).I32(int32(rows)).I32(int32(maxPos)).I32(int32(width))
}

// Launch queues the attention of sh on s.
func (f *FlashAttn) Launch(s *driver.Stream, sh FlashShape, b FlashBuffers) error {
	if err := sh.Check(); err != nil {
		return err
	}
	if err := checkFlashAligned(b); err != nil {
		return err
	}
	if sh.Rows == 0 {
		return nil
	}
	var a driver.Args
	sh.args(&a, b)
	return s.Launch(f.fn[sh.kernel()], sh.grid(), driver.D1(sh.threads()), sh.shared(), &a)
}

// flashAttention is the Attention op on the flash kernels where
// Options.FlashAttention is on and the op takes them: at least one block
// of query rows (rows·G >= 64; fewer rows stay on the plain kernel, which
// is as fast there and float32 throughout) and a shape they are built for.
// The module is loaded on first use, and kept until Close.
//
// Over a float32 cache the bf16 kernels read its shadow where it has one
// (Options.KVShadow: its rows up to date since the chunk's QKPrep), else
// with Options.KVCopy kv_to_bf16 first copies the rows the chunk reads to
// bf16 in the program's scratch (2·MaxPos·KVH·D bf16, one layer's K and V:
// bench.KVCopyBytesPerToken), and the bf16 kernel reads the copy.
func (b *Backend) flashAttention(p *program, o *backend.Attention, bufs FlashBuffers, shadow *kvShadow) ([]step, bool, error) {
	if !b.o.FlashAttention || o.KVHeads < 1 || o.Rows*(o.QHeads/o.KVHeads) < flashRows {
		return nil, false, nil
	}
	kvW := o.KVHeads * o.HeadDim
	sh := FlashShape{Rows: o.Rows, QHeads: o.QHeads, KVHeads: o.KVHeads, HeadDim: o.HeadDim,
		MaxPos: o.KCache.Len / max(kvW, 1), KV: kvType(o.KCache.Type), Wide: b.o.FlashWide}
	if sh.Check() != nil || checkFlashAligned(bufs) != nil {
		return nil, false, nil
	}
	var steps []step
	caches := func(bf FlashBuffers) FlashBuffers { return bf } // bf with the caches the attention reads
	if sh.KV == KVF32 && shadow != nil {
		sh.KV = KVBF16
		caches = func(bf FlashBuffers) FlashBuffers {
			bf.KCache, bf.VCache = shadow.ks, shadow.vs
			return bf
		}
	} else if sh.KV == KVF32 && b.o.KVCopy && kvW%8 == 0 {
		var off int64
		n := int64(sh.MaxPos) * int64(kvW) * 2
		kOff, vOff := p.reserve(&off, n), p.reserve(&off, n)
		rows, maxPos, src := sh.Rows, sh.MaxPos, bufs
		if err := b.loadFlash(sh); err != nil { // kv_to_bf16 is in attn_prefill's module
			return nil, false, err
		}
		steps = append(steps, b.launch(kvCopyKernel, kvCopyGrid(b.ctx.Device().SMs), driver.D1(256), 0, func(a *driver.Args) {
			kvCopyArgs(a, rows, maxPos, kvW, KVCopyBuffers{KCache: src.KCache, VCache: src.VCache, Pos: src.Pos,
				K: p.scratch.Add(kOff), V: p.scratch.Add(vOff)})
		}))
		sh.KV = KVBF16
		caches = func(bf FlashBuffers) FlashBuffers {
			bf.KCache, bf.VCache = p.scratch.Add(kOff), p.scratch.Add(vOff)
			return bf
		}
	}
	if sh.KV == KVBF16 && b.o.FlashWG && wgmmaGPU(b.ctx) && o.HeadDim == flashWGShape.HeadDim {
		sh.WG, sh.WGPipe, sh.WGOver = true, b.o.FlashWGPipe, b.o.FlashWGPipe && b.o.FlashWGOver
	}
	if err := b.loadFlash(sh); err != nil {
		return nil, false, err
	}
	return append(steps, b.launch(sh.kernel(), sh.grid(), driver.D1(sh.threads()), sh.shared(), func(a *driver.Args) { sh.args(a, caches(bufs)) })), true, nil
}

// loadFlash loads the module of sh's kernel on first use (attn_prefill, or
// attn_prefill_wg for a WG shape, attn_prefill_wgo for a WGOver one) and
// keeps it until Close.
func (b *Backend) loadFlash(sh FlashShape) error {
	if b.fn[sh.kernel()] != nil {
		return nil
	}
	load := LoadFlashAttnModule
	switch {
	case sh.WG && sh.WGOver:
		load = LoadFlashWGOModule
	case sh.WG:
		load = LoadFlashWGModule
	}
	m, err := load(b.ctx)
	if err != nil {
		if sh.WG {
			return fmt.Errorf("%w (the wgmma flash attention of attn=wg; --backend cuda:attn=wide runs prefill without it)", err)
		}
		return err
	}
	b.mods = append(b.mods, m)
	f := &FlashAttn{fn: map[string]*driver.Function{}}
	switch {
	case sh.WG && sh.WGOver:
		err = f.AddWGO(b.ctx, m)
	case sh.WG:
		err = f.AddWG(b.ctx, m)
	default:
		f, err = NewFlashAttn(b.ctx, m)
	}
	if err != nil {
		return err
	}
	for name, fn := range f.fn {
		b.fn[name] = fn
	}
	return nil
}
