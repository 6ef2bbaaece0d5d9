// gdn_chunk_tf32.cu: gdn_chunk.cu's state pass with one tf32 product a
// pair of operands (each rounded to tf32, about 2^-11 relative, float32
// sums) where gdn_chunk.cu takes three (hi + lo parts, about 2^-21):
// delta=tf32, a lower-precision choice behind a switch, to measure what
// the float32-accurate products cost. The state stays float32; the prep
// (gdn_chunk_prep, its k·k and q·k, the forward substitution) is
// gdn_chunk.ptx's. A module of its own so that gdn_chunk.ptx and its
// machine code stay as they are. Entry points gdn_chunk_state_tf32 (the
// tiles of gdn_chunk_state_ilp) and gdn_chunk_state_tf32_sk (the first
// products split over k, as gdn_chunk_state_sk).
#define GC_ONE_PRODUCT
#include "gdn_chunk.cu"
