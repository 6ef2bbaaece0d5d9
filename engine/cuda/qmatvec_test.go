package cuda

import (
	"math"
	"testing"

	"petal/engine/quant"
)

// matVecTolerance bounds |y - W·x| against float64, relative to Σ|w·x| of
// the row (the scale of a float32 sum's rounding): float32 accumulation in
// any order lands near 1e-7 to 1e-6 here.
const matVecTolerance = 1e-5

// matVecShape is a test matrix: an expert stack of experts×[rows, cols].
type matVecShape struct {
	name                string
	experts, rows, cols int
}

var matVecShapes = []matVecShape{
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

// TestMatVecMatchesReference runs every variant on every shape, fresh random
// weights and inputs, the output poisoned with NaN before each run.
func TestMatVecMatchesReference(t *testing.T) {
	c := gpu(t)
	s, err := c.NewStream("test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, err := c.NewUploader(s, 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	mod, err := LoadQMatVecModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	rng := freshRNG(t)
	for _, sh := range matVecShapes {
		if testing.Short() && sh.experts*sh.rows*sh.cols > 1<<24 {
			continue
		}
		m := quant.RandomMatrix(rng, sh.experts, sh.rows, sh.cols, 4, 64)
		x := randomVector(rng, sh.cols)
		want, absSum := reference(&m, x)
		goY := make([]float32, len(want))
		quant.MatVec(&m, x, goY)
		dm, err := UploadQMatrix(c, up, &m, sh.name)
		if err != nil {
			t.Fatal(err)
		}
		dv := newDeviceVectors(t, c, s, x, len(want))
		for _, v := range MatVecVariants {
			k, err := NewMatVec(c, mod, v)
			if err != nil {
				t.Fatal(err)
			}
			dv.Poison(t, s)
			if err := k.Launch(s, dm, dv.x, dv.y); err != nil {
				t.Fatal(err)
			}
			got := dv.read(t, s)
			worst, at := compareMatVec(got, want, absSum)
			if worst > matVecTolerance || math.IsNaN(worst) {
				t.Errorf("%s %v: row %d: got %v, want %v (error %.2g of Σ|w·x|, tolerance %g)",
					sh.name, v, at, got[at], want[at], worst, matVecTolerance)
				continue
			}
			goWorst, _ := compareMatVec(goY, want, absSum)
			t.Logf("%-30s %v: worst error %.2g of Σ|w·x| (Go float32 MatVec: %.2g), relative L2 %.2g",
				sh.name, v, worst, goWorst, relL2(got, want))
		}
		dv.free()
		if err := dm.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// compareMatVec returns the worst |got-want|/absSum and its row; NaN (an
// unwritten element) is the worst of all.
func compareMatVec(got []float32, want, absSum []float64) (float64, int) {
	worst, at := 0.0, 0
	for r := range want {
		e := math.Abs(float64(got[r])-want[r]) / max(absSum[r], 1e-30)
		if math.IsNaN(e) {
			return math.NaN(), r
		}
		if e > worst {
			worst, at = e, r
		}
	}
	return worst, at
}

func relL2(got []float32, want []float64) float64 {
	var d, n float64
	for r := range want {
		e := float64(got[r]) - want[r]
		d += e * e
		n += want[r] * want[r]
	}
	return math.Sqrt(d / n)
}

// TestMatVecRefusesOtherFormats: 8-bit weights get a clear error, not a
// wrong answer.
func TestMatVecRefusesOtherFormats(t *testing.T) {
	c := gpu(t)
	mod, err := LoadQMatVecModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := NewMatVec(c, mod, DefaultMatVec)
	if err != nil {
		t.Fatal(err)
	}
	err = k.Launch(nil, &QMatrix{Rows: 4, Cols: 64, Bits: 8, GroupSize: 64}, 0, 0)
	if err == nil || err.Error() != "cuda: mat-vec of 8-bit weights in groups of 64 is not built (4-bit in groups of 64 only)" {
		t.Fatalf("8-bit mat-vec: %v", err)
	}
}
