//go:build darwin

package metal_test

import (
	"slices"
	"testing"

	"petal/engine"
	"petal/engine/metal"
	"petal/engine/model"
	"petal/engine/oracle/oracletest"
)

// TestWeightsMappedMatchCopied: on the Metal device the oracle model's
// weights are bound in place in the checkpoint's memory maps (none
// copied: every tensor of its shards lies aligned), under weights=copy
// they are all copied, and the logits of a prompt are the same bits.
func TestWeightsMappedMatchCopied(t *testing.T) {
	modelDir, _ := oracletest.Dir(t)
	run := func(copyWeights bool) (logits []float32, inPlace, copied int64) {
		o := metal.DefaultOptions()
		o.CopyWeights = copyWeights
		be := openBackend(t, o)
		e, err := engine.Open(modelDir, engine.Options{Backend: be, Chunk: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		inPlace, copied = be.WeightBytes()
		ids := e.Encode("The weights are read where the page cache holds them.")
		s := e.NewState()
		defer s.Free(be)
		if err := e.Model.Forward(s, ids, model.AllLogits, func(_ int, l []float32) { logits = append(logits, l...) }); err != nil {
			t.Fatal(err)
		}
		return logits, inPlace, copied
	}
	mapped, in, cp := run(false)
	if in == 0 || cp != 0 {
		t.Errorf("weights=mapped: %d bytes in place, %d copied; want all in place", in, cp)
	}
	copied, in2, cp2 := run(true)
	if in2 != 0 || cp2 != in+cp {
		t.Errorf("weights=copy: %d bytes in place, %d copied; want all %d copied", in2, cp2, in+cp)
	}
	if !slices.Equal(mapped, copied) {
		t.Error("the logits differ between weights=mapped and weights=copy")
	}
}
