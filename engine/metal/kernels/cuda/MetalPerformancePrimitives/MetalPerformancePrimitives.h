// MetalPerformancePrimitives for CUDA: mpp::tensor_ops::matmul2d emulated
// for the dialect layer, correctly if slowly: each thread of the execution
// scope computes its own elements of the destination cooperative tensor
// (metal_tensor's layout), C[r][c] (+)= Σ_k A[r][k]·B[k][c] over the whole
// K in k order, one float32 fma a term, the operands widened to float. The
// operands are read where they lie (threadgroup or device memory) and the
// run writes only the caller's cooperative tensor, so it needs no barrier of
// its own: the kernel's barrier before it makes the operands visible, as
// on Metal.
//
// What this cannot show: Apple's order of additions inside a product (its
// rounding may differ in the last bits of float32), relaxed_precision
// (taken as false: the sums here are always float32), the M5's neural
// accelerators and their scheduling, speed. Only what the kernels use is
// emulated: tensor operands, a cooperative-tensor destination; a tensor
// destination does not compile here.
//
// Apple's matmul2d takes the descriptor itself as a template argument (a
// class-type template parameter, C++20); this dialect is C++17, so the
// descriptor converts at compile time to a packed integer the template
// takes: the kernels' source is the same in every dialect.
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
  // m and n 12 bits each, k 20 (all ones: dynamic, read from A), the flags.
  constexpr operator ulong() const {
    return ulong(m & 0xfff) | ulong(n & 0xfff) << 12 | ulong(k & 0xfffff) << 24 | ulong(transpose_left) << 44 |
           ulong(transpose_right) << 45 | ulong(relaxed_precision) << 46 |
           ulong(matmul_mode == mode::multiply_accumulate) << 47;
  }
};

template <ulong Descriptor, typename Scope>
struct matmul2d {
  static constexpr int __m = int(Descriptor & 0xfff), __n = int((Descriptor >> 12) & 0xfff),
                       __k = int((Descriptor >> 24) & 0xfffff);
  static constexpr bool __tl = (Descriptor >> 44) & 1, __tr = (Descriptor >> 45) & 1, __acc = (Descriptor >> 47) & 1;
  template <typename Left, typename Right, typename ElementType>
  using __destination = metal::cooperative_tensor<ElementType, metal::extents<int, __n, __m>,
                                                  metal::__petal_cooperative_layout<Scope>>;

  template <typename Left, typename Right, typename ElementType>
  PETAL_MEMBER __destination<Left, Right, ElementType> get_destination_cooperative_tensor() const {
    return __destination<Left, Right, ElementType>();
  }

  // A is M x K: extents (K, M), or (M, K) transposed; B is K x N:
  // extents (N, K), or (K, N) transposed (a row of B^T per output column).
  template <typename TA, typename EA, typename DA, typename TB, typename EB, typename DB, typename TC, typename I,
            int E0, int E1>
  PETAL_MEMBER void run(metal::tensor<TA, EA, DA>& a, metal::tensor<TB, EB, DB>& b,
                        metal::cooperative_tensor<TC, metal::extents<I, E0, E1>,
                                                  metal::__petal_cooperative_layout<Scope>>& c) const {
    static_assert(E0 == __n && E1 == __m, "the destination is not the descriptor's m x n tile");
    const int K = __k != 0xfffff ? __k : a.__extent(__tl ? 1 : 0);
    const int rows = a.__extent(__tl ? 0 : 1), cols = b.__extent(__tr ? 1 : 0);
    for (ushort i = 0; i < c.get_capacity(); i++) {
      if (!c.is_valid_element(i)) continue;
      const metal::array<I, 2> at = c.get_multidimensional_index(i);
      const int col = int(at[0]), row = int(at[1]);
      if (row >= rows || col >= cols) continue;
      float s = __acc ? float(c[i]) : 0.f;
      for (int k = 0; k < K; k++) {
        const float x = metal::__petal_float(__tl ? a.__at(row, k) : a.__at(k, row));
        const float y = metal::__petal_float(__tr ? b.__at(k, col) : b.__at(col, k));
        s = __builtin_fmaf(x, y, s);
      }
      c[i] = TC(s);
    }
  }
};
}  // namespace tensor_ops
}  // namespace mpp
