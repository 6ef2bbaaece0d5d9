// rope.h: the sine and cosine of a RoPE angle, exact at any position: the
// angle in float64 reduced by multiples of pi/2 and a float64 series.
#pragma once
#include "device.h"

// sincos_exact is the sine and cosine of a (any size) in float64: a reduced
// by multiples of pi/2 (Cody-Waite, two parts, with fma), then Taylor series
// to the 16th power on |r| <= pi/4 (truncation below 1e-16).
static __device__ __forceinline__ void sincos_exact(double a, double& s, double& c) {
  const double n = __builtin_rint(a * 0.63661977236758134308);
  double r = __builtin_fma(-n, 1.5707963267948966192, a);
  r = __builtin_fma(-n, 6.123233995736766036e-17, r);
  const double r2 = r * r;
  const double sr =
      r + r * r2 *
              (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 + r2 * (-1.0 / 39916800 +
                                                                                    r2 * (1.0 / 6227020800.0 + r2 * (-1.0 / 1307674368000.0)))))));
  const double cr =
      1 + r2 * (-0.5 + r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (-1.0 / 3628800 +
                                                                                   r2 * (1.0 / 479001600 + r2 * (-1.0 / 87178291200.0 + r2 * (1.0 / 20922789888000.0))))))));
  const int q = (int)((long long)n & 3);
  s = q == 0 ? sr : q == 1 ? cr : q == 2 ? -sr : -cr;
  c = q == 0 ? cr : q == 1 ? -sr : q == 2 ? -cr : sr;
}
