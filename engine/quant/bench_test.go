package quant

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"petal/engine/parallel"
)

// The MatVec benchmarks use a matrix far larger than any cache (16384×8192
// 4-bit: 64 MiB of codes and 8 MiB of scales and biases), so they measure
// the memory path; BenchmarkMemRead reads a slice of the same size with the
// same workers, the ceiling to compare with. On amd64,
// BenchmarkMatVec4bitKernels (kernels_amd64_test.go) times each row kernel
// on the same matrix.
const benchRows, benchCols = 16384, 8192

func benchMatVec(b *testing.B, bits int) {
	rng := rand.New(rand.NewPCG(1, 1))
	m := RandomMatrix(rng, 1, benchRows, benchCols, bits, 64)
	x, _ := randomInputs(rng, 1, benchCols)
	y := make([]float32, benchRows)
	MatVec(&m, x, y)
	b.SetBytes(m.Bytes())
	b.ReportAllocs()
	for b.Loop() {
		MatVec(&m, x, y)
	}
}

func BenchmarkMatVec4bit(b *testing.B) { benchMatVec(b, 4) }
func BenchmarkMatVec8bit(b *testing.B) { benchMatVec(b, 8) }

type memReader struct {
	data []uint64
	sum  atomic.Uint64
	fn   func(lo, hi int)
}

func (r *memReader) read(lo, hi int) {
	var s0, s1, s2, s3 uint64
	d := r.data[lo:hi]
	for i := 0; i+3 < len(d); i += 4 {
		s0 += d[i]
		s1 += d[i+1]
		s2 += d[i+2]
		s3 += d[i+3]
	}
	r.sum.Add(s0 + s1 + s2 + s3)
}

func BenchmarkMemRead(b *testing.B) {
	m := Matrix{Rows: benchRows, Cols: benchCols, Experts: 1, Bits: 4, GroupSize: 64}
	size := int64(benchRows)*int64(m.WordsPerRow())*4 + 2*2*int64(benchRows)*int64(m.GroupsPerRow())
	r := &memReader{data: make([]uint64, size/8)}
	for i := range r.data {
		r.data[i] = uint64(i)
	}
	r.fn = r.read
	b.SetBytes(size)
	for b.Loop() {
		parallel.For(len(r.data), 4096, r.fn)
	}
}

// BenchmarkMatMul is the prefill path on a 2048×2048 4-bit matrix.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	m := RandomMatrix(rng, 1, 2048, 2048, 4, 64)
	for _, n := range []int{64, 512} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			x, _ := randomInputs(rng, n, m.Cols)
			y := make([]float32, n*m.Rows)
			MatMul(&m, x, n, y)
			b.ReportAllocs()
			for b.Loop() {
				MatMul(&m, x, n, y)
			}
			flops := 2 * float64(n) * float64(m.Rows) * float64(m.Cols)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkMatVecInCache measures the kernels' arithmetic alone: the matrix
// (512×2048, 512 KiB at 4 bits) stays in the caches.
func BenchmarkMatVecInCache(b *testing.B) {
	for _, bits := range []int{4, 8} {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 3))
			m := RandomMatrix(rng, 1, 512, 2048, bits, 64)
			x, _ := randomInputs(rng, 1, m.Cols)
			y := make([]float32, m.Rows)
			MatVec(&m, x, y)
			b.SetBytes(m.Bytes())
			b.ReportAllocs()
			for b.Loop() {
				MatVec(&m, x, y)
			}
			b.ReportMetric(float64(m.Rows*m.Cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
		})
	}
}
