package metal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"petal/engine/backend"
	"petal/engine/metal/device"
	"petal/engine/metal/dispatch"
	"petal/engine/quant"
)

const page = device.PageSize

// pageAligned is n bytes (rounded up to whole pages) starting on a 16 KiB
// page, as a memory map does.
func pageAligned(n int) []byte {
	n = (n + page - 1) / page * page
	raw := make([]byte, n+page)
	skip := (page - int(uintptr(unsafe.Pointer(&raw[0]))%page)) % page
	return raw[skip : skip+n : skip+n]
}

// placed is m with its codes, scales and biases copied into region at the
// byte offsets given and its slices pointing there, as a checkpoint's
// matrices point into its memory map.
func placed(m quant.Matrix, region []byte, wOff, sOff, bOff int) quant.Matrix {
	copy(region[wOff:], bytesOf(m.Words))
	copy(region[sOff:], bytesOf(m.Scales))
	copy(region[bOff:], bytesOf(m.Biases))
	m.Words = unsafe.Slice((*uint32)(unsafe.Pointer(&region[wOff])), len(m.Words))
	m.Scales = unsafe.Slice((*uint16)(unsafe.Pointer(&region[sOff])), len(m.Scales))
	m.Biases = unsafe.Slice((*uint16)(unsafe.Pointer(&region[bOff])), len(m.Biases))
	return m
}

// endToEnd is placed with the three tensors laid end to end from off.
func endToEnd(m quant.Matrix, region []byte, off int) (quant.Matrix, [3]int) {
	s := off + 4*len(m.Words)
	b := s + 2*len(m.Scales)
	return placed(m, region, off, s, b), [3]int{off, s, b}
}

func newMapping(t *testing.T, o Options, maxLen uint64) (*Backend, *mappingRecorder) {
	t.Helper()
	r := &mappingRecorder{recorder: &recorder{}, maxLen: maxLen}
	b, err := New(r, o)
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}

func mapRegion(t *testing.T, b *Backend, region []byte, largest int64) func() error {
	t.Helper()
	release, err := b.MapRegions([]backend.MappedRegion{{Name: "model.safetensors", Data: region, Largest: largest}})
	if err != nil {
		t.Fatal(err)
	}
	return release
}

func upload(t *testing.T, b *Backend, m quant.Matrix) *matrix {
	t.Helper()
	w, err := b.Upload(m)
	if err != nil {
		t.Fatal(err)
	}
	return w.(*matrix)
}

func isView(a dispatch.Arg) bool {
	m, ok := a.Mem.(*hostMem)
	return ok && m.view
}

// sameBytes: the n bytes at a are want (what a kernel reads there).
func sameBytes(t *testing.T, what string, a dispatch.Arg, want []byte) {
	t.Helper()
	got, err := at(a, len(want))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s: the bytes at %+v are not the tensor's (%v)", what, a, err)
	}
}

