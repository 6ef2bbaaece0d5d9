package quant

import (
	"fmt"
	"math"
)

// Quantize packs a row-major [rows, cols] float32 matrix the way MLX's Metal
// affine_quantize kernel does (spec 3.4; oracle README "Affine
// quantisation"): per group the running max starts at 0, halfway cases round
// away from zero, scale and bias are stored as bf16 but the codes are computed
// from their float32 values. It panics on a shape the format cannot hold.
func Quantize(w []float32, rows, cols, bits, group int) Matrix {
	m := Matrix{Rows: rows, Cols: cols, Experts: 1, Bits: bits, GroupSize: group}
	if bits != 4 && bits != 8 || group <= 0 || cols%group != 0 || group%(32/bits) != 0 || rows < 0 {
		panic(fmt.Sprintf("quant: cannot quantise [%d, %d] to %d bits in groups of %d", rows, cols, bits, group))
	}
	if len(w) != rows*cols {
		panic(fmt.Sprintf("quant: %d values to quantise, want %d×%d", len(w), rows, cols))
	}
	m.Words = make([]uint32, rows*m.WordsPerRow())
	m.Scales = make([]uint16, rows*m.GroupsPerRow())
	m.Biases = make([]uint16, rows*m.GroupsPerRow())
	perWord := 32 / bits
	for gi := range m.Scales {
		vals := w[gi*group : (gi+1)*group]
		scale, bias := groupScaleBias(vals, bits)
		m.Scales[gi] = ToBF16(scale)
		m.Biases[gi] = ToBF16(bias)
		words := m.Words[gi*group/perWord : (gi+1)*group/perWord]
		for c, v := range vals {
			q := groupCode(v, scale, bias, bits)
			words[c/perWord] |= q << (uint(bits) * uint(c%perWord))
		}
	}
	return m
}

// groupScaleBias is the float32 scale and bias MLX picks for one group. The
// bias is the edge of the range farther from zero, so it is represented
// exactly, and the scale's sign points from that edge into the range.
func groupScaleBias(vals []float32, bits int) (scale, bias float32) {
	levels := float32(int(1)<<bits - 1)
	wMax, wMin := float32(0), vals[0]
	for _, v := range vals {
		wMax = max(wMax, v)
		wMin = min(wMin, v)
	}
	scale = max((wMax-wMin)/levels, 1e-7)
	edge := wMax
	if abs32(wMin) > abs32(wMax) {
		edge = wMin
	} else {
		scale = -scale
	}
	q0 := roundHalfAway(edge / scale)
	if q0 == 0 {
		return scale, 0
	}
	return edge / q0, edge
}

// groupCode is the clamped code of one value.
func groupCode(v, scale, bias float32, bits int) uint32 {
	q := roundHalfAway((v - bias) / scale)
	return uint32(min(max(q, 0), float32(int(1)<<bits-1)))
}

// roundHalfAway is Metal's round(): halfway cases away from zero.
func roundHalfAway(f float32) float32 { return float32(math.Round(float64(f))) }

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }
