// gdn_split.cu: gdn_cl.cu's Gated DeltaNet step of one decoded token with
// the layer's output projection in the same launch (gdnsplit=on), so that
// no kernel boundary stands between the gated outputs and the projection:
// each block, which gates R = 32 outputs of a value head, multiplies them
// by those 32 columns of every row of the projection (copied into shared
// memory before its wait) and the blocks' parts are summed as splitk.h
// says, the last block writing the projection's output. A module of its
// own (gdn.cu's GDN_SPLIT_MODULE parts), so that gdn.ptx and gdn_cl.ptx and
// their machine code stay as they are.
#define GDN_CL_MODULE
#define GDN_SPLIT_MODULE
#include "gdn.cu"

// Entry point gdn_step_s4_cl_split: gdn_step_s4_cl and the projection (ow,
// osb: orows x ocols 4-bit, interleaved scale/bias words, ocols = Hv·128;
// oy its output; acc copies x orows zeros as 64-bit fixed point and
// oticket a zero u32 when allocated, left so by every launch); launch Hv·4
// blocks in clusters of 4 with SK_SHARED(orows) bytes of dynamic shared
// memory.
extern "C" __global__ void __launch_bounds__(GDN_THREADS)
    gdn_step_s4_cl_split(const float* qkv, const float* z, const float* bb, const float* aa, const float* convW,
                         float* convState, const float* aLog, const float* dtBias, const float* normW, float* state,
                         float* out, u32* counters, int Hk, int Hv, float eps, const u32* ow, const u32* osb,
                         float* oy, unsigned long long* acc, u32* oticket, int orows, int ocols, int copies) {
  gdn_step<4>(qkv, z, bb, aa, convW, convState, aLog, dtBias, normW, state, out, counters, Hk, Hv, eps,
              GdnOut{ow, osb, oy, acc, oticket, orows, ocols, copies});
}
