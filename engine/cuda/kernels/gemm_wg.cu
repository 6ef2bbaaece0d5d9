// gemm_wg.cu: gemm.cu's tile GEMMs with their products on wgmma (sm_90a:
// Hopper's warpgroup matrix multiply, operands from shared memory or, for
// the register-A tiles, the weights from registers), in a module of its
// own so that gemm.ptx stays sm_90 PTX that newer GPUs can compile. The
// same loads and dequantisation as gemm_tile's mma.sync form (WG = 2 or 3
// there). gen.sh: sm_90a
#define GEMM_WG_MODULE
#include "gemm.cu"

// w64o: 64 x 128 tiles, one warpgroup (one wgmma of 64 x 128 a k-step),
// three stages 1024-byte aligned, two W tiles: the next k-tile dequantised
// while this one's products run; entries gemm_dense_w64o, gemm_group_w64o,
// gemm_gateup_w64o, gemm_down_w64o with gemm.cu's arguments. Three blocks
// a multiprocessor, for the MoE at 16-32 rows an expert and dense GEMMs
// with too few 128-row tiles to fill the GPU. (w128 and w128o, 128 rows on
// one warpgroup, with each k-tile's products waited for or overlapped,
// were measured slower than w128o2 and removed: 2026-12-06-wg1, -wg3.)
GEMM_ENTRIES(w64o, 64, 128, 2, 2, 3, 3, 2)
// Two warpgroups a block sharing one dequantised W tile, so that each
// thread dequantises half as much: w128o2, a 64-row slab each, two blocks a
// multiprocessor (16 warps); w256o, two slabs each, 256 rows a tile (half
// the dequantisation per product of w128o2), one block a multiprocessor.
GEMM_ENTRIES(w128o2, 128, 128, 4, 2, 3, 2, 2)
GEMM_ENTRIES(w256o, 256, 128, 4, 2, 3, 1, 2)
// w128r: the weights as wgmma's A operand from registers, each thread
// dequantising its own fragment, and X the B operand (Yᵀ = W·Xᵀ): no W
// tile in shared memory, which bounds the tiles above (run ncu1); two
// warpgroups of 64 weight rows each, 128 X rows.
GEMM_ENTRIES(w128r, 128, 128, 4, 2, 3, 2, 3)
// w256r: the same against 256 X rows (wgmma's n = 256: each dequantised
// weight used for twice the products), one block a multiprocessor.
GEMM_ENTRIES(w256r, 256, 128, 4, 2, 3, 1, 3)
// w64r: against 64 X rows (n = 64), for the MoE at 16-64 rows an expert
// where w64o moves its W tile through shared memory.
GEMM_ENTRIES(w64r, 64, 128, 4, 2, 3, 3, 3)
// w256rp, w128rp, w64rp: w256r, w128r and w64r with their k-tiles not
// drained (WG = 4: the copies run S - 2 k-tiles ahead and a k-tile's last
// products still run while the next one starts; ncu of w256r: the tensor
// pipe 46 % busy, each k-tile's four products waited for before the
// barrier), five stages: dense at 4096 rows 3-5 % faster than w256r on an
// H100, the MoE at 4096 tokens w128rp 923 us against w128r's 949
// (2026-12-06-pipe2).
GEMM_ENTRIES(w256rp, 256, 128, 4, 2, 5, 1, 4)
GEMM_ENTRIES(w128rp, 128, 128, 4, 2, 5, 2, 4)
GEMM_ENTRIES(w64rp, 64, 128, 4, 2, 5, 3, 4)
// w32r: against 32 X rows (n = 32), for the MoE at a few rows an expert
// (512-token prompts: 16 on average), where each weight serves few
// products and the time is in reading the weights: WG = 4, five stages
// (three k-tiles of copies in flight). At 512 tokens 308 us against s16's
// 365 (2026-12-06-pipe2); a 16-row twin with six stages took 391.
GEMM_ENTRIES(w32r, 32, 128, 2, 4, 5, 3, 4)
