// gdn_chunk_conv.cu: the Gated DeltaNet's causal conv (width 4, SiLU) and
// the chunked delta rule of prefill in the rule's two launches
// (convdelta=on): gdn_chunk_prep_conv computes q, k and v from the conv's
// input as conv_silu would (the same bits) instead of reading the conv's
// output, and gdn_chunk_state_sk_conv advances the conv's state before
// gdn_chunk_state_sk's walk. The conv's launch goes, and with it a write
// and a read of its output (134 MB at 4096 tokens of the 35B model). A
// module of its own so that gdn_chunk.ptx and its machine code stay as
// they are.
#define GC_CONV_MODULE
#include "gdn_chunk.cu"
