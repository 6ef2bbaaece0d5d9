//go:build !amd64 || purego

package cpu

// Without the assembly mulInto and transpose run in Go throughout.

const tileAsm = false

func mulPanelFast([]float32, int, []float32, int, strided, []float32, int, int, int, int, bool, *[tileRows]float32, *[tileRows]float32) bool {
	return false
}

func transpose8Fast([]float32, int, []float32, int, int) bool { return false }