// TestUploadBindsInPlace: a matrix whose codes, scales and biases lie in a
// wrapped region is bound to the view at their offsets, and nothing of
// them is uploaded (only the interleaved scale/bias words and the QShape
// table are); the dispatches of its ops bind the view there.
func TestUploadBindsInPlace(t *testing.T) {
	for _, bits := range []int{4, 8} {
		b, r := newMapping(t, DefaultOptions(), 1<<30)
		region := pageAligned(4 * page)
		mapRegion(t, b, region, page)
		src := quant.RandomMatrix(rand.New(rand.NewPCG(1, uint64(bits))), 1, 67, 192, bits, 64)
		m, offs := endToEnd(src, region, 1000)
		before := r.uploaded
		w := upload(t, b, m)
		view := r.maps[0].views[0]
		for i, a := range []dispatch.Arg{w.words, w.scales, w.biases} {
			if a.Mem != view || a.Off != int64(offs[i]) {
				t.Errorf("%d-bit tensor %d: bound at %+v, want the view at %d", bits, i, a, offs[i])
			}
		}
		want := int64(len(params(w.q)))
		if bits == 4 {
			want += 4 * int64(len(src.Scales)) // the interleaved words, made here
		}
		if got := r.uploaded - before; got != want {
			t.Errorf("%d-bit: %d bytes uploaded, want %d (the derived tables only)", bits, got, want)
		}
		total := int64(4*len(src.Words) + 2*len(src.Scales) + 2*len(src.Biases))
		if in, cp := b.WeightBytes(); in != total || cp != 0 {
			t.Errorf("%d-bit: %d bytes in place and %d copied, want %d and 0", bits, in, cp, total)
		}
		sameBytes(t, "words", w.words, bytesOf(src.Words))
		sameBytes(t, "scales", w.scales, bytesOf(src.Scales))
		sameBytes(t, "biases", w.biases, bytesOf(src.Biases))

		f := fixture{t, b, nil}
		x := f.f32(5 * 192)
		for _, rows := range []int{1, 5} {
			p := compile(t, b, &backend.QLinear{X: x, W: w, Y: f.f32(rows * 67), Rows: rows})
			c := p.cmds[0]
			if c.Buffers[0] != w.words || (!strings.HasSuffix(c.Kernel.Name(), "_sb") && c.Buffers[1] != w.scales) || c.Buffers[2] != w.biases {
				t.Errorf("%d-bit, %d rows: %s binds %+v, want the view at the tensors' offsets", bits, rows, c.Kernel.Name(), c.Buffers[:3])
			}
		}
	}
}

// TestUploadCopiesOutsideRegions: a matrix in the Go heap, and a tensor
// that runs past the end of the region, are copied; the tensors of one
// matrix are decided one by one.
func TestUploadCopiesOutsideRegions(t *testing.T) {
	b, r := newMapping(t, DefaultOptions(), 1<<30)
	big := pageAligned(8 * page)
	region := big[:4*page]
	mapRegion(t, b, region, page)
	rng := rand.New(rand.NewPCG(2, 2))

	heap := quant.RandomMatrix(rng, 1, 67, 192, 4, 64)
	before := r.uploaded
	w := upload(t, b, heap)
	if isView(w.words) || isView(w.scales) || isView(w.biases) {
		t.Error("a matrix in the heap was bound to a view")
	}
	sameBytes(t, "copied words", w.words, bytesOf(heap.Words))
	if got := r.uploaded - before; got < int64(4*len(heap.Words)+4*len(heap.Scales)) {
		t.Errorf("%d bytes uploaded for a matrix outside the region", got)
	}

	// words straddling the region's end (in memory that is not the
	// region's), scales and biases inside it
	src := quant.RandomMatrix(rng, 1, 67, 192, 4, 64)
	m := placed(src, big, 4*page-100, 1000, 3000)
	w = upload(t, b, m)
	if isView(w.words) || !isView(w.scales) || !isView(w.biases) || w.scales.Off != 1000 || w.biases.Off != 3000 {
		t.Errorf("words past the region's end, scales and biases inside: bound %+v %+v %+v", w.words, w.scales, w.biases)
	}
	sameBytes(t, "words", w.words, bytesOf(src.Words))
	in, cp := b.WeightBytes()
	if want := int64(4 * len(src.Words)); in != int64(2*len(src.Scales)+2*len(src.Biases)) || cp != int64(4*len(heap.Words)+4*len(heap.Scales))+want {
		t.Errorf("%d bytes in place and %d copied", in, cp)
	}
}

