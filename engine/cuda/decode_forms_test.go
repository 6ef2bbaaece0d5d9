package cuda

import (
	"slices"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/model"
)

// TestDecodeFormsEngage: on the embedded model's decode step (6 Gated
// DeltaNet layers, 2 attention layers), moelayer=cluster, gdnlayer=out,
// attnout=on, gdnsplit=on and attnsplit=on each take the ops of the model as it records them, not only
// the tests' own: their kernels are in the step as often as the model has
// the layers, and the step has that many launches fewer than under the
// defaults (a Gated DeltaNet layer 2 fewer: its norm and projections,
// step and output projection one launch; an attention layer 1: its
// combine and projection one launch; a MoE block the three decode kernels
// take 1: two launches).
func TestDecodeFormsEngage(t *testing.T) {
	gpu(t)
	decodeKernels := func(o Options) (names []string, launches int) {
		be := testBackend(t, o)
		e, err := engine.Open("../../fixtures/tiny-qwen36-moe-4bit", engine.Options{Backend: be, Chunk: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		s := e.Model.NewState(64)
		defer s.Free(be)
		if err := e.Model.Forward(s, []int32{1, 2, 3}, model.NoLogits, nil); err != nil { // the state's buffers
			t.Fatal(err)
		}
		p, err := e.Model.DecodeProgram(s, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Concat(p.(*program).kernelNames()...), p.(*program).kernels
	}
	baseNames, base := decodeKernels(DefaultOptions())
	o := DefaultOptions()
	o.MoELayerCluster, o.GDNLayerCluster, o.GDNLayerOut, o.AttnOut = true, true, true, true
	fused, launches := decodeKernels(o)
	count := func(names []string, kernel string) int {
		n := 0
		for _, k := range names {
			if k == kernel || strings.HasPrefix(k, kernel+"+") {
				n++
			}
		}
		return n
	}
	// the MoE blocks the three decode kernels take (none of the embedded
	// model's: its shared expert is wider than its experts)
	gdnLayers, attnLayers, moeBlocks := 6, 2, count(baseNames, "moe_gate_up")
	for kernel, want := range map[string]int{gdnLayerOutKernel: gdnLayers, attnOutKernel: attnLayers,
		moeRouteUpKernel: moeBlocks, moeRouteDownKernel: moeBlocks} {
		if got := count(fused, kernel); got != want {
			t.Errorf("%s %d times in the decode step, want %d (the step: %v)", kernel, got, want, fused)
		}
	}
	if want := base - 2*gdnLayers - attnLayers - moeBlocks; launches != want {
		t.Errorf("%d launches a decode step with the three forms, want %d (%d under the defaults)", launches, want, base)
	}
	t.Logf("decode step of the embedded model: %d launches under the defaults, %d with moelayer=cluster,gdnlayer=out,attnout=on", base, launches)

	// gdnsplit=on, attnsplit=on: each Gated DeltaNet layer's step and
	// output projection one launch, each attention layer's combine and
	// output projection one.
	o = DefaultOptions()
	o.GDNSplit, o.AttnSplit = true, true
	split, splitLaunches := decodeKernels(o)
	for kernel, want := range map[string]int{gdnSplitKernel: gdnLayers, attnSplitKernel: attnLayers} {
		if got := count(split, kernel); got != want {
			t.Errorf("%s %d times in the decode step under gdnsplit=on,attnsplit=on, want %d (the step: %v)", kernel, got, want, split)
		}
	}
	if want := base - gdnLayers - attnLayers; splitLaunches != want {
		t.Errorf("%d launches a decode step under gdnsplit=on,attnsplit=on, want %d", splitLaunches, want)
	}
}
