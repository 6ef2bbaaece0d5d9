// gdn_chunk_walk2.cu: the chunked delta rule's state pass at two blocks a
// multiprocessor (deltawalk=two): gdn_chunk_state_w2, half of
// gdn_chunk_state_ilp's rows a block and a quarter of its threads, one
// buffer of the workspace, the same products (gdn_chunk.cu has it). The
// prep is gdn_chunk.ptx's. A module of its own so that gdn_chunk.ptx and
// its machine code stay as they are.
#define GC_WALK2_MODULE
#include "gdn_chunk.cu"
