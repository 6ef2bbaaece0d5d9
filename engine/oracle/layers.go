package oracle

import (
	"fmt"
	"io"
)

// StageName names hidden-state stage k as the reference numbers them.
func StageName(k, layers int) string {
	switch {
	case k == 0:
		return "embeddings"
	case k == layers+1:
		return "final norm"
	default:
		return fmt.Sprintf("layer %d", k-1)
	}
}

// LayerReport is the stage-by-stage comparison of one sequence's hidden
// states with the reference.
type LayerReport struct {
	Stages     []Diff
	FirstOver  int // first stage whose rel-L2 exceeds the bar; -1 if none
	Bar        float64
	LayerCount int
}

// CompareLayers compares hidden states got[k] (the engine's, [positions*dim]
// per stage) with the reference tensor name ([stages, positions, dim]) and
// names the first stage whose relative L2 error exceeds bar.
func (r *Reference) CompareLayers(name string, got [][]float32, bar float64) (LayerReport, error) {
	want, shape, err := r.Floats(name)
	if err != nil {
		return LayerReport{}, err
	}
	if len(shape) != 3 || shape[0] != len(got) {
		return LayerReport{}, fmt.Errorf("oracle: %s has shape %v, engine gave %d stages", name, shape, len(got))
	}
	per := shape[1] * shape[2]
	rep := LayerReport{FirstOver: -1, Bar: bar, LayerCount: shape[0] - 2}
	for k := range got {
		if len(got[k]) != per {
			return rep, fmt.Errorf("oracle: stage %d has %d values, want %d", k, len(got[k]), per)
		}
		d := Compare(got[k], want[k*per:(k+1)*per])
		rep.Stages = append(rep.Stages, d)
		if rep.FirstOver < 0 && !(d.RelL2 <= bar) {
			rep.FirstOver = k
		}
	}
	return rep, nil
}

// Write prints one line per stage and the verdict.
func (rep LayerReport) Write(w io.Writer) {
	for k, d := range rep.Stages {
		fmt.Fprintf(w, "%-12s %s\n", StageName(k, rep.LayerCount), d)
	}
	if rep.FirstOver >= 0 {
		fmt.Fprintf(w, "first divergence (rel-L2 > %g): %s\n", rep.Bar, StageName(rep.FirstOver, rep.LayerCount))
	} else {
		fmt.Fprintf(w, "all stages within rel-L2 %g\n", rep.Bar)
	}
}
