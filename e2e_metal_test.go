package main

import (
	"strings"
	"testing"
)

// TestMetalBackendNotBuilt: the Metal device layer and kernels exist in
// engine/metal, but no backend is built on them yet, and --backend metal
// says so instead of running anything.
func TestMetalBackendNotBuilt(t *testing.T) {
	r := petal(t, "", "run", "--backend", "metal", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, "--backend metal: this backend is not built yet") {
		t.Fatalf("--backend metal: exit %d, stderr %q", r.code, r.stderr)
	}
}
