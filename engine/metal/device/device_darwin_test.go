//go:build darwin

package device

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

func openDevice(t *testing.T) *Device {
	t.Helper()
	d, err := Open()
	if err != nil {
		t.Skipf("no Metal device: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

const addSource = `#include <metal_stdlib>
using namespace metal;
struct AddParams { uint n; float scale; };
kernel void add(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                device float* y [[buffer(2)]], constant AddParams& p [[buffer(3)]],
                uint i [[thread_position_in_grid]]) {
  if (i < p.n) y[i] = fma(a[i], p.scale, b[i]);
}
`

type addParams struct {
	N     uint32
	Scale float32
}

func compileAdd(t *testing.T, d *Device) *Library {
	t.Helper()
	lib, err := d.Compile(addSource, CompileOptions{Language: MSL31, Math: MathSafe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Release)
	return lib
}

// TestCompileReadsBack: the language version and the math mode in force
// are the ones asked for (a cgo-free binary would otherwise get an old MSL
// and fast math).
func TestCompileReadsBack(t *testing.T) {
	d := openDevice(t)
	t.Logf("device %q, Apple family %d, maxBufferLength %d", d.Info.Name, d.Info.AppleFamily, d.Info.MaxBufferLength)
	lib := compileAdd(t, d)
	if lib.Language != MSL31 || lib.Math != MathSafe {
		t.Fatalf("compiled with MSL %s, %s math", lib.Language, lib.Math)
	}
	if _, err := d.Compile(addSource, CompileOptions{}); err == nil {
		t.Error("a compile without a language version was accepted")
	}
	p, err := lib.Pipeline("add")
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := lib.Pipeline("add"); q != p {
		t.Error("the pipeline was made twice")
	}
	if _, err := lib.Pipeline("nonesuch"); err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("a missing kernel: %v", err)
	}
}

func TestCompileErrorIsReported(t *testing.T) {
	d := openDevice(t)
	_, err := d.Compile("kernel void broken(device float* y [[buffer(0)]]) { y[0] = undeclared; }", CompileOptions{Language: MSL31})
	if err == nil || !strings.Contains(err.Error(), "undeclared") {
		t.Fatalf("compile error: %v", err)
	}
}

func fill(b *Buffer, f func(i int) float32) {
	s := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.Bytes()))), b.Len()/4)
	for i := range s {
		s[i] = f(i)
	}
}

func floats(b *Buffer) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.Bytes()))), b.Len()/4)
}

// TestRunOnDevice runs the add kernel from many goroutines at once (each
// Run in its own pool on its own locked thread).
func TestRunOnDevice(t *testing.T) {
	d := openDevice(t)
	p, err := compileAdd(t, d).Pipeline("add")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, _ := d.NewBuffer(4 * n)
			b, _ := d.NewBuffer(4 * n)
			y, _ := d.NewBuffer(4 * n)
			defer a.Release()
			defer b.Release()
			defer y.Release()
			fill(a, func(i int) float32 { return float32(i) })
			fill(b, func(i int) float32 { return float32(g) })
			for range 20 {
				prm := addParams{N: n, Scale: 2}
				if _, err := d.Run(func(e *Encoder) {
					e.Dispatch(p, Size{(n + 255) / 256, 1, 1}, Size{256, 1, 1}, []Arg{{a, 0}, {b, 0}, {y, 0}}, Params(&prm))
				}); err != nil {
					t.Error(err)
					return
				}
				for i, v := range floats(y) {
					if v != float32(2*i+g) {
						t.Errorf("y[%d] = %v, want %v", i, v, 2*i+g)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestDispatchRefusesTooManyBuffers: Metal's 31-entry limit is checked
// before anything is sent.
func TestDispatchRefusesTooManyBuffers(t *testing.T) {
	d := openDevice(t)
	p, _ := compileAdd(t, d).Pipeline("add")
	b, _ := d.NewBuffer(16)
	defer b.Release()
	args := make([]Arg, MaxBuffers)
	for i := range args {
		args[i] = Arg{b, 0}
	}
	_, err := d.Run(func(e *Encoder) { e.Dispatch(p, Size{1, 1, 1}, Size{1, 1, 1}, args, nil) })
	if err == nil || !strings.Contains(err.Error(), "31") {
		t.Fatalf("31 buffers and parameters: %v", err)
	}
}

// TestWrapMapped wraps a mapped file in views smaller than the file and
// reads a range through the view Locate picks.
func TestWrapMapped(t *testing.T) {
	d := openDevice(t)
	p, _ := compileAdd(t, d).Pipeline("add")
	const size = 10*PageSize + 100
	path := filepath.Join(t.TempDir(), "weights")
	data := make([]byte, size)
	for i := 0; i+4 <= size; i += 4 {
		*(*float32)(unsafe.Pointer(&data[i])) = float32(i / 4)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	region, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(region)
	m, err := d.wrapMapped(region, 4*PageSize, PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if len(m.Buffers) < 3 {
		t.Fatalf("%d views for 10 pages under 4-page views", len(m.Buffers))
	}
	const off, n = 7*PageSize + 4000, 256 // a range in a later view
	buf, within, err := m.Locate(off, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	zero, _ := d.NewBuffer(4 * n)
	y, _ := d.NewBuffer(4 * n)
	defer zero.Release()
	defer y.Release()
	prm := addParams{N: n, Scale: 1}
	if _, err := d.Run(func(e *Encoder) {
		e.Dispatch(p, Size{1, 1, 1}, Size{n, 1, 1}, []Arg{{buf, within}, {zero, 0}, {y, 0}}, Params(&prm))
	}); err != nil {
		t.Fatal(err)
	}
	for i, v := range floats(y) {
		if want := float32(off/4 + i); v != want || math.IsNaN(float64(v)) {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestSelectorsRespond: every object petal sends a message to responds to
// its selector on this Mac (the optional ones are reported, not required),
// and every message of the table was asked.
func TestSelectorsRespond(t *testing.T) {
	d := openDevice(t)
	rs, err := d.CheckSelectors()
	if err != nil {
		t.Fatal(err)
	}
	names, _ := messageTable()
	if len(rs) != len(names) {
		t.Fatalf("%d selectors checked of %d", len(rs), len(names))
	}
	for _, r := range rs {
		switch {
		case !r.Responds && r.Optional:
			t.Logf("%s (%s): not on this macOS (optional)", r.Selector, r.On)
		case !r.Responds:
			t.Errorf("the %s does not respond to %s", r.On, r.Selector)
		}
	}
}
