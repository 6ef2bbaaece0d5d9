// Package kernels holds petal's CUDA kernels: the sources (*.cu, one file per
// op family) and the PTX that clang-19 makes from them (gen.sh, through go
// generate), embedded so that a binary needs only the NVIDIA driver, which
// compiles PTX for the GPU at load. check.sh fails when the PTX is stale.
// sass/ holds the same PTX already compiled for compute capability 9.0
// (sass.sh, sass.go), taken where it is current.
package kernels

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:generate sh gen.sh

//go:embed *.ptx
var ptxFiles embed.FS

// PTX returns the PTX module made from family.cu (e.g. "qmatvec"), ending in
// the NUL byte the driver wants.
func PTX(family string) ([]byte, error) {
	b, err := ptxFiles.ReadFile(family + ".ptx")
	if err != nil {
		return nil, fmt.Errorf("kernels: no PTX for %q (families: %s)", family, strings.Join(Families(), ", "))
	}
	return append(b[:len(b):len(b)], 0), nil
}

// Families lists the kernel families embedded, sorted.
func Families() []string {
	entries, _ := ptxFiles.ReadDir(".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".ptx"))
	}
	sort.Strings(names)
	return names
}

// Target is the .target of family's PTX: sm_90 for a module the driver can
// compile for compute capability 9.0 and later, sm_90a for one built for
// 9.0 only (Hopper's wgmma: gemm_wg, gemm_fit, attn_prefill_wg, ...).
func Target(family string) (string, error) {
	b, err := PTX(family)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), ".target "); ok {
			return strings.TrimSpace(strings.SplitN(t, ",", 2)[0]), nil
		}
	}
	return "", fmt.Errorf("kernels: %s.ptx has no .target", family)
}

// ForOnly is the compute capability an architecture-specific target (sm_XYa)
// is for, "" for a target any later GPU takes.
func ForOnly(target string) string {
	t, ok := strings.CutPrefix(target, "sm_")
	if !ok || !strings.HasSuffix(t, "a") || len(t) < 3 {
		return ""
	}
	t = strings.TrimSuffix(t, "a")
	return t[:len(t)-1] + "." + t[len(t)-1:]
}
