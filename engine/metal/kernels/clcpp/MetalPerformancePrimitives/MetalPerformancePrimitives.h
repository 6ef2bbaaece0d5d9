// MetalPerformancePrimitives for the Linux check: mpp::tensor_ops::matmul2d
// as petal's kernels use it, declared for clang-19 in OpenCL C++ mode
// (check.sh). Written from Apple's documentation (the matmul2d_descriptor's
// fields and defaults: m, n, k, transpose_left, transpose_right,
// relaxed_precision, the multiply / multiply_accumulate mode; run(A, B, C);
// get_destination_cooperative_tensor), NOT checked against Apple's header.
//
// One departure, for the dialect only: Apple's matmul2d takes the
// descriptor itself as a template argument (a class-type template
// parameter, C++20), and OpenCL C++ is C++17; here the descriptor converts,
// at compile time, to a packed integer that the template takes instead, so
// that the kernels' source, `matmul2d<desc, execution_simdgroups<4>>`, is
// the same in every dialect.
#pragma once
#include <metal_tensor>

namespace mpp {
namespace tensor_ops {
struct matmul2d_descriptor {
  enum class mode { multiply, multiply_accumulate };
  int m, n, k;
  bool transpose_left, transpose_right, relaxed_precision;
  mode matmul_mode;
  constexpr matmul2d_descriptor(int m_, int n_, int k_ = -1, bool tl = false, bool tr = false, bool relaxed = false,
                                mode md = mode::multiply)
      : m(m_), n(n_), k(k_), transpose_left(tl), transpose_right(tr), relaxed_precision(relaxed), matmul_mode(md) {}
  // The packing: m and n 12 bits each, k 20 (all ones: dynamic), then the
  // four flags.
  constexpr operator ulong() const {
    return ulong(m & 0xfff) | ulong(n & 0xfff) << 12 | ulong(k & 0xfffff) << 24 | ulong(transpose_left) << 44 |
           ulong(transpose_right) << 45 | ulong(relaxed_precision) << 46 |
           ulong(matmul_mode == mode::multiply_accumulate) << 47;
  }
};

struct __destination_layout {};

template <ulong Descriptor, typename Scope>
struct matmul2d {
  static constexpr int __m = int(Descriptor & 0xfff), __n = int((Descriptor >> 12) & 0xfff);
  template <typename Left, typename Right, typename ElementType>
  metal::cooperative_tensor<ElementType, metal::extents<int, __n, __m>, __destination_layout>
  get_destination_cooperative_tensor() const;
  // C (+)= A·B: A and B tensors (transposed as the descriptor says), C a
  // tensor or a cooperative tensor.
  template <typename Left, typename Right, typename Destination>
  void run(__private Left&, __private Right&, __private Destination&) const;
};
}  // namespace tensor_ops
}  // namespace mpp
