//go:build !purego

package cpu

func expShiftSum(x []float32, m float32) float32 {
	if !useAVX2 || len(x) == 0 {
		return expShiftSumGo(x, m)
	}
	return expShiftSumAVX2(&x[0], len(x), m)
}

func siluRow(x []float32) {
	if !useAVX2 || len(x) == 0 {
		siluRowGo(x)
		return
	}
	siluRowAVX2(&x[0], len(x))
}

func mulSilu(y, z []float32) {
	if !useAVX2 || len(y) == 0 {
		mulSiluGo(y, z)
		return
	}
	z = z[:len(y)]
	mulSiluAVX2(&y[0], &z[0], len(y))
}

func gateRow(y, z []float32, s float32) {
	if !useAVX2 || len(y) == 0 {
		gateRowGo(y, z, s)
		return
	}
	z = z[:len(y)]
	gateRowAVX2(&y[0], &z[0], len(y), s)
}

// Implemented in exp_amd64.s; n > 0.

//go:noescape
func expShiftSumAVX2(x *float32, n int, m float32) float32

//go:noescape
func siluRowAVX2(x *float32, n int)

//go:noescape
func mulSiluAVX2(y, z *float32, n int)

//go:noescape
func gateRowAVX2(y, z *float32, n int, s float32)
