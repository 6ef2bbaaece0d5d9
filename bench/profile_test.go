package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/model"
)

// TestProfile: --profile gives each length the time of prefill and decode
// by layer kind and op family; the families of each kind add up to the
// kind, the kinds to the whole, the shares to one; the table prints them
// and JSON carries them.
func TestProfile(t *testing.T) {
	m := tinyModel(t, 32)
	r, err := Run(context.Background(), m, Options{
		Model: "tiny", Synthetic: true, PromptLengths: []int{40}, ContextLengths: []int{40, 20},
		DecodeTokens: 3, Profile: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Results[0].Profile.Prefill != nil || r.Results[0].Profile.Decode == nil {
		t.Fatalf("length 20 (decode only): %+v", r.Results[0].Profile)
	}
	p := r.Results[1].Profile
	if p == nil || p.Prefill == nil || p.Decode == nil {
		t.Fatalf("length 40: %+v", p)
	}
	for name, part := range map[string]*ProfilePart{"prefill": p.Prefill, "decode": p.Decode} {
		byKind := map[string]float64{}
		var shares, kinds float64
		for _, o := range part.Ops {
			byKind[o.LayerKind] += o.MsPerToken
			shares += o.Share
		}
		for _, k := range part.Kinds {
			kinds += k.MsPerToken
			if !near(byKind[k.LayerKind], k.MsPerToken) {
				t.Errorf("%s %s: families add up to %g ms, the kind %g", name, k.LayerKind, byKind[k.LayerKind], k.MsPerToken)
			}
		}
		if math.Abs(shares-1) > 1e-9 || !near(kinds, part.MsPerToken) {
			t.Errorf("%s: shares add up to %g, kinds to %g of %g ms", name, shares, kinds, part.MsPerToken)
		}
		fams := map[string]bool{}
		for _, o := range part.Ops {
			fams[o.LayerKind+" "+o.Family] = true
		}
		for _, f := range []string{"full_attention attn.sdpa", "delta_net delta.rule", "delta_net moe.experts", "full_attention moe.experts", "outside_layers head.logits"} {
			if !fams[f] {
				t.Errorf("%s: no %s in %v", name, f, fams)
			}
		}
	}
	if p.Decode.Kinds[0].Layers+p.Decode.Kinds[1].Layers != m.Dims.Layers {
		t.Errorf("layer kinds %+v for %d layers", p.Decode.Kinds, m.Dims.Layers)
	}
	var table bytes.Buffer
	if err := WriteProfiles(&table, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"profile at 40", "full_attention (", "delta_net (", "attn.sdpa", "delta.rule", "moe.experts", "head.logits", "decode ms/token"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("profile table lacks %q:\n%s", want, table.String())
		}
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"layer_kind":"delta_net"`) {
		t.Error("JSON lacks the profile")
	}
}

// noProfiler is a backend that cannot time ops.
type noProfiler struct{ backend.Backend }

func TestProfileNeedsProfiler(t *testing.T) {
	d, _ := model.NamedDims("tiny")
	m, err := model.Synthetic(d, noProfiler{cpu.New()}, 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), m, Options{PromptLengths: []int{8}, Profile: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot time ops") {
		t.Errorf("profiling without a profiler: %v", err)
	}
}
