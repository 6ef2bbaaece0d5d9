package cpu

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"petal/engine/parallel"
	"petal/engine/quant"
)

// readBufferBytes is the buffer ReadBandwidth reads: well above the last
// level cache of any CPU petal runs on (server parts have up to a few
// hundred MB of L3 in all; the read is timed per pass, so a part of it
// that stays cached shows as a higher figure, not a wrong one).
const readBufferBytes = 512 << 20

// peakRuns is how many timed passes each measurement makes; the best one
// is kept, as the ceiling the machine can reach.
const peakRuns = 5

// ReadBandwidth (backend.Peaks) reads a 512 MiB buffer of words with every
// worker of engine/parallel summing its own contiguous part, five times,
// and returns the best pass in bytes per second. It takes about 5·512 MiB
// over the bandwidth: a fraction of a second on most machines, plus the
// first touch of the buffer.
func (b *Backend) ReadBandwidth() (float64, error) {
	words := make([]uint64, readBufferBytes/8)
	for i := range words {
		words[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	var sink atomic.Uint64 // keeps the sums alive
	const grain = 1 << 16
	read := func(lo, hi int) {
		var s0, s1, s2, s3 uint64
		w := words[lo:hi]
		for len(w) >= 4 {
			s0 += w[0]
			s1 ^= w[1]
			s2 += w[2]
			s3 ^= w[3]
			w = w[4:]
		}
		sink.Add(s0 + s1 + s2 + s3)
	}
	best := bestOf(func() { parallel.For(len(words), grain, read) })
	return float64(readBufferBytes) / best.Seconds(), nil
}

// Sizes of MatrixRate's problem: a 4-bit 2048×2048 weight matrix in groups
// of 64 (a projection of the 35B shape) against 256 input rows.
const rateRows, rateCols, rateInputs = 2048, 2048, 256

// MatrixRate (backend.Peaks) times the CPU's prefill kernel for a linear,
// quant.MatMul (4-bit weights dequantised block by block into float32,
// float32 multiply-adds, all cores), on 256 rows against a random
// 2048×2048 4-bit matrix, five times, and returns the best in
// floating-point operations per second (2·256·2048·2048 = 2.1 GFLOP a run).
// It takes a second or two on a small machine.
func (b *Backend) MatrixRate() (float64, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := quant.RandomMatrix(rng, 1, rateRows, rateCols, 4, 64)
	x := make([]float32, rateInputs*rateCols)
	for i := range x {
		x[i] = 2*rng.Float32() - 1
	}
	y := make([]float32, rateInputs*rateRows)
	best := bestOf(func() { quant.MatMul(&m, x, rateInputs, y) })
	flops := 2 * float64(rateInputs) * float64(rateRows) * float64(rateCols)
	return flops / best.Seconds(), nil
}

// bestOf runs f once untimed, then peakRuns times, and returns the
// shortest time.
func bestOf(f func()) time.Duration {
	f()
	d := make([]time.Duration, peakRuns)
	for i := range d {
		start := time.Now()
		f()
		d[i] = time.Since(start)
	}
	return slices.Min(d)
}
