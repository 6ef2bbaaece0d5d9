package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clang is clang-19 (or $CLANG), or a skip where there is none.
func clang(t *testing.T) string {
	t.Helper()
	c := os.Getenv("CLANG")
	if c == "" {
		c = "clang-19"
	}
	p, err := exec.LookPath(c)
	if err != nil {
		t.Skipf("%s not found: the dialects' compile checks need it (apt-get install clang-19, or set CLANG)", c)
	}
	return p
}

// simdMatrixKernel uses every simdgroup_matrix call the GEMMs make, from
// device and threadgroup memory, with strides, an origin and transposes.
const simdMatrixKernel = `#include <metal_stdlib>
using namespace metal;
kernel void mm(device const float* a [[buffer(0)]], device float* d [[buffer(1)]],
               uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float t[128];
  for (uint i = lane; i < 128; i += 32) t[i] = a[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 x, y;
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.f);
  simdgroup_load(x, a);
  ulong2 o;
  o.x = 8;
  o.y = 0;
  simdgroup_load(y, t, 16, o, true);
  simdgroup_multiply_accumulate(acc, x, y, acc);
  simdgroup_store(acc, t, 16);
  simdgroup_store(acc, d, 8, 0, true);
}
`

// compileMetal compiles src (named name.metal) through both dialects: as
// CUDA to PTX (metal2cu and the CUDA header) and type-checked in OpenCL
// C++ mode (the clcpp header), as cuda.sh and check.sh do. It returns the
// PTX and the two compilers' messages.
func compileMetal(t *testing.T, cc, name, src string) (ptx string, cudaErr, clcppErr error, log string) {
	t.Helper()
	dir := t.TempDir()
	metal := filepath.Join(dir, name+".metal")
	if err := os.WriteFile(metal, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cu, err := Generate(name+".metal", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".cu"), []byte(cu), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".ptx")
	b, cudaErr := exec.Command(cc, "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"--cuda-gpu-arch=sm_90", "-Xclang", "-target-feature", "-Xclang", "+ptx80", "-Wno-unknown-attributes", "-Werror",
		"-I", "../cuda", "-I", dir, "-O3", "-S", "-o", out, filepath.Join(dir, name+".cu")).CombinedOutput()
	log = string(b)
	b, clcppErr = exec.Command(cc, "-x", "clcpp", "-cl-std=clc++2021", "-cl-no-stdinc", "-Xclang",
		"-cl-ext=-cl_khr_fp64,-__opencl_c_fp64", "-Wno-unknown-attributes", "-fsyntax-only", "-I", "../clcpp", metal).CombinedOutput()
	log += string(b)
	p, _ := os.ReadFile(out)
	return string(p), cudaErr, clcppErr, log
}

// TestSimdgroupMatrixCompiles: a kernel using simdgroup matrices compiles
// as CUDA through the dialect header (to PTX that calls no external
// function, the product made of warp shuffles) and type-checks against the
// clcpp header.
func TestSimdgroupMatrixCompiles(t *testing.T) {
	cc := clang(t)
	ptx, cudaErr, clcppErr, log := compileMetal(t, cc, "mm", simdMatrixKernel)
	if cudaErr != nil || clcppErr != nil {
		t.Fatalf("CUDA: %v, OpenCL C++: %v\n%s", cudaErr, clcppErr, log)
	}
	if !strings.Contains(ptx, ".visible .entry mm(") {
		t.Errorf("no entry mm in the PTX")
	}
	if strings.Contains(ptx, ".extern") {
		t.Errorf("the PTX calls an external function")
	}
	if n := strings.Count(ptx, "shfl.sync.idx"); n < 24 {
		t.Errorf("%d warp shuffles in the PTX, want the 3 a k step of the 8x8 product (24)", n)
	}
}

// TestSimdgroupMatrixMisuseRefused: what Metal refuses, the checks refuse:
// a simdgroup matrix loaded through a thread-local pointer (OpenCL C++
// mode; Metal loads only from device or threadgroup memory), and a matrix
// of another shape than the 8x8 the dialects declare (both modes).
func TestSimdgroupMatrixMisuseRefused(t *testing.T) {
	cc := clang(t)
	private := strings.Replace(simdMatrixKernel, "simdgroup_load(x, a);", "float p[64] = {};\n  simdgroup_load(x, p);", 1)
	if _, _, err, log := compileMetal(t, cc, "mm", private); err == nil || !strings.Contains(log, "no matching function for call to 'simdgroup_load'") {
		t.Errorf("a load from thread memory type-checks in OpenCL C++ mode:\n%s", log)
	}
	shape := strings.Replace(simdMatrixKernel, "simdgroup_float8x8 x, y;", "simdgroup_matrix<float, 4, 4> z;\n  simdgroup_float8x8 x, y;", 1)
	if _, cudaErr, clcppErr, log := compileMetal(t, cc, "mm", shape); cudaErr == nil || clcppErr == nil || !strings.Contains(log, "only 8x8 simdgroup matrices are emulated") || !strings.Contains(log, "only 8x8 simdgroup matrices are declared") {
		t.Errorf("a 4x4 simdgroup matrix compiles (CUDA: %v, OpenCL C++: %v):\n%s", cudaErr, clcppErr, log)
	}
}

