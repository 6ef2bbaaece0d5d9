package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKernelCacheNotices: a first run (the driver's cache missing or
// empty) and a cache switched off are announced before the kernels load;
// a warm cache is not; a slow load is explained after, once.
func TestKernelCacheNotices(t *testing.T) {
	all := []string{"ops", "sample", "gemm"}
	dir := t.TempDir()
	t.Setenv("CUDA_CACHE_DISABLE", "")
	t.Setenv("CUDA_CACHE_PATH", filepath.Join(dir, "missing"))
	if m := kernelCacheNotice(all, len(all)); !strings.Contains(m, "first run on a machine") {
		t.Errorf("no cache directory: %q, want the first-run notice", m)
	}
	t.Setenv("CUDA_CACHE_PATH", dir)
	if m := kernelCacheNotice(all, len(all)); !strings.Contains(m, "first run on a machine") {
		t.Errorf("an empty cache: %q, want the first-run notice", m)
	}
	if err := os.WriteFile(filepath.Join(dir, "index"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := kernelCacheNotice(all, len(all)); m != "" {
		t.Errorf("a cache with entries: %q, want nothing", m)
	}
	t.Setenv("CUDA_CACHE_PATH", filepath.Join(dir, "missing"))
	if m := kernelCacheNotice([]string{"sample"}, len(all)); !strings.Contains(m, "petal's sample kernels") || !strings.Contains(m, "others are built in") {
		t.Errorf("one module without machine code: %q, want it named", m)
	}
	if m := kernelCacheNotice(nil, len(all)); m != "" {
		t.Errorf("every module built in: %q, want nothing", m)
	}
	t.Setenv("CUDA_CACHE_PATH", dir)
	t.Setenv("CUDA_CACHE_DISABLE", "1")
	if m := kernelCacheNotice(all, len(all)); !strings.Contains(m, "every run") {
		t.Errorf("the cache off: %q, want it said that every run compiles", m)
	}
	t.Setenv("HOME", dir)
	t.Setenv("CUDA_CACHE_PATH", "")
	if got, want := driverCacheDir(), filepath.Join(dir, ".nv", "ComputeCache"); got != want {
		t.Errorf("the cache without CUDA_CACHE_PATH: %s, want %s", got, want)
	}
	if m := slowLoadNotice(slowKernelLoad-time.Millisecond, false); m != "" {
		t.Errorf("a quick load: %q, want nothing", m)
	}
	if m := slowLoadNotice(26*time.Second, false); !strings.Contains(m, "took 26 s") || !strings.Contains(m, "ComputeCache") {
		t.Errorf("a slow load: %q, want its time and the cache named", m)
	}
	if m := slowLoadNotice(26*time.Second, true); m != "" {
		t.Errorf("a slow load announced before: %q, want nothing more", m)
	}
}
