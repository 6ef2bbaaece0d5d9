// route_i8p.cu: router=i8p, qgemm_i8 with x's parts made once by a kernel
// of their own (qi_parts) and copied into the GEMM's stages beside the
// codes, so that the GEMM's blocks (two a row of tokens at 256 experts)
// neither quantise x twice nor wait between a quantising phase and their
// products: one barrier a group, not two. A module of its own, loaded
// under that option only, while it is measured. Written, not yet run on a
// GPU. Its group's products and float64 terms repeat qgemm_i8's lines:
// shared through one function they changed route_i8.ptx (registers
// renumbered), whose machine code is built in, so whichever of the two
// forms measures slower goes and the other keeps them.
#define ROUTE_I8P_MODULE
#include "route_i8.cu"

// qi_parts: x [T, C] to its four byte parts a group of 64 columns, as
// qgemm_i8 makes them (d a power of two, floors by a magic-number add),
// part-major: parts[k, T, C]; and per (row, group) meta[2·(row·G + g)] =
// d·2^-24, meta[.. + 1] = P summed over the group (NaN where the group
// holds a NaN or an infinity). Grid ceil(T·G/8), block 256: a warp a
// (row, group), two columns a lane.
extern "C" __global__ void __launch_bounds__(256)
    qi_parts(const float* __restrict__ x, unsigned char* __restrict__ parts, double* __restrict__ meta, int T, int C) {
  pdl_begin();
  const int lane = PETAL_TID_X() & 31, G = C / 64;
  const long long pair = (long long)PETAL_BID_X() * 8 + (PETAL_TID_X() >> 5);
  if (pair >= (long long)T * G) return;  // whole warps
  const long long row = pair / G;
  const int grp = (int)(pair % G);
  const float* xr = x + row * C + grp * 64 + 2 * lane;
  const float xv[2] = {xr[0], xr[1]};
  u32 mb = umax(__float_as_uint(xv[0]) & 0x7FFFFFFFu, __float_as_uint(xv[1]) & 0x7FFFFFFFu);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mb = umax(mb, (u32)shfl_xor_int((int)mb, o));
  const int E = imax((int)(mb >> 23) - 127, -120);
  const float inv = __uint_as_float((u32)(127 + 6 - E) << 23);
  u32 w[4] = {0, 0, 0, 0};
  long long ps = 0;
#pragma unroll
  for (int e = 0; e < 2; e++) {
    float f = xv[e] * inv;  // exact
    int p[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float t = floor_magic(f);
      p[k] = (int)(__float_as_uint(t) - 0x4B400000u);
      f = (f - (t - 12582912.f)) * 256.f;  // exact
      w[k] |= ((u32)p[k] & 0xFFu) << (8 * e);
    }
    ps += p[0] * 16777216 + p[1] * 65536 + p[2] * 256 + p[3];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ps += (long long)shfl_xor_u64((unsigned long long)ps, o);
#pragma unroll
  for (int k = 0; k < 4; k++) *(u16*)(parts + ((long long)k * T + row) * C + grp * 64 + 2 * lane) = (u16)w[k];
  if (lane == 0) {
    meta[2 * pair] = __builtin_bit_cast(double, (unsigned long long)(1023 + E - 6 - 24) << 52);
    meta[2 * pair + 1] = mb >= 0x7F800000u ? __builtin_nan("") : (double)ps;
  }
}

// qgemm_i8p: qgemm_i8 over qi_parts' parts and meta. A stage holds the
// tile's four parts (QI_BM rows of 64 bytes each, rows QI_LD apart), its
// codes and its rows' meta; the scales and biases of a group are written
// to shared memory the group before (two buffers), so that one barrier a
// group serves. Grid and block as qgemm_i8's, QIP_SHARED bytes of dynamic
// shared memory.
#define QIP_P_BYTES (4 * QI_BM * QI_LD)
#define QIP_STAGE (QIP_P_BYTES + QI_C_BYTES + QI_BM * 16)
#define QIP_SHARED (QI_S * QIP_STAGE + 2 * QI_BN * 16)

extern "C" __global__ void __launch_bounds__(256, 2)
    qgemm_i8p(const QDesc* __restrict__ wd, const unsigned char* __restrict__ xparts, const double* __restrict__ meta,
              float* __restrict__ y, double* __restrict__ part, int T, int ldy) {
  pdl_begin();
  extern __shared__ __attribute__((aligned(16))) unsigned char qi_smem[];
  const QDesc d = *wd;
  const u32 sbase = smem_u32(qi_smem);
  double* sbs = (double*)(qi_smem + QI_S * QIP_STAGE);  // [2][QI_BN][scale, bias]
  const int tid = PETAL_TID_X(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int wm = (warp >> 2) * 16, wn = (warp & 3) * 32;
  const long long n0 = (long long)PETAL_BID_X() * QI_BN;
  const int m0 = bid_y() * QI_BM;
  const int wpg = 2 * d.bits, C = d.cols;
  const int groups = C / 64, split = bid_z(), splits = nbid_z();
  const int g0 = split * groups / splits, g1 = (split + 1) * groups / splits;

  auto load = [&](int i) __attribute__((always_inline)) {
    const int grp = g0 + i;
    if (grp < g1) {
      const u32 st = sbase + (i % QI_S) * QIP_STAGE;
#pragma unroll
      for (int j = 0; j < 2; j++) {  // parts: 4 x QI_BM rows of 4 chunks
        const int ch = tid + 256 * j, k = ch >> 7, r = (ch >> 2) & (QI_BM - 1), q = ch & 3;
        const bool in = m0 + r < T;
        cp_async16(st + (k * QI_BM + r) * QI_LD + 16 * q,
                   xparts + ((long long)k * T + (in ? m0 + r : 0)) * C + grp * 64 + 16 * q, in);
      }
      const int per = d.bits / 2;
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const int ch = tid + 256 * j, r = ch / per, k = ch % per;
        if (r < QI_BN) {
          const bool in = n0 + r < d.rows;
          cp_async16(st + QIP_P_BYTES + r * QI_LD + 16 * k, d.w + (in ? n0 + r : 0) * d.wpr + grp * wpg + 4 * k, in);
        }
      }
      if (tid < QI_BM) {
        const bool in = m0 + tid < T;
        cp_async16(st + QIP_P_BYTES + QI_C_BYTES + 16 * tid, meta + 2 * ((long long)(in ? m0 + tid : 0) * groups + grp), in);
      }
    }
    cp_commit();
  };
  u16 ns = 0, nb = 0;
  auto fetch_sb = [&](int grp) __attribute__((always_inline)) {
    if (tid < QI_BN && grp < g1 && n0 + tid < d.rows) {
      ns = d.s[(n0 + tid) * d.gpr + grp];
      nb = d.b[(n0 + tid) * d.gpr + grp];
    }
  };
  auto put_sb = [&](int buf) __attribute__((always_inline)) {
    if (tid < QI_BN) {
      sbs[(buf * QI_BN + tid) * 2] = (double)bf16_to_f32(ns);
      sbs[(buf * QI_BN + tid) * 2 + 1] = (double)bf16_to_f32(nb);
    }
  };
#pragma unroll
  for (int i = 0; i < QI_S - 1; i++) load(i);
  fetch_sb(g0);
  put_sb(0);
  fetch_sb(g0 + 1);

  double acc[4][4] = {};
  for (int i = 0; g0 + i < g1; i++) {
    cp_wait<QI_S - 2>();
    __syncthreads();  // group i staged, its scales written; every warp done with group i - 1
    load(i + QI_S - 1);
    put_sb((i + 1) & 1);  // group i + 1's, read after the next barrier
    fetch_sb(g0 + i + 2);
    const unsigned char* st = qi_smem + (i % QI_S) * QIP_STAGE;
    const double* ms = (const double*)(st + QIP_P_BYTES + QI_C_BYTES);
    const double* sb = sbs + (i & 1) * QI_BN * 2;
    u32 b[2][4][2];
#pragma unroll
    for (int ks = 0; ks < 2; ks++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const unsigned char* cr = st + QIP_P_BYTES + (wn + 8 * j + g) * QI_LD;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int k = 32 * ks + 16 * h + 4 * c;
          b[ks][j][h] = d.bits == 8 ? *(const u32*)(cr + k) : qi_nibbles(*(const u16*)(cr + k / 2));
        }
      }
    int ca[4][4] = {}, cb[4][4] = {};
#pragma unroll
    for (int p = 0; p < 4; p++) {
      if (p & 1) {
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            if (p == 1) ca[j][e] *= 256;
            else cb[j][e] *= 256;
          }
      }
#pragma unroll
      for (int ks = 0; ks < 2; ks++) {
        const unsigned char* pr = st + (p * QI_BM + wm + g) * QI_LD + 32 * ks + 4 * c;
        const u32 a[4] = {*(const u32*)pr, *(const u32*)(pr + 8 * QI_LD), *(const u32*)(pr + 16),
                          *(const u32*)(pr + 8 * QI_LD + 16)};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          if (p == 0)
            mma_i8<true>(ca[j], a, b[ks][j][0], b[ks][j][1]);
          else
            mma_i8<false>(p == 1 ? ca[j] : cb[j], a, b[ks][j][0], b[ks][j][1]);
        }
      }
    }
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int r = wm + g + 8 * (e >> 1);
      const double ds = ms[2 * r], pp = ms[2 * r + 1];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int n = wn + 8 * j + 2 * c + (e & 1);
        const double v = i64_to_f64((long long)ca[j][e] * 65536 + cb[j][e]);
        const double t = __builtin_fma(sb[2 * n], v, sb[2 * n + 1] * pp);
        acc[j][e] = __builtin_fma(t, ds, acc[j][e]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 4; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int m = m0 + wm + g + 8 * (e >> 1);
      const long long n = n0 + wn + 8 * j + 2 * c + (e & 1);
      if (m >= T || n >= d.rows) continue;
      if (splits == 1)
        y[(long long)m * ldy + n] = (float)acc[j][e];
      else
        part[((long long)split * T + m) * ldy + n] = acc[j][e];
    }
}
