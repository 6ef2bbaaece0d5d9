// probe.cu: small kernels that test and measure the device layer itself:
// launch, graph replay, and the read bandwidth the mat-vec is held against.
#include "device.h"

// empty does nothing: its time is the cost of a launch.
extern "C" __global__ void empty() {
  pdl_begin();}

// add_f32 sets y[i] = y[i] + a for i < n (a kernel whose effect shows how many
// times it ran, for graph replay).
extern "C" __global__ void add_f32(float* y, float a, int n) {
  pdl_begin();
  int i = PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  if (i < n) y[i] += a;
}

// read_xor reads n16 16-byte words with the mat-vec's load (grid-stride,
// four loads in flight per thread) and writes one word per block so the
// loads cannot be dropped: the device's streaming read bandwidth.
extern "C" __global__ void __launch_bounds__(256) read_xor(const u32x4* p, long long n16, u32* out) {
  pdl_begin();
  long long i = (long long)PETAL_BID_X() * PETAL_NTID_X() + PETAL_TID_X();
  long long stride = (long long)PETAL_NCTAID_X() * PETAL_NTID_X();
  u32 acc = 0;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    u32x4 a = ld_stream_16(p + i), b = ld_stream_16(p + i + stride);
    u32x4 c = ld_stream_16(p + i + 2 * stride), d = ld_stream_16(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    u32x4 a = ld_stream_16(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  __shared__ u32 red[256];
  red[PETAL_TID_X()] = acc;
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    u32 s = 0;
    for (int k = 0; k < (int)PETAL_NTID_X(); k++) s ^= red[k];
    out[PETAL_BID_X()] = s;
  }
}
