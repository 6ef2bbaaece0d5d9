// gemm.metal: the 4-bit weight GEMMs of prefill on simdgroup matrices, and
// the device-side grouping of the MoE's (token, expert) pairs: the sibling
// of engine/cuda/kernels/gemm.cu.
//
//   gemm_mma8_check: one simdgroup-matrix product per threadgroup, the
//     check of the simdgroup_matrix calls the GEMMs make (through the CUDA
//     dialect, of its emulation).
#include <metal_stdlib>
using namespace metal;
#include "params.h"
#include "qgroup.h"

// gemm_mma8_check: threadgroup t (32 threads) computes D = A·B + C for the
// 8x8 row-major tiles A = a[64t..], C = c[64t..] and B the 8x8 block at
// column p.col0 of the 8x16 row-major tile b[128t..] (its transpose where
// p.transpose), staged in threadgroup memory. d[128t..] gets D row-major
// (stored to threadgroup memory, then copied), then D transposed (stored
// to device memory directly).
kernel void gemm_mma8_check(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                            device const float* c [[buffer(2)]], device float* d [[buffer(3)]],
                            constant MmaCheckParams& p [[buffer(4)]], uint lane [[thread_index_in_simdgroup]],
                            uint tile [[threadgroup_position_in_grid]]) {
  threadgroup float tb[128];
  threadgroup float td[64];
  for (uint i = lane; i < 128; i += 32) tb[i] = b[tile * 128 + i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 ma, mb, mc;
  simdgroup_float8x8 md = make_filled_simdgroup_matrix<float, 8, 8>(0.f);
  simdgroup_load(ma, a + tile * 64);
  ulong2 origin;
  origin.x = ulong(p.col0);
  origin.y = 0;
  simdgroup_load(mb, tb, 16, origin, p.transpose != 0);
  simdgroup_load(mc, c + tile * 64, 8);
  simdgroup_multiply_accumulate(md, ma, mb, mc);
  simdgroup_store(md, td, 8);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = lane; i < 64; i += 32) d[tile * 128 + i] = td[i];
  simdgroup_store(md, d + tile * 128 + 64, 8, 0, true);
}
