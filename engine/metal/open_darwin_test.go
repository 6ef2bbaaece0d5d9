//go:build darwin

package metal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"petal/engine/metal/device"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// TestDeviceMapHost wraps a memory-mapped file on the Metal device: a range
// reads back through the view Locate picks, nothing can be uploaded or
// copied into a view, Free leaves a view alone, and after Release a
// dispatch binding one is refused.
func TestDeviceMapHost(t *testing.T) {
	d := openDeviceDispatcher(t)
	const size = 3*device.PageSize + 100
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	region, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(region)

	m, err := d.MapHost(region, 256)
	if err != nil {
		t.Fatal(err)
	}
	const off, n = 2*device.PageSize + 40, 256
	a, err := m.Locate(off, n)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := d.Download(got, a); err != nil || !bytes.Equal(got, data[off:off+n]) {
		t.Fatalf("bytes [%d, %d) through the view: %v", off, off+n, err)
	}
	if err := d.Upload(a, got); err == nil {
		t.Error("an upload into a view of the memory map")
	}
	tmp, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(tmp)
	if err := d.Copy(a, dispatch.Arg{Mem: tmp}, n); err == nil {
		t.Error("a copy into a view of the memory map")
	}
	d.Free(a.Mem)
	if err := d.Download(got, a); err != nil {
		t.Errorf("Free released a view: %v", err)
	}
	m.Release()
	k, err := d.Kernel("ops", "convert")
	if err != nil {
		t.Fatal(err)
	}
	p := kernels.ConvertParams{N: n / 4}
	cmd := dispatch.Command{Kernel: k, Buffers: []dispatch.Arg{a, {Mem: tmp}}, Params: params(p), Groups: dispatch.D1(1), Threads: dispatch.D1(64)}
	if err := d.Submit([]dispatch.Command{cmd}); err == nil {
		t.Error("a dispatch binding a released view was submitted")
	}
}

// TestDeviceTensorOps asks the Metal device for tensor operations: where it
// has them, gemm_tensor.metal compiled at MSL 4.0 (read back) and every
// other family stays 3.1; where not, the reason names the device. It skips
// without a device.
func TestDeviceTensorOps(t *testing.T) {
	d := openDeviceDispatcher(t)
	dev := d.dev
	if err := d.TensorOps(); err != nil {
		t.Logf("no tensor operations: %v", err)
		if !dev.Info.Metal4 || dev.Info.AppleFamily < 10 {
			return
		}
		t.Fatalf("a Metal 4, Apple%d device refused gemm_tensor.metal: %v", dev.Info.AppleFamily, err)
	}
	if got := d.libs[kernels.TensorFamily].Language; got != device.MSL40 {
		t.Errorf("%s.metal compiled as MSL %s", kernels.TensorFamily, got)
	}
	if _, err := d.Kernel("gemm", "moe_route"); err != nil {
		t.Fatal(err)
	}
	if got := d.libs["gemm"].Language; got != device.MSL31 {
		t.Errorf("gemm.metal compiled as MSL %s", got)
	}
}

// openDeviceDispatcher is the dispatcher over the system's Metal device,
// closed with the test; without a device the test skips.
func openDeviceDispatcher(t *testing.T) *deviceDispatcher {
	t.Helper()
	dev, err := device.Open()
	if err != nil {
		if errors.Is(err, device.ErrUnsupported) {
			t.Skipf("no Metal device: %v", err)
		}
		t.Fatal(err)
	}
	d := &deviceDispatcher{dev: dev, libs: map[string]*device.Library{}}
	t.Cleanup(func() { d.Close() })
	return d
}
