package oracle

import (
	"math"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	d := Compare([]float32{1, 2, 3.5}, []float32{1, 2, 3})
	if math.Abs(d.RelL2-0.5/math.Sqrt(14)) > 1e-12 || d.MaxAbs != 0.5 || d.Worst != 2 {
		t.Fatalf("%+v", d)
	}
	if d := Compare([]float32{float32(math.NaN())}, []float32{1}); !math.IsNaN(d.RelL2) || d.Worst != 0 {
		t.Fatalf("a NaN must show: %+v", d)
	}
	if s := Compare([]float32{1}, []float32{1}).String(); !strings.Contains(s, "max |Δ| 0") {
		t.Errorf("%q", s)
	}
}

func TestCompareLayersNamesFirstDivergence(t *testing.T) {
	if _, err := Open("../../../shared/oracle/reference"); err != nil {
		t.Skipf("oracle data not found: %v", err)
	}
	ref, _ := Open("../../../shared/oracle/reference")
	defer ref.Close()
	want, shape, err := ref.Floats("seq0.hidden_states")
	if err != nil {
		t.Fatal(err)
	}
	per := shape[1] * shape[2]
	got := make([][]float32, shape[0])
	for k := range got {
		got[k] = append([]float32(nil), want[k*per:(k+1)*per]...)
	}
	got[4][17] += 1 // stage 4: the output of layer 3
	rep, err := ref.CompareLayers("seq0.hidden_states", got, 1e-4)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FirstOver != 4 || StageName(rep.FirstOver, rep.LayerCount) != "layer 3" {
		t.Fatalf("first divergence at stage %d (%s)", rep.FirstOver, StageName(rep.FirstOver, rep.LayerCount))
	}
}
