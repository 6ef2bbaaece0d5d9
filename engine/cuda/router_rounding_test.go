package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"petal/engine/backend/backendtest"
	"petal/engine/quant"
)

// TestRouterCodesRounding emulates on the CPU the arithmetic of ops.cu's
// qgemm_codes (x in two tf32 parts, centred codes, each 8-column product
// exact then rounded to float32, float64 after that) and of qgemm (float32
// dequantised weights, float32 sums in groups of 64), over the test data
// of TestRouterTensorCoresMatchReference's 8-bit router: the weights of
// qgemm_codes stay within routerTF32Bar of the float64 reference, and
// qgemm's do not (the bar is the kernel's rounding, not float32's).
func TestRouterCodesRounding(t *testing.T) {
	const E, C, K, rows, bits = 256, 2048, 8, 100, 8
	m := quant.RandomMatrix(rand.New(rand.NewPCG(bits, rows)), 1, E, C, bits, 64)
	x := randoms(rand.New(rand.NewPCG(rows, bits)), rows*C, 1)
	dense := backendtest.Dequantize(&m)
	_, want := backendtest.Route(dense, E, C, x, rows, K, true)
	codes, tiled := make([]float64, rows*E), make([]float64, rows*E)
	half, per := 1<<(bits-1), 32/bits
	for tok := range rows {
		xr := x[tok*C : (tok+1)*C]
		hi, lo := make([]float64, C), make([]float64, C)
		for k, v := range xr {
			h := tf32Round(v)
			hi[k], lo[k] = float64(h), float64(tf32Round(v-h))
		}
		for n := range E {
			var acc float64
			var accF float32
			for g := range C / 64 {
				s := float64(bf16(m.Scales[n*m.GroupsPerRow()+g]))
				b := float64(half)*s + float64(bf16(m.Biases[n*m.GroupsPerRow()+g]))
				var part, xsum float64
				var partF float32
				for kk := g * 64; kk < g*64+64; kk += 8 {
					var p float64
					for _, xp := range [][]float64{lo, hi} {
						sum := p
						for c := kk; c < kk+8; c++ {
							q := int(m.Words[n*m.WordsPerRow()+c/per]>>(uint(bits)*uint(c%per))) & (1<<bits - 1)
							sum += float64(q-half) * xp[c]
						}
						p = float64(float32(sum))
					}
					part += p
				}
				for c := g * 64; c < g*64+64; c++ {
					xsum += float64(xr[c])
					partF = float32(math.FMA(float64(float32(dense[n*C+c])), float64(xr[c]), float64(partF)))
				}
				acc += s*part + b*xsum
				accF += partF
			}
			codes[tok*E+n], tiled[tok*E+n] = float64(float32(acc)), float64(accF)
		}
	}
	_, wc := backendtest.RouteLogits(codes, E, rows, K, true)
	_, wt := backendtest.RouteLogits(tiled, E, rows, K, true)
	ec, et := relErr(widen32(wc), want), relErr(widen32(wt), want)
	t.Logf("emulated weights error over the RMS: qgemm_codes %.3g, qgemm %.3g", ec, et)
	if ec > routerTF32Bar || et <= routerTF32Bar {
		t.Errorf("qgemm_codes %.3g, qgemm %.3g: want the first within the bar %g and the second not", ec, et, routerTF32Bar)
	}
}

// tf32Round is cvt.rna.tf32.f32: the nearest value of 10 mantissa bits,
// ties away from zero.
func tf32Round(x float32) float32 {
	return math.Float32frombits((math.Float32bits(x) + 0x1000) &^ 0x1fff)
}

func bf16(u uint16) float32 { return math.Float32frombits(uint32(u) << 16) }
