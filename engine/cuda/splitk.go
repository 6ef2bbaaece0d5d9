package cuda

// The projections split over their columns across a launch's blocks
// (kernels/splitk.h: gdnsplit=on, attnsplit=on): each block adds its part
// of every output into 64-bit fixed-point sums with atomics, the last block
// writing the output. Measured in 2026-12-07-split1 (an H100): atomics
// into 2048 sums from 144 blocks take 13.3 µs a launch, where storing the
// same parts takes 1.5, and gdnsplit=on decoded 6.8 % slower.

// splitKColumns is SK_COLS of splitk.h: the columns of a block.
const splitKColumns = 32

// splitKShared is SK_SHARED(rows) of splitk.h: the shared memory of a
// split projection's columns, 32 bytes a row.
func splitKShared(rows int) int { return 32 * rows }

// SplitKSumBytes is the bytes of a split projection's sums for rows
// outputs spread over copies copies (block b adds into copy b mod copies,
// the last block sums them): the sums as 64-bit fixed point, then the
// ticket (and padding), at SplitKTicket.
func SplitKSumBytes(rows, copies int) int64 { return SplitKTicket(rows, copies) + 16 }

// SplitKTicket is the offset of the ticket in a split projection's sums.
func SplitKTicket(rows, copies int) int64 { return 8 * int64(rows) * int64(copies) }

// maxSplitCopies bounds splitcopies=N.
const maxSplitCopies = 64
