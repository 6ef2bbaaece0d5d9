//go:build !amd64 || purego

package cpu

// Without the assembly every tile of mulInto runs in Go.

const tileAsm = false

func mulTileFast([]float32, int, strided, []float32, int, int, bool, *[tileRows]float32, *[tileRows]float32) bool {
	return false
}
