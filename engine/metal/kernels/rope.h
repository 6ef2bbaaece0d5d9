// rope.h: the sine and cosine of a RoPE angle for the Metal kernels
// (attn.metal, ops.metal), where the CUDA kernels (engine/cuda/kernels/
// rope.h) evaluate it in float64: Apple GPUs have none, so each inverse
// frequency comes as two floats (hi, lo: hi = float32(f), lo =
// float32(f - hi), made on the host in float64), p·(hi+lo) is formed as a
// float pair with fma, reduced by pi/2 in three parts, and sine and cosine
// are series on |r| <= pi/4: about 1e-7 absolute at any position. It relies
// on safe math (fma kept, nothing reassociated).
#pragma once

// rope_sincos is the sine and cosine of pos·(hi+lo).
static inline void rope_sincos(int pos, float hi, float lo, thread float& s, thread float& c) {
  const float pf = float(pos);  // exact below 2^24
  const float ah = pf * hi;
  const float al = fma(pf, hi, -ah) + pf * lo;  // the rest of the angle
  const float n = rint(ah * 0.63661977236758134f);
  float r = fma(-n, 1.57079637050628662f, ah);  // pi/2 = C1 + C2 (+ 2.6e-15)
  r = fma(-n, -4.37113900018624e-8f, r);
  r += al;
  const float r2 = r * r;
  const float sr =
      r + r * r2 * (-1.f / 6 + r2 * (1.f / 120 + r2 * (-1.f / 5040 + r2 * (1.f / 362880 + r2 * (-1.f / 39916800)))));
  const float cr =
      1.f + r2 * (-0.5f + r2 * (1.f / 24 + r2 * (-1.f / 720 + r2 * (1.f / 40320 + r2 * (-1.f / 3628800 + r2 * (1.f / 479001600))))));
  const int q = int(n) & 3;
  s = q == 0 ? sr : q == 1 ? cr : q == 2 ? -sr : -cr;
  c = q == 0 ? cr : q == 1 ? -sr : q == 2 ? -cr : sr;
}

