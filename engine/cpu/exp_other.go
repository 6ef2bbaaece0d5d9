//go:build !amd64 || purego

package cpu

func expShiftSum(x []float32, m float32) float32 { return expShiftSumGo(x, m) }
func siluRow(x []float32)                        { siluRowGo(x) }
func mulSilu(y, z []float32)                     { mulSiluGo(y, z) }
func gateRow(y, z []float32, s float32)          { gateRowGo(y, z, s) }
