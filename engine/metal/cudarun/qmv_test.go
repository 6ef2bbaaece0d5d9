//go:build linux

package cudarun

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"petal/engine/cuda/driver"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

// qmvShapes are engine/cuda's mat-vec shapes: off the warp and group
// boundaries, and the 35B model's own (experts as one stack of rows).
var qmvShapes = []struct {
	name                string
	experts, rows, cols int
}{
	{"1x64", 1, 1, 64}, {"1x192", 1, 1, 192}, {"1x2112", 1, 1, 2112},
	{"7x64", 1, 7, 64}, {"7x192", 1, 7, 192}, {"7x2112", 1, 7, 2112},
	{"513x64", 1, 513, 64}, {"513x192", 1, 513, 192}, {"513x2112", 1, 513, 2112},
	{"expert.gate_up 512x2048", 1, 512, 2048},
	{"expert.down 2048x512", 1, 2048, 512},
	{"o_proj 2048x4096", 1, 2048, 4096},
	{"experts.gate_up 256x512x2048", 256, 512, 2048},
	{"experts.down 256x2048x512", 256, 2048, 512},
	{"lm_head 248320x2048", 1, 248320, 2048},
}

// qmvEntries are qmv.metal's entry points with their rows per lane and
// whether they read the interleaved scale/bias words.
var qmvEntries = []struct {
	name string
	r    int
	sb   bool
}{{"qmv_f32_r4", 4, false}, {"qmv_f32_r4_sb", 4, true}, {"qmv_f32_r2_sb", 2, true}, {"qmv_f32_r1_sb", 1, true}}

const qmvThreads = 8 * 32 // QMV_SIMDGROUPS simdgroups

// matVec64 is W·x in float64 from the dequantised rows, with Σ|w·x| per
// row, the scale a float32 sum's rounding is measured against.
func matVec64(m *quant.Matrix, x []float32) (y, absSum []float64) {
	rows := m.Rows * m.Experts
	y, absSum = make([]float64, rows), make([]float64, rows)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, m.Cols)
			for r := w; r < rows; r += workers {
				m.DequantizeRow(r, row)
				var s, a float64
				for c, v := range row {
					p := float64(v) * float64(x[c])
					s += p
					a += math.Abs(p)
				}
				y[r], absSum[r] = s, a
			}
		}()
	}
	wg.Wait()
	return y, absSum
}

// TestQMVMatchesReference runs every qmv.metal entry at every shape and
// team size, on a grid of at most two threadgroups per SM (so the large
// shapes take the persistent loop), with fresh random weights and input,
// the output poisoned before each run and its guard checked. Tolerance:
// engine/cuda's for the exact float32 kind, 1e-5 of Σ|w·x| per row.
func TestQMVMatchesReference(t *testing.T) {
	c := gpu(t)
	s := newStream(t, c)
	mod := module(t, c, "qmv")
	rng := freshRNG(t)
	maxGrid := 2 * c.Device().SMs
	for _, sh := range qmvShapes {
		m := quant.RandomMatrix(rng, sh.experts, sh.rows, sh.cols, 4, 64)
		rows := sh.experts * sh.rows
		q := uploadQ(t, c, s, &m, sh.name)
		x := randomVector(rng, sh.cols)
		want, absSum := matVec64(&m, x)
		xb := upBuf(t, c, s, x, "x")
		y := newBuf(t, c, s, rows, "y")
		for _, e := range qmvEntries {
			for _, team := range teams(sh.cols / 64) {
				y.Poison(t, s)
				rowsPerGroup := 8 * (32 / team) * e.r
				grid := min(maxGrid, ceilDiv(rows, rowsPerGroup))
				// The _sb entries take the interleaved words as scales.
				scales := q.scales.P
				if e.sb {
					scales = q.sb.P
				}
				a := new(driver.Args).Ptr(q.words.P).Ptr(scales).Ptr(q.biases.P).Ptr(xb.P).Ptr(y.P)
				withParams(a, kernels.QmvParams{Rows: int32(rows), Cols: int32(sh.cols), Team: int32(team)})
				launch(t, s, mod, e.name, grid, qmvThreads, a)
				got := y.Floats(t, s, "y")
				worst, at := 0.0, 0
				for r := range want {
					if v := math.Abs(float64(got[r])-want[r]) / max(absSum[r], 1e-30); v > worst {
						worst, at = v, r
					}
				}
				label := fmt.Sprintf("%-30s %-14s team %2d grid %3d", sh.name, e.name, team, grid)
				t.Logf("%s worst %.2g of Σ|w·x|, relative L2 %.2g", label, worst, relL2(got, want))
				if !(worst <= 1e-5) {
					t.Errorf("%s: row %d: got %v, want %v (error %.2g of Σ|w·x|, tolerance 1e-5)", label, at, got[at], want[at], worst)
				}
			}
		}
	}
}
