package cuda

import (
	"fmt"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// The bf16 shadow of a float32 KV cache (Options.KVShadow): the cache's
// rows rounded to bf16 (as kv_to_bf16 and a bf16 cache round them), kept
// beside it so that a decoded token's attention reads half the bytes
// through attn.cu's bf16 kernels, and prefill's flash attention reads it
// instead of copying the rows it needs every chunk. The float32 cache stays
// the state (what sessions save and restore); the shadow follows it:
//
//   - made when a program first lowers an op over the cache, with the
//     whole cache converted then (it may hold rows already);
//   - a decoded token's row written to both by qk_prep_f32_shadow;
//   - a prefill chunk's rows converted by kv_shadow_rows after they are
//     written;
//   - the whole cache converted again after the host writes or copies into
//     it (Write, Copy), and the shadow dropped when the cache is freed.

// kvShadow is the shadow of one layer's K and V caches.
type kvShadow struct {
	kc, vc driver.Ptr // the float32 caches
	ks, vs driver.Ptr // their bf16 shadows
	maxPos int        // rows
	width  int        // floats a row
	mem    []*memory  // the allocations holding kc and vc
}

// shadowGrid is kv_shadow_rows's grid: a few blocks a multiprocessor.
func (b *Backend) shadowGrid() driver.Dim3 { return driver.D1(4 * b.ctx.Device().SMs) }

// cacheShadow is the shadow of the caches kb and vb (at kc and vc, maxPos
// rows of width floats), made on first use where KVShadowed; nil where it
// is not, the caches are not float32, or the shape is not one the bf16
// kernels take (width a multiple of 8, 16-byte aligned).
func (b *Backend) cacheShadow(kb, vb backend.Buffer, kc, vc driver.Ptr, maxPos, width int) (*kvShadow, error) {
	if !b.KVShadowed() || kb.Type != backend.F32 || vb.Type != backend.F32 || width%8 != 0 || kc%16 != 0 || vc%16 != 0 || maxPos < 1 {
		return nil, nil
	}
	key := [2]driver.Ptr{kc, vc}
	if sh := b.shadows[key]; sh != nil {
		if sh.maxPos != maxPos || sh.width != width {
			return nil, fmt.Errorf("cuda: KV caches at %#x and %#x read as %d rows of %d, shadowed as %d of %d", uint64(kc), uint64(vc), maxPos, width, sh.maxPos, sh.width)
		}
		return sh, nil
	}
	n := 2 * int64(maxPos) * int64(width)
	ks, err := b.allocOrdered(n, "the bf16 shadow of a K cache")
	if err != nil {
		return nil, err
	}
	vs, err := b.allocOrdered(n, "the bf16 shadow of a V cache")
	if err != nil {
		b.freeOrdered(ks)
		return nil, err
	}
	sh := &kvShadow{kc: kc, vc: vc, ks: ks, vs: vs, maxPos: maxPos, width: width, mem: []*memory{kb.Mem.(*memory), vb.Mem.(*memory)}}
	if b.shadows == nil {
		b.shadows = map[[2]driver.Ptr]*kvShadow{}
	}
	b.shadows[key] = sh
	return sh, b.resync(sh)
}

// resync queues the conversion of sh's whole caches.
func (b *Backend) resync(sh *kvShadow) error {
	var a driver.Args
	shadowRowsArgs(&a, sh, 0, sh.maxPos)
	return b.s.Launch(b.fn["kv_shadow_rows"], b.shadowGrid(), driver.D1(256), 0, &a)
}

// shadowRowsArgs are kv_shadow_rows's arguments: rows *from .. of sh (from
// 0: from row 0).
func shadowRowsArgs(a *driver.Args, sh *kvShadow, from driver.Ptr, rows int) {
	a.Ptr(sh.kc).Ptr(sh.vc).Ptr(from).Ptr(sh.ks).Ptr(sh.vs).I32(int32(rows)).I32(int32(sh.maxPos)).I32(int32(sh.width))
}

// shadowRowsStep is a program's step that converts rows *pos .. *pos+rows-1
// of sh (the rows a prefill chunk's QKPrep wrote).
func (b *Backend) shadowRowsStep(sh *kvShadow, pos driver.Ptr, rows int) step {
	return b.launch("kv_shadow_rows", b.shadowGrid(), driver.D1(256), 0, func(a *driver.Args) { shadowRowsArgs(a, sh, pos, rows) })
}

// shadowsWritten queues the conversion of every shadow whose caches
// overlap [p, p+bytes) of m, after the host wrote or copied there.
func (b *Backend) shadowsWritten(m *memory, p driver.Ptr, bytes int64) error {
	for _, sh := range b.shadows {
		n := int64(sh.maxPos) * int64(sh.width) * 4 // a cache's bytes
		hit := false
		for i, c := range []driver.Ptr{sh.kc, sh.vc} {
			hit = hit || sh.mem[i] == m && int64(c) < int64(p)+bytes && int64(p) < int64(c)+n
		}
		if hit {
			if err := b.resync(sh); err != nil {
				return err
			}
		}
	}
	return nil
}

// shadowsFreed drops the shadows of caches in m, freeing their memory once
// the work queued before (which may read them) is done: in the stream's
// order with the pool, else after waiting for the stream.
func (b *Backend) shadowsFreed(m *memory) {
	synced := b.o.Pool
	for key, sh := range b.shadows {
		if sh.mem[0] != m && sh.mem[1] != m {
			continue
		}
		if !synced {
			b.s.Sync() // Free returns nothing: a fault of the GPU's stays in the context, for the next Sync or Run
			synced = true
		}
		b.freeOrdered(sh.ks)
		b.freeOrdered(sh.vs)
		delete(b.shadows, key)
	}
}