// tensorKernel uses the tensor operations gemm_tensor.metal uses: tensors
// over device and threadgroup memory, made from a pointer, extents and
// strides; a matmul2d of one simdgroup with B transposed into a
// cooperative tensor, accumulated over two k-steps; the cooperative
// tensor's capacity, valid elements, coordinates and store.
const tensorKernel = `#include <metal_stdlib>
#include <metal_tensor>
#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>
using namespace metal;
using namespace mpp::tensor_ops;
kernel void tm(device const ushort* a [[buffer(0)]], device float* d [[buffer(1)]],
               uint lane [[thread_index_in_simdgroup]]) {
  threadgroup bfloat t[16 * 8];
  threadgroup float c[16 * 16];
  for (uint i = lane; i < 128; i += 32) t[i] = as_type<bfloat>(a[i]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  auto ta = tensor(t, dextents<int32_t, 2>(8, 16), array<int32_t, 2>{1, 8});
  auto tc = tensor(c, dextents<int32_t, 2>(16, 16), array<int32_t, 2>{1, 16});
  constexpr auto desc = matmul2d_descriptor(16, 16, 8, false, true, false, matmul2d_descriptor::mode::multiply_accumulate);
  matmul2d<desc, execution_simdgroups<1>> op;
  auto acc = op.get_destination_cooperative_tensor<decltype(ta), decltype(ta), float>();
  for (ushort i = 0; i < acc.get_capacity(); i++)
    if (acc.is_valid_element(i)) acc[i] = float(acc.get_multidimensional_index(i)[0]);
  op.run(ta, ta, acc);
  op.run(ta, ta, acc);
  acc.store(tc);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = lane; i < 256; i += 32) d[i] = c[i];
}
`

// TestTensorOpsCompile: a kernel on MSL 4's tensors and matmul2d compiles
// as CUDA through the dialect headers (PTX calling no external function,
// the product a loop of float fma) and type-checks against the clcpp
// declarations.
func TestTensorOpsCompile(t *testing.T) {
	cc := clang(t)
	ptx, cudaErr, clcppErr, log := compileMetal(t, cc, "tm", tensorKernel)
	if cudaErr != nil || clcppErr != nil {
		t.Fatalf("CUDA: %v, OpenCL C++: %v\n%s", cudaErr, clcppErr, log)
	}
	if !strings.Contains(ptx, ".visible .entry tm(") {
		t.Errorf("no entry tm in the PTX")
	}
	if strings.Contains(ptx, ".extern") {
		t.Errorf("the PTX calls an external function")
	}
	if !strings.Contains(ptx, "fma.rn.f32") {
		t.Errorf("no float fma in the PTX: the emulated product is missing")
	}
}

// TestTensorOpsMisuseRefused: as_type to bfloat from a 4-byte value is
// refused by both dialects, and a run into the cooperative tensor of another
// operation (a tile of another shape) by the CUDA dialect.
func TestTensorOpsMisuseRefused(t *testing.T) {
	cc := clang(t)
	bad := strings.Replace(tensorKernel, "as_type<bfloat>(a[i])", "as_type<bfloat>(float(a[i]))", 1)
	if _, cudaErr, clcppErr, log := compileMetal(t, cc, "tm", bad); cudaErr == nil || clcppErr == nil || !strings.Contains(log, "as_type between types of different sizes") {
		t.Errorf("as_type<bfloat>(float) compiles (CUDA: %v, OpenCL C++: %v):\n%s", cudaErr, clcppErr, log)
	}
	other := strings.Replace(tensorKernel, "  op.run(ta, ta, acc);\n  op.run", "  constexpr auto d2 = matmul2d_descriptor(8, 16, 8, false, true);\n  matmul2d<d2, execution_simdgroups<1>> op2;\n  op2.run(ta, ta, acc);\n  op.run", 1)
	if _, cudaErr, _, log := compileMetal(t, cc, "tm", other); cudaErr == nil || !strings.Contains(log, "not the descriptor's m x n tile") {
		t.Errorf("a destination of another shape compiles as CUDA (%v):\n%s", cudaErr, log)
	}
}
