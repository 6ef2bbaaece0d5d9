// Package quant holds MLX group-wise affine quantised matrices and the CPU
// kernels that multiply by them without expanding the weights.
//
// Format (spec 3.4): each row of Cols elements is cut into groups of
// GroupSize; element c of row r is
//
//	w[r][c] = scale[r][c/G] * q + bias[r][c/G]
//
// where q is the unsigned Bits-wide code stored little-endian in 32-bit words,
// element 0 of a word in the lowest bits. Scales and biases are bfloat16 and
// may be negative.
package quant

import (
	"fmt"
	"math"
)

// Matrix is one quantised matrix [Rows, Cols], or a stack of Experts such
// matrices stored back to back (MLX SwitchLinear), as bound from a checkpoint.
// The slices usually alias a read-only memory map; never write to them.
type Matrix struct {
	Rows, Cols int // logical shape of one matrix
	Experts    int // number of stacked matrices; 1 for a plain Linear
	Bits       int // 4 or 8
	GroupSize  int // 64 in every MLX conversion petal accepts

	Words  []uint32 // [Experts*Rows, Cols*Bits/32]
	Scales []uint16 // bf16 [Experts*Rows, Cols/GroupSize]
	Biases []uint16 // bf16 [Experts*Rows, Cols/GroupSize]
}

// WordsPerRow is the number of packed uint32 words in one row.
func (m *Matrix) WordsPerRow() int { return m.Cols * m.Bits / 32 }

// GroupsPerRow is the number of scale/bias pairs in one row.
func (m *Matrix) GroupsPerRow() int { return m.Cols / m.GroupSize }

// Validate checks that the slices have the lengths the shape implies.
func (m *Matrix) Validate() error {
	if m.Bits != 4 && m.Bits != 8 {
		return fmt.Errorf("quant: %d-bit weights are not supported (4 or 8)", m.Bits)
	}
	if m.GroupSize <= 0 || m.Cols%m.GroupSize != 0 || m.GroupSize%(32/m.Bits) != 0 {
		return fmt.Errorf("quant: group size %d does not divide %d columns", m.GroupSize, m.Cols)
	}
	if m.Experts < 1 {
		return fmt.Errorf("quant: %d experts", m.Experts)
	}
	rows := m.Experts * m.Rows
	if len(m.Words) != rows*m.WordsPerRow() {
		return fmt.Errorf("quant: %d packed words, want %d", len(m.Words), rows*m.WordsPerRow())
	}
	if len(m.Scales) != rows*m.GroupsPerRow() || len(m.Biases) != rows*m.GroupsPerRow() {
		return fmt.Errorf("quant: %d scales and %d biases, want %d", len(m.Scales), len(m.Biases), rows*m.GroupsPerRow())
	}
	return nil
}

// Expert returns the e-th matrix of a stack as a plain matrix (no copy).
func (m *Matrix) Expert(e int) Matrix {
	wr, gr := m.WordsPerRow(), m.GroupsPerRow()
	return Matrix{
		Rows: m.Rows, Cols: m.Cols, Experts: 1, Bits: m.Bits, GroupSize: m.GroupSize,
		Words:  m.Words[e*m.Rows*wr : (e+1)*m.Rows*wr],
		Scales: m.Scales[e*m.Rows*gr : (e+1)*m.Rows*gr],
		Biases: m.Biases[e*m.Rows*gr : (e+1)*m.Rows*gr],
	}
}

// Bytes is the storage size of the packed codes, scales and biases.
func (m *Matrix) Bytes() int64 {
	return int64(len(m.Words))*4 + int64(len(m.Scales))*2 + int64(len(m.Biases))*2
}

// DequantizeRow writes row r (of the whole stack) into dst[:Cols]. It is the
// plain reference the fast kernels are tested against, and the embedding
// lookup: only looked-up rows are ever expanded.
func (m *Matrix) DequantizeRow(r int, dst []float32) {
	wr, gr := m.WordsPerRow(), m.GroupsPerRow()
	words := m.Words[r*wr : (r+1)*wr]
	perWord := 32 / m.Bits
	mask := uint32(1)<<m.Bits - 1
	for c := 0; c < m.Cols; c++ {
		g := r*gr + c/m.GroupSize
		q := (words[c/perWord] >> (uint(m.Bits) * uint(c%perWord))) & mask
		dst[c] = float32(q)*BF16(m.Scales[g]) + BF16(m.Biases[g])
	}
}

// BF16 widens a bfloat16 bit pattern to float32 (exact).
func BF16(u uint16) float32 { return math.Float32frombits(uint32(u) << 16) }

// ToBF16 rounds a float32 to the nearest bfloat16, ties to even; NaN stays NaN.
func ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
