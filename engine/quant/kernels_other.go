//go:build !amd64 || purego

package quant

// Without SIMD kernels (other architectures, or amd64 built with -tags
// purego) every shape takes the portable Go path.

func pickRowKernel(*Matrix) rowKernel                            { return portableKernel }
func layoutInput(rowKernel, int, []float32, []float32) []float32 { return nil }
func simdMatMul(*Matrix) bool                                    { return false }

func matVecRowsFast(_ rowKernel, m *Matrix, xk, xsum, y []float32, lo, hi int) {
	matVecRowsGo(m, xk, xsum, y, lo, hi)
}
func dequantRowSIMD(m *Matrix, r int, dst []float32)                { dequantRowGo(m, r, dst) }
func tile4x2SIMD(w, x []float32, out *[tileRows * tileCols]float32) { tile4x2Go(w, x, out) }
