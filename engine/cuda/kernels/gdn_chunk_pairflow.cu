// gdn_chunk_pairflow.cu: the prep of deltaflow=on (gdn_chunk_flow.cu) with
// gdn_chunk_pair.cu's work (deltapair=on): gdn_chunk_prep_pair_flow's
// blocks, one a multiprocessor, take two value heads of a key head a block
// of tokens and raise both heads' flags as they write its workspace, for
// gdn_chunk_flow.cu's state pass (gdn_chunk_state_flow), which fetches a
// block once its flag is up. The same bits; a module of its own so that
// gdn_chunk_flow.ptx and gdn_chunk_pair.ptx stay as they are.
#define GC_ONE_PRODUCT
#define GC_FRAG
#define GC_PAIR
#define GC_FLOW
#include "gdn_chunk.cu"
