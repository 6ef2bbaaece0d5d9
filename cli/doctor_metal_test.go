package cli

import (
	"strings"
	"testing"
)

// TestMetalChecksLibraries: a compiled library passes with its own MSL
// version where it has one (gemm_tensor's 4.0), a failed one fails with its
// error, and one skipped (a device without Metal 4's tensor operations) is
// a skip naming why, not a failure.
func TestMetalChecksLibraries(t *testing.T) {
	m := metalReport{Available: true, MSLVersion: "3.1", MathMode: "safe", Libraries: []metalLibrary{
		{Family: "gemm", Compiled: true, Kernels: []string{"gemm_down"}},
		{Family: "gemm_tensor", Compiled: true, Kernels: []string{"gemm_tensor_down"}, MSL: "4.0"},
		{Family: "ops", Error: "MSL did not compile: x"},
		{Family: "gemm_tensor", Skipped: "the device is not in MTLGPUFamilyMetal4: gemm=tensor keeps gemm=simd's kernels here"},
	}}
	cs := metalChecks(m)
	want := []struct{ status, detail string }{{checkPass, "MSL 3.1"}, {checkPass, "MSL 4.0"}, {checkFail, "did not compile"}, {checkSkip, "MTLGPUFamilyMetal4"}}
	for i, w := range want {
		if cs[i].Status != w.status || !strings.Contains(cs[i].Detail, w.detail) {
			t.Errorf("library %d: %s %q, want %s with %q", i, cs[i].Status, cs[i].Detail, w.status, w.detail)
		}
	}
}
