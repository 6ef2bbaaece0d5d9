package cuda

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"petal/engine/quant"
)

// certModel is router=cert's arithmetic in Go, as route_cert.cu and
// qi_gemm's two-part form compute it, for the checks of its bound that need
// no GPU: per group of 64 columns, x's parts from d = 2^(E-6) (E the
// exponent of the group's largest |x|, at least -120).
type certModel struct {
	m      quant.Matrix
	groups int
	gbound []float32 // route_cert_bound's table
}

func newCertModel(m quant.Matrix) *certModel {
	c := &certModel{m: m, groups: m.Cols / 64}
	c.gbound = make([]float32, c.groups)
	for g := range c.groups {
		best := 0.0
		for e := range m.Rows {
			s, b := math.Abs(float64(c.scale(e, g))), math.Abs(float64(c.bias(e, g)))
			sum := 0.0
			for k := range 64 {
				sum += s*float64(c.code(e, g*64+k)) + b
			}
			best = max(best, sum)
		}
		c.gbound[g] = float32(best * (1 + 0x1p-40))
		if float64(c.gbound[g]) < best {
			c.gbound[g] = math.Nextafter32(c.gbound[g], float32(math.Inf(1)))
		}
	}
	return c
}

func (c *certModel) code(e, k int) int64 {
	per := 32 / c.m.Bits
	return int64(c.m.Words[e*c.m.WordsPerRow()+k/per] >> (c.m.Bits * (k % per)) & (1<<c.m.Bits - 1))
}
func (c *certModel) scale(e, g int) float32 {
	return math.Float32frombits(uint32(c.m.Scales[e*c.groups+g]) << 16)
}
func (c *certModel) bias(e, g int) float32 {
	return math.Float32frombits(uint32(c.m.Biases[e*c.groups+g]) << 16)
}

// exponent is E of group g of x.
func certExponent(x []float32) int {
	var mb uint32
	for _, v := range x {
		mb = max(mb, math.Float32bits(v)&0x7fffffff)
	}
	return max(int(mb>>23)-127, -120)
}

// logits are token x's approximate logits (qgemm_cert's float32 sums of
// two parts), its bound eps, and the exact ones (qgemm_i8's).
func (c *certModel) logits(x []float32) (approx, exact []float32, eps float32) {
	E := c.m.Rows
	approx, exact = make([]float32, E), make([]float32, E)
	exps := make([]int, c.groups)
	for g := range c.groups {
		exps[g] = certExponent(x[g*64 : g*64+64])
		eps += math.Float32frombits(uint32(127+exps[g]-6)<<23) * c.gbound[g] * 0.0078125
	}
	for e := range E {
		var acc float32
		var accd float64
		for g := range c.groups {
			Eg := exps[g]
			var v2, p2, v4, p4 int64
			for k := range 64 {
				f := float64(x[g*64+k]) * math.Ldexp(1, 6-Eg)
				P2, P4 := int64(math.Floor(f*256)), int64(math.Floor(f*(1<<24)))
				q := c.code(e, g*64+k)
				v2, p2, v4, p4 = v2+q*P2, p2+P2, v4+q*P4, p4+P4
			}
			s, b := c.scale(e, g), c.bias(e, g)
			t32 := float32(math.FMA(float64(s), float64(float32(v2)), float64(b*float32(p2))))
			acc = float32(math.FMA(float64(t32), float64(float32(math.Ldexp(1, Eg-14))), float64(acc)))
			accd = math.FMA(math.FMA(float64(s), float64(v4), float64(b)*float64(p4)), math.Ldexp(1, Eg-30), accd)
		}
		approx[e], exact[e] = acc, float32(accd)
	}
	return approx, exact, eps
}

// TestCertBoundHolds: router=cert's bound is a bound, and leaves few
// candidates. For 8- and 4-bit random routers at the 35B router's shape
// and tokens of normal, uniform, tiny, huge and mostly-zero values, every
// approximate logit (two parts, float32 sums) is within the token's eps
// of qgemm_i8's exact one, eps as qgemm_cert makes it from
// route_cert_bound's table; and the experts whose upper bound reaches the
// 8th largest lower bound (route_cert_select's candidates) are at most 32
// a token (one batch of its exact logits), about 10 for normal values.
func TestCertBoundHolds(t *testing.T) {
	const E, C, K = 256, 2048, 8
	rng := rand.New(rand.NewPCG(7, 11))
	for _, bits := range []int{8, 4} {
		c := newCertModel(quant.RandomMatrix(rng, 1, E, C, bits, 64))
		worst := 0.0
		var counts []int
		for tok := range 60 {
			x := make([]float32, C)
			for i := range x {
				switch tok % 5 {
				case 0, 1:
					x[i] = float32(rng.NormFloat64())
				case 2:
					x[i] = rng.Float32()*2 - 1
				case 3:
					x[i] = float32(rng.NormFloat64()) * float32(math.Ldexp(1, -60+120*(i/64%2)))
				case 4:
					if rng.IntN(16) == 0 {
						x[i] = float32(rng.NormFloat64())
					}
				}
			}
			approx, exact, eps := c.logits(x)
			lo := make([]float64, E)
			for e := range E {
				d := math.Abs(float64(approx[e]) - float64(exact[e]))
				if d > float64(eps) {
					t.Fatalf("%d-bit, token %d, expert %d: approximate logit %g, exact %g: %g apart, eps %g", bits, tok, e, approx[e], exact[e], d, eps)
				}
				worst = max(worst, d/float64(eps))
				lo[e] = float64(approx[e]) - float64(eps)
			}
			sorted := append([]float64(nil), lo...)
			sort.Sort(sort.Reverse(sort.Float64Slice(sorted)))
			n := 0
			for e := range E {
				if float64(approx[e])+float64(eps) >= sorted[K-1] {
					n++
				}
			}
			counts = append(counts, n)
		}
		sort.Ints(counts)
		t.Logf("%d-bit: the largest error %.3g of eps; candidates a token: median %d, largest %d", bits, worst, counts[len(counts)/2], counts[len(counts)-1])
		if counts[len(counts)-1] > 32 {
			t.Errorf("%d-bit: up to %d candidates a token, want at most 32", bits, counts[len(counts)-1])
		}
	}
}