// TestUploadAcrossViews: a region longer than maxBufferLength is wrapped
// in several overlapping views, and a tensor is bound to the one that
// wholly holds it, also one that straddles where a view ends.
func TestUploadAcrossViews(t *testing.T) {
	b, r := newMapping(t, DefaultOptions(), 4*page)
	region := pageAligned(10 * page)
	mapRegion(t, b, region, page)
	if n := r.maps[0].Views(); n != 3 {
		t.Fatalf("10 pages under views of 4 overlapping by 1: %d views, want 3", n)
	}
	views := r.maps[0].views
	rng := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		name      string
		off       int
		view      int
		within    int
		straddles bool
	}{
		{"in the first view", page / 2, 0, page / 2, false},
		{"across the first view's end", 4*page - 800, 1, page - 800, true},
		{"in the last view", 9*page + 100, 2, 3*page + 100, false},
	} {
		src := quant.RandomMatrix(rng, 1, 17, 192, 4, 64) // 1632 bytes of words, 102 of scales and of biases
		m, offs := endToEnd(src, region, c.off)
		w := upload(t, b, m)
		if w.words.Mem != views[c.view] || w.words.Off != int64(c.within) {
			t.Errorf("words %s (byte %d): bound at %+v, want view %d at %d", c.name, c.off, w.words, c.view, c.within)
		}
		if c.straddles && offs[0]+4*len(src.Words) <= 4*page {
			t.Fatalf("%s: the words end at %d, inside the first view", c.name, offs[0]+4*len(src.Words))
		}
		sameBytes(t, c.name+": words", w.words, bytesOf(src.Words))
		sameBytes(t, c.name+": scales", w.scales, bytesOf(src.Scales))
		sameBytes(t, c.name+": biases", w.biases, bytesOf(src.Biases))
	}
	if _, cp := b.WeightBytes(); cp != 0 {
		t.Errorf("%d bytes copied", cp)
	}
}

// TestInPlaceAlignment: a tensor is bound in place only at an offset that
// is a multiple of the element its kernels read (4 for code words, 2 for
// bf16), else it is copied.
func TestInPlaceAlignment(t *testing.T) {
	b, _ := newMapping(t, DefaultOptions(), 1<<30)
	region := pageAligned(page)
	mapRegion(t, b, region, page)
	for _, c := range []struct {
		off, align int
		ok         bool
	}{{1000, 4, true}, {1002, 4, false}, {1001, 4, false}, {1002, 2, true}, {1001, 2, false}, {0, 4, true}} {
		a, ok := b.inPlace(region[c.off:c.off+64], int64(c.align))
		if ok != c.ok || (ok && a.Off != int64(c.off)) {
			t.Errorf("64 bytes at %d read as %d-byte elements: in place %v at %+v, want %v", c.off, c.align, ok, a, c.ok)
		}
	}
	if _, ok := b.inPlace(region[100:100], 4); ok {
		t.Error("an empty tensor was bound in place")
	}
}

// TestWeightsCopy: under weights=copy, and on a dispatcher that cannot
// wrap host memory (cudarun), MapRegions wraps nothing and every matrix
// is copied.
func TestWeightsCopy(t *testing.T) {
	region := pageAligned(4 * page)
	src := quant.RandomMatrix(rand.New(rand.NewPCG(4, 4)), 1, 67, 192, 4, 64)
	m, _ := endToEnd(src, region, 1000)
	check := func(name string, b *Backend) {
		release := mapRegion(t, b, region, page)
		w := upload(t, b, m)
		if isView(w.words) || isView(w.scales) || isView(w.biases) {
			t.Errorf("%s: bound to a view", name)
		}
		sameBytes(t, name+": words", w.words, bytesOf(src.Words))
		if in, _ := b.WeightBytes(); in != 0 {
			t.Errorf("%s: %d bytes in place", name, in)
		}
		if err := release(); err != nil {
			t.Errorf("%s: release: %v", name, err)
		}
	}
	o := DefaultOptions()
	o.CopyWeights = true
	b, r := newMapping(t, o, 1<<30)
	check("weights=copy", b)
	if len(r.maps) != 0 {
		t.Errorf("weights=copy wrapped %d regions", len(r.maps))
	}
	plain, _ := newRecorded(t, DefaultOptions())
	check("a dispatcher without HostMapper", plain)
}

