// norm_bfo.cu: norm_bf.cu's norms with their float32 output optional
// (normf32=lean): given a null out they write only the bf16 copy the next
// GEMM reads, where the program writes over the float32 output before any
// other op reads it (backend.Overwritten), a pass of 4 bytes an element
// fewer. The same sums and roundings; entry points add_rmsnorm_bfo and
// gated_rmsnorm_bfo. A module of its own, so that norm_bf.ptx and its
// built-in machine code stay as they are.
#define NORM_OUT_OPTIONAL
#define add_rmsnorm_bf add_rmsnorm_bfo
#define gated_rmsnorm_bf gated_rmsnorm_bfo
#include "norm_bf.cu"
