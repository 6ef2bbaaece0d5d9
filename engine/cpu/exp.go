package cpu

import "math"

// Row helpers built on exp: expShiftSum, siluRow, mulSilu and gateRow
// (exp_amd64.go, exp_other.go) run AVX2 assembly where the machine has it
// and the Go twins below otherwise. The assembly evaluates exp in float64
// to about 2^-46 relative error and rounds once to float32, so it agrees
// with float32(math.Exp(x)) to within one unit in the last place, and
// almost always exactly.

func silu(x float32) float32    { return x / (1 + float32(math.Exp(float64(-x)))) }
func sigmoid(x float32) float32 { return 1 / (1 + float32(math.Exp(float64(-x)))) }

// expShiftSumGo sets x[i] = exp(x[i] - m) and returns the sum of the new x.
func expShiftSumGo(x []float32, m float32) float32 {
	var sum float32
	for i, v := range x {
		p := float32(math.Exp(float64(v - m)))
		x[i] = p
		sum += p
	}
	return sum
}

// siluRowGo sets x[i] = silu(x[i]).
func siluRowGo(x []float32) {
	for i, v := range x {
		x[i] = silu(v)
	}
}

// mulSiluGo sets y[i] *= silu(z[i]).
func mulSiluGo(y, z []float32) {
	z = z[:len(y)]
	for i := range y {
		y[i] *= silu(z[i])
	}
}

// gateRowGo sets y[i] = y[i] / s * sigmoid(z[i]).
func gateRowGo(y, z []float32, s float32) {
	z = z[:len(y)]
	for i := range y {
		y[i] = y[i] / s * sigmoid(z[i])
	}
}
