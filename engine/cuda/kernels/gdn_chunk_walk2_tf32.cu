// gdn_chunk_walk2_tf32.cu: gdn_chunk_walk2.cu's state pass (two blocks a
// multiprocessor) with gdn_chunk_tf32.cu's one tf32 product a pair of
// operands: deltawalk=two with delta=tf32. A module of its own, as theirs.
#define GC_ONE_PRODUCT
#define GC_WALK2_MODULE
#include "gdn_chunk.cu"
