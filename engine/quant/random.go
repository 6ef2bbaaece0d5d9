package quant

import (
	"fmt"
	"math/rand/v2"
)

// RandomMatrix makes a stack of experts×[rows, cols] matrices with uniformly
// random codes and scales and biases shaped like real ones: |scale| about
// 0.01 with either sign, and the bias at the edge of the range the scale
// walks from, as the quantiser leaves it. It is cheap enough for synthetic
// models of many gigabytes: codes come straight from the generator.
func RandomMatrix(rng *rand.Rand, experts, rows, cols, bits, group int) Matrix {
	m := Matrix{Rows: rows, Cols: cols, Experts: experts, Bits: bits, GroupSize: group}
	if bits != 4 && bits != 8 || group <= 0 || cols%group != 0 || group%(32/bits) != 0 || rows < 0 || experts < 1 {
		panic(fmt.Sprintf("quant: cannot make a random %d×[%d, %d] %d-bit matrix in groups of %d", experts, rows, cols, bits, group))
	}
	m.Words = make([]uint32, experts*rows*m.WordsPerRow())
	m.Scales = make([]uint16, experts*rows*m.GroupsPerRow())
	m.Biases = make([]uint16, experts*rows*m.GroupsPerRow())
	i := 0
	for ; i+1 < len(m.Words); i += 2 {
		u := rng.Uint64()
		m.Words[i], m.Words[i+1] = uint32(u), uint32(u>>32)
	}
	if i < len(m.Words) {
		m.Words[i] = rng.Uint32()
	}
	levels := float32(int(1)<<bits - 1)
	for g := range m.Scales {
		u := rng.Uint64()
		scale := 0.005 + 0.01*float32(u&0xffffff)/(1<<24)
		if u>>63 != 0 {
			scale = -scale
		}
		// The edge sits about halfway down the code range from zero.
		mid := 0.35 + 0.3*float32(u>>24&0xffffff)/(1<<24)
		m.Scales[g] = ToBF16(scale)
		m.Biases[g] = ToBF16(-scale * levels * mid)
	}
	return m
}
