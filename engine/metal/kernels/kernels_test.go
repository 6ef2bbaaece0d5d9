package kernels

import (
	"os/exec"
	"strings"
	"testing"
)

// entryPoints are the kernels each family must define (what the host looks
// up by name).
var entryPoints = map[string][]string{
	"qmv":   {"qmv_f32_r4", "qmv_f32_r4_sb", "qmv_f32_r2_sb", "qmv_f32_r1_sb"},
	"route": {"route_logits4", "route_logits8", "route_select"},
	"gdn":   {"gdn_step_s1", "gdn_step_s2", "gdn_step_s4", "gdn_step_s8", "gdn_step_s16", "gdn_finish"},
	"attn":  {"qk_prep_f32", "qk_prep_bf16", "attn_split_f32", "attn_split_bf16", "attn_combine"},
	"gemm": {"gemm_dense_f32", "gemm_dense_bf16", "gemm_gateup", "gemm_down", "moe_route", "moe_combine",
		"moe_shared_swiglu", "gemm_mma8_check"},
	"gemm_tensor": {"gemm_tensor_dense_f32", "gemm_tensor_dense_bf16", "gemm_tensor_gateup", "gemm_tensor_down"},
	"moe":         {"moe_gate_up_f32", "moe_gate_up_f32_sb", "moe_down_f32", "moe_down_f32_sb"},
	"ops": {"embed_rows", "add_rmsnorm", "qgemm", "qgemm_s", "conv_silu", "delta_rule", "gated_rmsnorm",
		"qk_prep_rows_f32", "qk_prep_rows_bf16",
		"attn_rows_f32_j2", "attn_rows_f32_j4", "attn_rows_f32_j8", "attn_rows_f32_j16",
		"attn_rows_bf16_j2", "attn_rows_bf16_j4", "attn_rows_bf16_j8", "attn_rows_bf16_j16",
		"route_select_rows", "experts_gate_up", "experts_down", "advance", "convert"},
	"sample": {"sample_prep", "sample_row", "logprobs_row"},
}

// TestSources: every family is embedded with its entry points, and its
// source has the local headers inlined once (Metal compiles a string and
// cannot open them).
func TestSources(t *testing.T) {
	if got := strings.Join(Families(), " "); got != "attn gdn gemm gemm_tensor moe ops qmv route sample" {
		t.Fatalf("families %q", got)
	}
	for family, entries := range entryPoints {
		src, err := Source(family)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(src, `#include "`) || strings.Count(src, "struct QmvParams {") != 1 || strings.Count(src, "static inline float qdot_f32(") != 1 {
			t.Errorf("%s: local headers not inlined exactly once", family)
		}
		if !strings.Contains(src, "#include <metal_stdlib>") || !strings.Contains(src, `#line 1 "params.h"`) {
			t.Errorf("%s: no <metal_stdlib> include or no #line for params.h", family)
		}
		for _, e := range entries {
			if !strings.Contains(src, "kernel void "+e+"(") {
				t.Errorf("%s: no kernel %s", family, e)
			}
		}
	}
	if _, err := Source("nonesuch"); err == nil || !strings.Contains(err.Error(), "qmv") {
		t.Errorf("unknown family: %v", err)
	}
}

// TestInlinedSourcesTypeCheck runs the OpenCL C++ check of check.sh on the
// inlined sources, the form Metal compiles; it skips without clang-19.
func TestInlinedSourcesTypeCheck(t *testing.T) {
	if _, err := exec.LookPath("clang-19"); err != nil {
		t.Skip("clang-19 not installed: cannot type-check the Metal sources (apt-get install clang-19)")
	}
	for _, family := range Families() {
		src, _ := Source(family)
		cmd := exec.Command("clang-19", "-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc",
			"-Xclang", "-cl-ext=-cl_khr_fp64,-__opencl_c_fp64", "-fsyntax-only",
			"-Wno-unknown-attributes", "-Iclcpp", "-")
		cmd.Stdin = strings.NewReader(src)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", family, err, out)
		}
	}
}

// TestNeedsMSL4: exactly the families whose source includes <metal_tensor>
// are compiled as MSL 4.0.
func TestNeedsMSL4(t *testing.T) {
	for _, f := range Families() {
		src, err := Source(f)
		if err != nil {
			t.Fatal(err)
		}
		if uses := strings.Contains(src, "#include <metal_tensor>"); uses != NeedsMSL4(f) {
			t.Errorf("%s: includes <metal_tensor> %v, NeedsMSL4 %v", f, uses, NeedsMSL4(f))
		}
	}
	if !NeedsMSL4(TensorFamily) {
		t.Errorf("%s is not MSL 4.0", TensorFamily)
	}
}
