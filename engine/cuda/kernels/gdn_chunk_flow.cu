// gdn_chunk_flow.cu: gdn_chunk_frag.cu's prep and state pass at once
// (deltaflow=on): the prep's blocks (gdn_chunk_prep_flow, two a
// multiprocessor, the blocks of tokens in order) raise a flag a (value
// head, block of tokens) as they write its workspace, and the state pass
// (gdn_chunk_state_flow, launched beside them) fetches a block once its
// flag is up, instead of the whole prep finishing before the state pass
// starts. The same arithmetic as gdn_chunk_frag.cu's kernels, the same
// bits; a module of its own so that gdn_chunk_frag.ptx and its machine
// code stay as they are.
#define GC_ONE_PRODUCT
#define GC_FRAG
#define GC_FLOW
#include "gdn_chunk.cu"
