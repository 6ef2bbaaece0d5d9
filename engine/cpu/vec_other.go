//go:build !amd64 || purego

package cpu

// Without the assembly (other architectures, or amd64 built with -tags
// purego) the helpers are their Go twins.

func dot(a, b []float32) float32                               { return dotGo(a, b) }
func axpy(a float32, x, y []float32)                           { axpyGo(a, x, y) }
func dot4(rows []float32, s int, x []float32, out *[4]float32) { dot4Go(rows, s, x, out) }
func axpy4(a *[4]float32, rows []float32, s int, y []float32)  { axpy4Go(a, rows, s, y) }
func maxOf(x []float32) float32                                { return maxGo(x) }
func deltaRows(S, k, q, v, o []float32, beta, g, kq float32) {
	deltaRowsGo(S, k, q, v, o, beta, g, kq)
}
