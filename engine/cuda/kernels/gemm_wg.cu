// gemm_wg.cu: gemm.cu's tile GEMMs with their products on wgmma (sm_90a:
// Hopper's warpgroup matrix multiply, operands from shared memory or, for
// the register-A tiles, the weights from registers), in a module of its
// own so that gemm.ptx stays sm_90 PTX that newer GPUs can compile. The
// same loads and dequantisation as gemm_tile's mma.sync form (WG = 1, 2, 3
// there). gen.sh: sm_90a
#define GEMM_WG_MODULE
#include "gemm.cu"

// w128: 128 x 128 tiles, one warpgroup (two wgmma of 64 x 128 a k-step),
// three stages 1024-byte aligned; entries gemm_dense_w128, gemm_group_w128,
// gemm_gateup_w128, gemm_down_w128 with gemm.cu's arguments. w128o: the
// same with two W tiles, the next k-tile dequantised while this one's
// products run. w64o: w128o's form at 64 rows a tile (one wgmma a k-step),
// three blocks a multiprocessor, for the MoE at 32-64 rows an expert and
// dense GEMMs with too few 128-row tiles to fill the GPU.
GEMM_ENTRIES(w128, 128, 128, 2, 2, 3, 2, 1)
GEMM_ENTRIES(w128o, 128, 128, 2, 2, 3, 2, 2)
GEMM_ENTRIES(w64o, 64, 128, 2, 2, 3, 3, 2)
// Two warpgroups a block sharing one dequantised W tile, so that each
// thread dequantises half as much: w128o2, a 64-row slab each, two blocks a
// multiprocessor (16 warps); w256o, two slabs each, 256 rows a tile (half
// the dequantisation per product of w128o), one block a multiprocessor.
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
