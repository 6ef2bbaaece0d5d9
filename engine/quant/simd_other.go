//go:build !amd64

package quant

// Without SIMD kernels every shape takes the portable Go path.

func simdMatVec(*Matrix) bool { return false }
func simdMatMul(*Matrix) bool { return false }

func rowKernelInput(buf, x []float32, bits int) []float32 { return x }
func matVecRowsSIMD(m *Matrix, xk, xsum, y []float32, lo, hi int) {
	matVecRowsGo(m, xk, xsum, y, lo, hi)
}
func dequantRowSIMD(m *Matrix, r int, dst []float32)                { dequantRowGo(m, r, dst) }
func tile4x2SIMD(w, x []float32, out *[tileRows * tileCols]float32) { tile4x2Go(w, x, out) }
func tile4x1SIMD(w, x []float32, out *[tileRows * tileCols]float32) { tile4x1Go(w, x, out) }
