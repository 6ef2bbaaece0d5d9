package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestMetalBackendOffMacOS: --backend metal opens the Metal backend on a
// Mac; elsewhere it says that Metal is only available there, instead of
// running anything.
func TestMetalBackendOffMacOS(t *testing.T) {
	if runtime.GOOS == "darwin" {
		t.Skip("on macOS --backend metal opens the device (the backend's own tests cover it)")
	}
	r := petal(t, "", "run", "--backend", "metal", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, "--backend metal: Metal is only available on macOS with Apple silicon") {
		t.Fatalf("--backend metal: exit %d, stderr %q", r.code, r.stderr)
	}
	r = petal(t, "", "run", "--backend", "metal:kv=f16", "hi")
	if r.code != 2 || !strings.Contains(r.stderr, "the KV cache is f32 or bf16") {
		t.Fatalf("--backend metal:kv=f16: exit %d, stderr %q", r.code, r.stderr)
	}
}
