// gdn_chunk_conv.cu: gdn_chunk_frag.cu's prep with the Gated DeltaNet's
// conv in it (convprep=on): gdn_chunk_prep_conv reads the conv's input
// (the in_proj's q, k and v columns before the conv) and the conv's state,
// and computes the conv and its SiLU where gdn_chunk_prep_frag loads their
// output, conv_silu's sums in its order (the same bits), so that a prompt
// chunk's conv output, float32 rows of q, k and v, is neither written by
// conv_silu nor read back; gdn_conv_keep then advances the conv's state.
// The state pass is gdn_chunk_frag.cu's. A module of its own so that
// gdn_chunk_frag.ptx and its machine code stay as they are.
#define GC_ONE_PRODUCT
#define GC_FRAG
#define GC_CONV
#include "gdn_chunk.cu"
