// gdn_chunk_pair.cu: gdn_chunk_frag.cu's prep for two value heads of one
// key head at once (deltapair=on, gdn_chunk_prep_pair): the queries and
// keys read and normalised, and q·k and k·k taken, once for both heads
// where gdn_chunk_prep_frag does each for every value head. The same
// workspace, bit for bit, read by gdn_chunk_frag.cu's state pass; a module
// of its own so that gdn_chunk_frag.ptx and its machine code stay as they
// are.
#define GC_ONE_PRODUCT
#define GC_FRAG
#define GC_PAIR
#include "gdn_chunk.cu"
