// route_i8w.cu: qgemm_i8 (route_i8.cu) in a wider block, for router=i8wg
// (the default) and router=i8w: the same arithmetic for every logit (each
// group's exact int32 sums, the same float64 terms added in the same
// order of groups), so the same bits, with x split into its parts once
// for all 256 experts. qgemm_i8 holds 16 tokens x 32 rows a warp, 32 x 128
// a block of 8 warps: a group of 64 columns is a chain of dependent phases
// in each block (x split by half-warps, a barrier, 32 products, a float64
// epilogue of 16 sums a thread).
//   qgemm_i8_w    32 x 256 in 16 warps, one block a multiprocessor: half
//                 the splitting work and half the reads of x (the split
//                 is most of a group's issued instructions)
//   qgemm_i8_wg2  qgemm_i8_w with two groups of 64 columns a stage of
//                 copies, two stages: one pair of barriers for two groups
// On an H100 at 4096 rows 115 and 117 µs against qgemm_i8's 128; the
// template in qgemm_i8's own shape 125, in 32 x 64 blocks 158, with two
// groups a stage 125 (docs/bench/cuda, router7: those shapes since
// removed).
#define QI_HELPERS_ONLY
#include "route_i8.cu"

QI_KERNEL(qgemm_i8_w, 512, 1, 2, 8, 4)
QI_KERNEL(qgemm_i8_wg2, 512, 1, 2, 8, 4, 2, 2)
