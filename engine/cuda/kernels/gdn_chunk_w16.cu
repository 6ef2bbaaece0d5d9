// gdn_chunk_w16.cu: gdn_chunk_frag.cu's state pass over 16 warps a block
// instead of 8 (gc_state16 in gdn_chunk.cu: the same tiles and sums, the
// same bits), reading the workspace gdn_chunk_frag.ptx's prep writes.
// deltastate=w16|w16k; a module of its own so that gdn_chunk_frag.ptx and
// its machine code stay as they are.
#define GC_ONE_PRODUCT
#define GC_FRAG
#define GC_W16
#include "gdn_chunk.cu"
