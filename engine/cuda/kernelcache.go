package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The driver compiles petal's PTX for the GPU when a module is first
// loaded on a machine (about 26 s for all of them on an H100,
// docs/bench/cuda/2026-12-06-report12) and keeps the result in its compute
// cache, so that later processes load them in a fraction of a second
// (0.48 s for a whole petal run there). A user whose first run sits silent
// for half a minute, or whose cache is off and every run does, is told so.

// slowKernelLoad is how long loading the kernels may take before New says
// why it took so long.
const slowKernelLoad = 5 * time.Second

// driverCacheDir is where the driver keeps compiled kernels: CUDA_CACHE_PATH,
// else ~/.nv/ComputeCache.
func driverCacheDir() string {
	if p := os.Getenv("CUDA_CACHE_PATH"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".nv", "ComputeCache")
}

// driverCacheOff says whether CUDA_CACHE_DISABLE switches the cache off.
func driverCacheOff() bool { return os.Getenv("CUDA_CACHE_DISABLE") == "1" }

// kernelCacheNotice is what to say before the kernels load, or "": the
// driver's cache switched off, or empty (a first run on this machine),
// where the families in compile (of all the backend loads) have no
// built-in machine code for the GPU (modules.go) and so are compiled from
// their PTX.
func kernelCacheNotice(compile []string, all int) string {
	if len(compile) == 0 {
		return ""
	}
	some := len(compile) < all
	if driverCacheOff() {
		if some {
			return fmt.Sprintf("cuda: CUDA_CACHE_DISABLE=1: the driver compiles petal's %s kernels for the GPU on every run (the others are built in)", strings.Join(compile, ", "))
		}
		return "cuda: CUDA_CACHE_DISABLE=1: the driver compiles petal's kernels for the GPU on every run (about half a minute)"
	}
	dir := driverCacheDir()
	if dir == "" {
		return ""
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
		if some {
			return fmt.Sprintf("cuda: compiling petal's %s kernels for this GPU (the others are built in); the driver keeps them for later runs", strings.Join(compile, ", "))
		}
		return "cuda: compiling petal's kernels for this GPU: the first run on a machine takes about half a minute; the driver keeps them for later runs"
	}
	return ""
}

// slowLoadNotice is what to say after a load of the kernels that lasted
// took, or "" where that was quick or was announced before.
func slowLoadNotice(took time.Duration, announced bool) string {
	if took < slowKernelLoad || announced {
		return ""
	}
	where := driverCacheDir()
	if where == "" {
		where = "CUDA_CACHE_PATH"
	}
	return fmt.Sprintf("cuda: loading petal's kernels took %.0f s: the driver compiled them for this GPU; its cache (%s) keeps them for later runs unless it cannot be written", took.Seconds(), where)
}

// KernelCache is the driver's cache of compiled kernels as petal doctor
// reports it: its folder, the bytes in it (-1 where it cannot be read),
// and whether CUDA_CACHE_DISABLE switches it off.
type KernelCache struct {
	Dir   string
	Bytes int64
	Off   bool
}

// DriverKernelCache reads the driver's cache folder's size.
func DriverKernelCache() KernelCache {
	c := KernelCache{Dir: driverCacheDir(), Bytes: -1, Off: driverCacheOff()}
	if c.Dir == "" {
		return c
	}
	var n int64
	err := filepath.WalkDir(c.Dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	switch {
	case err == nil:
		c.Bytes = n
	case os.IsNotExist(err):
		c.Bytes = 0
	}
	return c
}
