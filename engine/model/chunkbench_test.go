package model_test

import (
	"fmt"
	"testing"

	"petal/engine/model"
)

// BenchmarkPrefillChunks: a 1024-token prompt prefilled with different
// chunk sizes (the tokens repeat the oracle sequences).
func BenchmarkPrefillChunks(b *testing.B) {
	_, ref := loadOracle(b, 64)
	var ids []int32
	for _, name := range []string{"seq0", "seq1", "seq2", "seq3"} {
		s, _ := ref.Ints(name + ".input_ids")
		ids = append(ids, s...)
	}
	for _, chunk := range []int{64, 256, 1024} {
		b.Run(fmt.Sprint("chunk", chunk), func(b *testing.B) {
			m, _ := loadOracle(b, chunk)
			b.ResetTimer()
			for range b.N {
				if err := m.Forward(m.NewState(2048), ids, model.LastLogits, func(int, []float32) {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(ids)*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