func TestParseWeightsOption(t *testing.T) {
	for _, c := range []struct {
		value string
		copy  bool
	}{{"mapped", false}, {"copy", true}} {
		o, err := ParseOptions([]backend.Option{{Key: "weights", Value: c.value}})
		if err != nil || o.CopyWeights != c.copy {
			t.Errorf("weights=%s: %+v, %v", c.value, o, err)
		}
	}
	if DefaultOptions().CopyWeights {
		t.Error("the default copies the weights")
	}
	_, err := ParseOptions([]backend.Option{{Key: "weights", Value: "mmap"}})
	if err == nil || !strings.Contains(err.Error(), "mapped or copy") {
		t.Errorf("weights=mmap: %v", err)
	}
	if !strings.Contains(OptionsHelp, "weights=mapped|copy") {
		t.Error("the options help does not list weights=")
	}
}

// TestRegionLifetimes: release waits for the device, releases the views
// of its regions only, and a program binding them no longer runs; a
// matrix uploaded afterwards is copied. Close releases what is left, and a
// release after it does nothing.
func TestRegionLifetimes(t *testing.T) {
	b, r := newMapping(t, DefaultOptions(), 1<<30)
	one, two := pageAligned(2*page), pageAligned(2*page)
	releaseOne := mapRegion(t, b, one, page)
	releaseTwo := mapRegion(t, b, two, page)
	rng := rand.New(rand.NewPCG(5, 5))
	src := quant.RandomMatrix(rng, 1, 67, 192, 4, 64)
	m, _ := endToEnd(src, one, 64)
	w := upload(t, b, m)
	f := fixture{t, b, nil}
	p, err := b.Compile([]backend.Op{&backend.QLinear{X: f.f32(192), W: w, Y: f.f32(67), Rows: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatalf("a program over a view before release: %v", err)
	}
	waits := r.waits
	if err := releaseOne(); err != nil {
		t.Fatal(err)
	}
	first, second := r.maps[0], r.maps[1]
	if !first.released || first.waitsThen <= waits || second.released {
		t.Errorf("released %v (after %d waits, %d before), the other region released %v: want the first only, after a wait",
			first.released, first.waitsThen, waits, second.released)
	}
	if err := p.Run(); err == nil {
		t.Error("a program binding a released view ran")
	}
	if w := upload(t, b, m); isView(w.words) {
		t.Error("a matrix uploaded after release was bound to the released region")
	}
	if err := releaseOne(); err != nil {
		t.Errorf("a second release: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !second.released {
		t.Error("Close left a region wrapped")
	}
	if err := releaseTwo(); err != nil {
		t.Errorf("release after Close: %v", err)
	}
	if _, err := b.MapRegions([]backend.MappedRegion{{Name: "x", Data: one, Largest: 1}}); err == nil {
		t.Error("MapRegions on a closed backend")
	}
}

// TestMapRegionsRefusal: a region the dispatcher cannot wrap fails
// MapRegions, naming the file and the way out, and leaves nothing wrapped.
func TestMapRegionsRefusal(t *testing.T) {
	b, r := newMapping(t, DefaultOptions(), 4*page)
	good := pageAligned(2 * page)
	_, err := b.MapRegions([]backend.MappedRegion{
		{Name: "model-00001-of-00002.safetensors", Data: good, Largest: page},
		{Name: "model-00002-of-00002.safetensors", Data: pageAligned(8 * page), Largest: 4 * page}, // a tensor as long as a view
	})
	if err == nil || !strings.Contains(err.Error(), "model-00002-of-00002.safetensors") || !strings.Contains(err.Error(), "weights=copy") {
		t.Fatalf("a tensor longer than a view: %v", err)
	}
	if len(b.regions) != 0 || !r.maps[0].released {
		t.Errorf("after the refusal %d regions are wrapped, the first released %v", len(b.regions), r.maps[0].released)
	}
}

// matricesOf is every matrix an op names.
func matricesOf(op backend.Op) []*matrix {
	var out []*matrix
	v := reflect.ValueOf(op).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i).Interface().(type) {
		case backend.Matrix:
			if w, ok := f.(*matrix); ok {
				out = append(out, w)
			}
		case []backend.Matrix:
			for _, m := range f {
				if w, ok := m.(*matrix); ok {
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// TestWrappedRegionsAreOnlyRead: with every matrix's codes, scales and
// biases bound to views of a wrapped region, no dispatch of any lowering
// (every op at several rows, the decode layers at the 35B and tiny
// shapes, prefill's GEMMs, the fused norms; fused, simd and fused norms on
// or off) binds a view
// where its kernel's source declares anything but a device const buffer:
// nothing writes into the checkpoint, and the offsets need only the
// element's alignment (constant buffers would need more).
func TestWrappedRegionsAreOnlyRead(t *testing.T) {
	sc := newSourceCheck()
	bound := map[string]bool{} // "entry" of every dispatch that binds a view
	for _, o := range []Options{
		{Fused: true, KV: backend.F32, SimdGEMM: true, FusedNorms: true},
		{Fused: true, KV: backend.F32},
		{KV: backend.F32},
	} {
		b, _ := newMapping(t, o, 1<<30)
		region := pageAligned(page)
		mapRegion(t, b, region, page)
		f := fixture{t, b, rand.New(rand.NewPCG(6, 6))}
		var progs [][]backend.Op
		for _, rows := range []int{1, 5, 300} {
			progs = append(progs, everyOp(f, rows, backend.F32))
		}
		for _, sh := range []decodeShape{shape35B, shapeTiny} {
			progs = append(progs, decodeLayer(f, sh, backend.BF16).ops(), prefillOps(f, sh, 128))
		}
		n, g := groupOps(f, true)
		nr, rt, ex := routeOps(f, false)
		progs = append(progs, []backend.Op{n, g}, []backend.Op{nr, rt, ex})
		next := 0
		rebind := func(a *dispatch.Arg, align int) {
			next = (next + 15) &^ 15
			v, ok := b.inPlace(region[next:next+16], int64(align))
			if !ok {
				t.Fatalf("16 bytes at %d not in place", next)
			}
			*a, next = v, (next+16)%(page-16)
		}
		for i, ops := range progs {
			for _, op := range ops {
				for _, w := range matricesOf(op) {
					if !isView(w.words) {
						rebind(&w.words, 4)
						rebind(&w.scales, 2)
						rebind(&w.biases, 2)
					}
				}
			}
			p := compile(t, b, ops...)
			what := fmt.Sprintf("%+v, program %d", o, i)
			sc.program(t, p, what)
			for _, c := range p.cmds {
				if c.Barrier {
					continue
				}
				e := c.Kernel.(entry)
				sig := sc.fams[e.family].sigs[e.name]
				for j, a := range c.Buffers {
					if !isView(a) {
						continue
					}
					bound[e.name] = true
					if j >= len(sig.spaces) || sig.spaces[j] != "device const" {
						t.Errorf("%s: %s binds a view of the checkpoint at buffer %d, declared %q", what, e.name, j, sig.spaces[min(j, len(sig.spaces)-1)])
					}
				}
			}
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range bound {
			if !yield(k) {
				return
			}
		}
	})
	t.Logf("entries binding views: %v", names)
	for _, want := range []string{"embed_rows", "qgemm", "qgemm_s", "qmv_f32_r2_sb", "qmv_group_f32_r2_sb", "qmv_group_norm_f32_r2_sb",
		"route_logits8", "route_logits_norm8", "moe_gate_up_f32_sb", "moe_down_f32_sb", "gemm_dense_f32", "gemm_dense_bf16", "gemm_gateup", "gemm_down",
		"experts_gate_up", "experts_down"} {
		if !bound[want] {
			t.Errorf("no dispatch of %s bound a view: the check did not reach it", want)
		}
	}
}
