// gdn_cl.cu: gdn.cu's Gated DeltaNet step with the gated norm through a
// thread-block cluster (gdn_step under GDN_CL_MODULE), in a module of its
// own so that gdn.ptx and its machine code stayed as they were while these
// forms were measured; gdnnorm=cluster, the default since deltacl1, loads
// it, gdnnorm=ticket gdn.cu's.
#define GDN_CL_MODULE
#include "gdn.cu"

// Entry points gdn_step_s<split>_cl: gdn_step_s<split> with the gated norm
// through the cluster (gdn.cu's GDN_CL_MODULE parts); launch in clusters
// of split blocks.
GDN(8, gdn_step_s2_cl)
GDN(4, gdn_step_s4_cl)
GDN(2, gdn_step_s8_cl)
