//go:build !purego

package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// These tests pin each AVX2 kernel to its Go twin on the same inputs.

func needAVX2(t *testing.T) {
	t.Helper()
	if !hasAVX2 {
		t.Skip("this CPU lacks AVX2 or FMA: only the Go kernels run here")
	}
}

var simdShapes = []struct{ experts, rows, cols, bits, group int }{
	{1, 1, 64, 4, 64}, {1, 3, 192, 4, 64}, {1, 67, 512, 4, 64}, {1, 5, 8192, 4, 64}, {1, 4, 8256, 4, 64},
	{1, 1, 64, 8, 64}, {1, 3, 192, 8, 64}, {1, 67, 512, 8, 64}, {1, 5, 8192, 8, 64},
	{1, 9, 256, 4, 128}, {1, 9, 256, 8, 128}, {2, 5, 128, 4, 64},
}

// fastKernels lists the SIMD row kernels this machine runs for m.
func fastKernels(m *Matrix) []rowKernel {
	var ks []rowKernel
	if hasAVX2 && m.GroupSize%64 == 0 {
		ks = append(ks, avx2Kernel)
	}
	if hasAVX512 && m.Bits == 4 && m.GroupSize == 64 {
		ks = append(ks, avx512Kernel)
	}
	return ks
}

var kernelNames = map[rowKernel]string{avx2Kernel: "AVX2", avx512Kernel: "AVX-512"}

func TestMatVecSIMDMatchesGo(t *testing.T) {
	needAVX2(t)
	if !hasAVX512 {
		t.Log("this CPU lacks AVX-512: only the AVX2 kernels are checked")
	}
	rng := rand.New(rand.NewPCG(51, 52))
	for _, s := range simdShapes {
		m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
		x, x64 := randomInputs(rng, 1, s.cols)
		_, size := referenceProducts(&m, x64, 1)
		rows := s.experts * s.rows
		xsum := groupSums(nil, x, s.group)
		want := poisoned(rows)
		matVecRowsGo(&m, x, xsum, want, 0, rows)
		for _, k := range fastKernels(&m) {
			xk := x
			if l := layoutInput(k, s.bits, nil, x); l != nil {
				xk = l
			}
			got := poisoned(rows)
			// Two calls over split ranges also check the row offsets.
			matVecRowsFast(k, &m, xk, xsum, got, 0, rows/2)
			matVecRowsFast(k, &m, xk, xsum, got, rows/2, rows)
			for r := range rows {
				if d := math.Abs(float64(got[r] - want[r])); !(d <= kernelTol*size[0][r]) {
					t.Errorf("%+v row %d: %s %v, Go %v", s, r, kernelNames[k], got[r], want[r])
				}
			}
		}
	}
}

func TestDequantAVX2IsExact(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(53, 54))
	for _, s := range simdShapes {
		m := RandomMatrix(rng, s.experts, s.rows, s.cols, s.bits, s.group)
		want := make([]float32, s.cols)
		got := make([]float32, s.cols+1)
		for r := range s.experts * s.rows {
			m.DequantizeRow(r, want)
			got[s.cols] = 42 // must survive: the kernel writes exactly Cols values
			dequantRowSIMD(&m, r, got[:s.cols])
			for c := range want {
				if math.Float32bits(got[c]) != math.Float32bits(want[c]) {
					t.Fatalf("%+v row %d col %d: AVX2 %v, reference %v", s, r, c, got[c], want[c])
				}
			}
			if got[s.cols] != 42 {
				t.Fatalf("%+v row %d: wrote past the row", s, r)
			}
		}
	}
}

func TestTilesAVX2MatchGo(t *testing.T) {
	needAVX2(t)
	rng := rand.New(rand.NewPCG(55, 56))
	for _, cols := range []int{16, 64, 208, 2048} {
		w, _ := randomInputs(rng, tileRows, cols)
		x, _ := randomInputs(rng, tileCols, cols)
		var want, got [tileRows * tileCols]float32
		check := func(what string, n int) {
			for k := range n {
				var size float64
				a, b := k%tileRows, k/tileRows
				for c := range cols {
					size += math.Abs(float64(w[a*cols+c]) * float64(x[b*cols+c]))
				}
				if d := math.Abs(float64(got[k] - want[k])); !(d <= kernelTol*size) {
					t.Errorf("%s cols %d: out[%d] AVX2 %v, Go %v", what, cols, k, got[k], want[k])
				}
			}
		}
		tile4x2Go(w, x, &want)
		got = [8]float32{}
		tile4x2SIMD(w, x, &got)
		check("tile4x2", 8)
	}
}

// TestLayoutInputTransposesBlocks checks the layouts the 4-bit kernels
// expect: nibble j of word w in a block is column 8w+j, scaled by 16^-j for
// the nibbles read in place; AVX-512 interleaves two blocks, and a last odd
// block keeps the AVX2 layout.
func TestLayoutInputTransposesBlocks(t *testing.T) {
	x := make([]float32, 3*64)
	for i := range x {
		x[i] = float32(i)
	}
	if layoutInput(avx2Kernel, 8, nil, x) != nil {
		t.Error("8-bit input was relaid; the 8-bit kernel reads x as it is")
	}
	xk := layoutInput(avx2Kernel, 4, nil, x)
	for b := range 3 {
		for j := range 8 {
			for w := range 8 {
				if got, want := xk[64*b+8*j+w], float32(64*b+8*w+j)*nibbleScale[j]; got != want {
					t.Fatalf("AVX2 layout: xk[%d] = %v, want %v", 64*b+8*j+w, got, want)
				}
			}
		}
	}
	xk = layoutInput(avx512Kernel, 4, nil, x)
	for j := range 8 {
		for h := range 2 {
			for w := range 8 {
				if got, want := xk[16*j+8*h+w], float32(64*h+8*w+j)*nibbleScale[j]; got != want {
					t.Fatalf("AVX-512 layout: xk[%d] = %v, want %v", 16*j+8*h+w, got, want)
				}
			}
		}
	}
	for j := range 8 {
		for w := range 8 {
			if got, want := xk[128+8*j+w], float32(128+8*w+j)*nibbleScale[j]; got != want {
				t.Fatalf("AVX-512 layout, odd last block: xk[%d] = %v, want %v", 128+8*j+w, got, want)
			}
		}
	}
}

// BenchmarkMatVec4bitKernels compares the row kernels on the large matrix
// of BenchmarkMatVec4bit: what each SIMD level gains.
func BenchmarkMatVec4bitKernels(b *testing.B) {
	defer func(avx512 bool) { hasAVX512, portableOnly = avx512, false }(hasAVX512)
	if hasAVX512 {
		b.Run("avx512", func(b *testing.B) { benchMatVec(b, 4) })
	}
	hasAVX512 = false
	if hasAVX2 {
		b.Run("avx2", func(b *testing.B) { benchMatVec(b, 4) })
	}
	portableOnly = true
	b.Run("go", func(b *testing.B) { benchMatVec(b, 4) })
}
