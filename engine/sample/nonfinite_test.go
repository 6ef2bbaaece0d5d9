package sample

import (
	"math"
	"testing"
)

// TestNonFiniteLogitsNeverPanic: whatever NaN or infinity a row holds, every
// sampling mode returns a token id inside the row, and the order is defined:
// NaN below every number, +Inf above, the lower index on a tie.
func TestNonFiniteLogitsNeverPanic(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := map[string][]float32{
		"all NaN":        {nan, nan, nan, nan, nan, nan},
		"first NaN":      {nan, 1, 2, 0, -1, 3},
		"NaN best":       {1, 2, nan, 0, -1, 0.5},
		"+Inf":           {1, inf, 0, inf, nan, 2},
		"-Inf":           {float32(math.Inf(-1)), 1, 2, 0, -1, 0.5},
		"all -Inf":       {-inf, -inf, -inf, -inf, -inf, -inf},
		"+Inf and -Inf":  {-inf, inf, -inf, 0, nan, -inf},
		"huge and small": {math.MaxFloat32, -math.MaxFloat32, 0, math.MaxFloat32, 1, 1},
	}
	params := map[string]Params{
		"greedy":      {},
		"temperature": {Temperature: 0.7, Seed: 1},
		"top-k":       {Temperature: 1, TopK: 3, Seed: 2},
		"top-p":       {Temperature: 1, TopP: 0.9, Seed: 3},
		"min-p":       {Temperature: 1, MinP: 0.1, Seed: 4},
		"all":         {Temperature: 1.3, TopK: 4, TopP: 0.8, MinP: 0.05, RepetitionPenalty: 1.2, PresencePenalty: 0.5, FrequencyPenalty: 0.5, Seed: 5},
	}
	for rn, row := range rows {
		for pn, p := range params {
			s := New(p, []int32{0, 1, 2})
			for range 20 {
				got := s.Next(append([]float32(nil), row...))
				if got < 0 || int(got) >= len(row) {
					t.Fatalf("%s, %s: token %d outside the row", rn, pn, got)
				}
				if !math.IsNaN(float64(row[got])) {
					continue
				}
				for _, v := range row {
					if !math.IsNaN(float64(v)) {
						t.Fatalf("%s, %s: drew NaN token %d where numbers exist", rn, pn, got)
					}
				}
				s.Accept(got)
			}
		}
	}
	if got := Argmax(rows["NaN best"]); got != 1 {
		t.Errorf("argmax of %v = %d, want 1 (NaN below every number)", rows["NaN best"], got)
	}
	if got := Argmax(rows["first NaN"]); got != 5 {
		t.Errorf("argmax of %v = %d, want 5", rows["first NaN"], got)
	}
	if got := Argmax(rows["+Inf"]); got != 1 {
		t.Errorf("argmax of %v = %d, want 1 (+Inf, the lower index)", rows["+Inf"], got)
	}
	lp := []float64{math.NaN(), -1, math.NaN(), -3, -2, math.Inf(-1)}
	if top := TopN(lp, 4); len(top) != 4 || top[0] != 1 || top[1] != 4 || top[2] != 3 || top[3] != 5 {
		t.Errorf("top 4 of %v: %v, want [1 4 3 5]: NaN after every number", lp, top)
	}
	LogSoftmax(rows["all NaN"], lp)
	if top := TopN(lp, 2); len(top) != 2 || top[0] != 0 || top[1] != 1 {
		t.Errorf("top 2 of all NaN: %v, want [0 1]", top)
	}
}
