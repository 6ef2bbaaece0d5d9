package cli

import "testing"

// TestBarsFor: --bars auto holds cuda's defaults (bf16 on the tensor cores)
// and any bf16 switch to the bfloat16 bars, and the float32 kernels and
// the CPU to the float32 ones.
func TestBarsFor(t *testing.T) {
	for spec, want := range map[string]string{
		"cpu":               "float32",
		"cpu:delta=chunked": "float32",
		"cpu:kv=bf16":       "bfloat16",
		"cuda":              "bfloat16",
		"cuda:gemm=plain":   "bfloat16",
		"cuda:gemm=plain,attn=plain,delta=sequential":         "float32",
		"cuda:gemm=plain,attn=plain,delta=sequential,kv=bf16": "bfloat16",
		"cuda:gemm=tc,attn=plain,delta=sequential":            "bfloat16",
		"cuda:gemm=plain,attn=plain,delta=tf32":               "bfloat16",
		"nonsense:":                                           "float32",
	} {
		if got := barsFor(spec); got != want {
			t.Errorf("barsFor(%q) = %s, want %s", spec, got, want)
		}
	}
}
