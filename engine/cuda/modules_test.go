package cuda

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"petal/engine/cuda/kernels"
)

// TestCubinsLoad: on this GPU, each family with a current cubin (the
// binary's, or PETAL_CUDA_SASS's folder) loads from it with every kernel
// its PTX declares, and the load time of the cubins and of the PTX are
// logged (the PTX's as the driver's cache leaves it: CUDA_CACHE_DISABLE=1
// makes it a compile). The kernels' results under the cubins are the
// conformance suite's and the oracle's, which load the same way.
func TestCubinsLoad(t *testing.T) {
	c := gpu(t)
	dir := cubinDir()
	if dir == nil {
		t.Skipf("%s=off", sassEnv)
	}
	d := c.Device()
	entry := regexp.MustCompile(`(?m)^\.(?:visible )?\.entry (\w+)\(`)
	var fromCubin, fromPTX time.Duration
	loaded := 0
	for _, family := range kernels.Families() {
		image, err := kernels.Cubin(dir, family, d.Major, d.Minor)
		if err != nil {
			t.Logf("%s: %v", family, err)
			continue
		}
		start := time.Now()
		m, err := c.LoadModule(image, family)
		if err != nil {
			t.Errorf("%s: the driver refused its cubin: %v", family, err)
			continue
		}
		fromCubin += time.Since(start)
		ptx, err := kernels.PTX(family)
		if err != nil {
			t.Fatal(err)
		}
		names := entry.FindAllSubmatch(ptx, -1)
		if len(names) == 0 {
			t.Errorf("%s: no entry points in its PTX", family)
		}
		for _, n := range names {
			if _, err := m.Function(string(n[1])); err != nil {
				t.Errorf("%s: the cubin lacks %s: %v", family, n[1], err)
			}
		}
		m.Close()
		start = time.Now()
		p, err := c.LoadModule(ptx, family)
		if err != nil {
			t.Fatal(err)
		}
		fromPTX += time.Since(start)
		p.Close()
		loaded++
	}
	t.Logf("%d of %d families from cubins on compute capability %d.%d: %.0f ms to load them, %.0f ms for the same families' PTX",
		loaded, len(kernels.Families()), d.Major, d.Minor, fromCubin.Seconds()*1e3, fromPTX.Seconds()*1e3)
}

// TestSASSEnv: PETAL_CUDA_SASS naming a folder without a manifest is an
// error that names it; unset, off, or a folder sass.sh wrote are not.
func TestSASSEnv(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"", "off"} {
		t.Setenv(sassEnv, v)
		if err := checkSASSEnv(); err != nil {
			t.Errorf("%s=%q: %v", sassEnv, v, err)
		}
	}
	t.Setenv(sassEnv, filepath.Join(dir, "nosuch"))
	if err := checkSASSEnv(); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a folder that is not there: %v, want an error naming it", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.txt"), []byte("# none yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(sassEnv, dir)
	if err := checkSASSEnv(); err != nil {
		t.Errorf("a folder with a manifest: %v", err)
	}
}

// TestDefaultsHaveCubins: every family the default options load has a
// built-in cubin for Hopper (compute capability 9.0) made from its
// embedded PTX, so that a first run on an H100 or H200 compiles nothing
// (the driver takes about half a minute for all of them). A change to a
// default family's PTX lands with its cubin (docs/bench/cuda/lib.sh's
// new_cubin or sass.sh on the GPU machine).
func TestDefaultsHaveCubins(t *testing.T) {
	for _, fam := range noticeFamilies(DefaultOptions()) {
		if _, err := kernels.Cubin(kernels.Embedded(), fam, 9, 0); err != nil {
			t.Errorf("%s: %v", fam, err)
		}
	}
}
