// gdn_cl.cu: gdn.cu's Gated DeltaNet step with the gated norm through a
// thread-block cluster (gdn_step under GDN_CL_MODULE), in a module of its own so that
// gdn.ptx and its machine code stay as they are while these forms are
// measured (gdnnorm=cluster loads it). Written, not yet run on a GPU.
#define GDN_CL_MODULE
#include "gdn.cu"

// Entry points gdn_step_s<split>_cl: gdn_step_s<split> with the gated norm
// through the cluster (gdn.cu's GDN_CL_MODULE parts); launch in clusters
// of split blocks.
#define GDN_CL(RPW, NAME)                                                                                       \
  extern "C" __global__ void __launch_bounds__(GDN_THREADS)                                                     \
      NAME(const float* qkv, const float* z, const float* bb, const float* aa, const float* convW,                \
           float* convState, const float* aLog, const float* dtBias, const float* normW, float* state, float* out, \
           u32* counters, int Hk, int Hv, float eps) { pdl_begin();                                              \
    gdn_step<RPW>(qkv, z, bb, aa, convW, convState, aLog, dtBias, normW, state, out, counters, Hk, Hv, eps); \
  }
GDN_CL(8, gdn_step_s2_cl)
GDN_CL(4, gdn_step_s4_cl)
GDN_CL(2, gdn_step_s8_cl)
