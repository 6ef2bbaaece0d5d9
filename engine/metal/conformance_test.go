package metal_test

import (
	"fmt"
	"testing"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/metal"
)

// TestConformance runs the conformance suite on the Metal backend (over
// Metal on a Mac, over the CUDA dialect on an NVIDIA GPU elsewhere), with
// the decode kernels and without (every op on ops.metal's generic
// kernels), with f32 and bf16 KV caches.
func TestConformance(t *testing.T) {
	for _, fused := range []bool{true, false} {
		for _, kv := range []backend.DType{backend.F32, backend.BF16} {
			t.Run(fmt.Sprintf("fused=%v,kv=%s", fused, kv), func(t *testing.T) {
				o := metal.DefaultOptions()
				o.Fused, o.KV = fused, kv
				backendtest.Run(t, openBackend(t, o))
			})
		}
	}
	// gemm=simd: the suite's matrices of 67 rows and its top-3 experts are
	// off gemm.metal's shapes, so its ops keep ops.metal's kernels and must
	// meet the float32 bars still; the simdgroup GEMMs themselves are
	// checked by TestSimdGEMMOpsMatchReferences and engine/metal/cudarun.
	t.Run("gemm=simd", func(t *testing.T) {
		o := metal.DefaultOptions()
		o.SimdGEMM = true
		backendtest.Run(t, openBackend(t, o))
	})
	// sampler=row: the Sample op on sample_row's radix selections alone
	// (under the default, the suite's top-k of 1 to 64 take the fast path).
	t.Run("sampler=row", func(t *testing.T) {
		o := metal.DefaultOptions()
		o.SamplerTopK = false
		backendtest.Run(t, openBackend(t, o))
	})
	// gemm=tensor: the same, with gemm_tensor.metal in place of gemm.metal's
	// GEMMs (through the CUDA dialect, its emulated matmul2d; on a Mac
	// without tensor operations, gemm=simd's lowering).
	t.Run("gemm=tensor", func(t *testing.T) {
		o := metal.DefaultOptions()
		o.TensorGEMM = true
		backendtest.Run(t, openBackend(t, o))
	})
}
