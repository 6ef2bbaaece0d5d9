package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `kernel void add(device const float* a [[buffer(1)]], constant AddParams& p [[buffer(2)]],
                device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) { y[i] = a[i]; }
// kernel void commented(device float* y [[buffer(0)]]) {}
`

// TestGenerate: the entry takes the buffers in index order (the parameter
// struct by value) and passes the position computed from CUDA's ids.
func TestGenerate(t *testing.T) {
	out, err := Generate("add.metal", sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#define add metal_add\n",
		`#include "add.metal"`,
		`extern "C" __attribute__((__global__)) void add(device float* y, device const float* a, AddParams p) {`,
		"metal_add(a, p, y, (__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x()));",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "commented") {
		t.Error("a kernel in a comment was wrapped")
	}
}

// TestGenerate2D: a uint2 position is built from the x and y ids.
func TestGenerate2D(t *testing.T) {
	out, err := Generate("k.metal", "kernel void k(device float* y [[buffer(0)]], uint2 b [[threadgroup_position_in_grid]], uint t [[thread_position_in_threadgroup]]) {}")
	if err != nil {
		t.Fatal(err)
	}
	want := "metal_k(y, petal_uint2(__nvvm_read_ptx_sreg_ctaid_x(), __nvvm_read_ptx_sreg_ctaid_y()), __nvvm_read_ptx_sreg_tid_x());"
	if !strings.Contains(out, want) {
		t.Errorf("missing %q in:\n%s", want, out)
	}
}

// TestParseRefuses: what the dialect cannot translate is an error naming
// the kernel and the parameter, not a silently wrong wrapper.
func TestParseRefuses(t *testing.T) {
	for src, want := range map[string]string{
		"kernel void k(device float* y [[buffer(0)]], threadgroup float* t [[threadgroup(0)]]) {}": "[[threadgroup(n)]]",
		"kernel void k(device float* y [[bufer(0)]]) {}":                                           "unknown attribute [[bufer]]",
		"kernel void k(device float* y) {}":                                                        "no [[...]] attribute",
		"kernel void k(device float* y [[buffer(0)]], device float* z [[buffer(2)]]) {}":           "not 0..1",
		"kernel void k(device float* y [[buffer(0)]], uint3 i [[thread_position_in_grid]]) {}":     "one-dimensional",
		"kernel void k(device float* y [[buffer(0)]], uint2 i [[thread_position_in_grid]]) {}":     "only thread and threadgroup positions",
		"kernel void k(device float y [[buffer(0)]]) {}":                                           "pointer or a constant reference",
		"void f() {}": "no kernel functions",
		"kernel void k(constant P& p [[buffer(0)]], device float* y [[buffer(1)]]) {}": "last buffer index",
	} {
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
}

// TestEverySourceParses: each .metal of the package is translatable.
func TestEverySourceParses(t *testing.T) {
	files, _ := filepath.Glob("../*.metal")
	if len(files) == 0 {
		t.Fatal("no .metal sources found")
	}
	for _, f := range files {
		src, _ := os.ReadFile(f)
		if _, err := Generate(filepath.Base(f), string(src)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
