// gdn_chunk_frag.cu: gdn_chunk_tf32.cu's chunked delta rule (one tf32
// product a pair of operands) with the workspace laid out for the state
// pass's fragments (GC_FRAG in gdn_chunk.cu): the prep, its own here
// (gdn_chunk_prep_frag), writes W, γ·Q and the masked q·k rounded to tf32
// in the m16n8k8 A fragments' order and the decayed K in the B fragments',
// so that the state pass (gdn_chunk_state_frag, gdn_chunk_state_frag_sk:
// the tiles of gdn_chunk_state_tf32 and _tf32_sk) reads a fragment with
// one 16- or 8-byte load where it took four or two loads and as many
// roundings. The same operands in the same order: the same bits as
// gdn_chunk_tf32.cu's kernels. delta=tf32frag; a module of its own so
// that gdn_chunk.ptx, gdn_chunk_tf32.ptx and their machine code stay as
// they are.
#define GC_ONE_PRODUCT
#define GC_FRAG
#include "gdn_chunk.cu"
