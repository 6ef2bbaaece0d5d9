// gemm_fit.cu: w80rp and w160rp, gemm_wg.cu's register-A form against 80
// and 160 X rows (wgmma's n = 80, 160), for the MoE where experts get about
// 64 or 128 rows (2K and 4K tokens: 64 ± 8 and 128 ± 11 when routed
// evenly), so that most experts' rows fit one tile, where 64- and 128-row
// tiles leave about half of them a second, nearly empty, one (moefit=on).
// gen.sh: sm_90a
// A module of its own, loaded under moefit=on only, so that gemm_wg.ptx
// and its machine code stay as they are while these are measured.
#define GEMM_WG_MODULE
#include "gemm.cu"

// w160rp in four stages: the shared memory of two blocks a multiprocessor.
GEMM_ENTRIES(w80rp, 80, 128, 4, 2, 5, 2, 4)
GEMM_ENTRIES(w160rp, 160, 128, 4, 2, 4, 2, 4)
