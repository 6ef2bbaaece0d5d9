package model_test

import (
	"strconv"
	"strings"
	"testing"

	"petal/engine/model"
)

// TestProfileLabels: every op the model records carries a label naming its
// layer and part, and a profiled Forward times each of them on the CPU.
func TestProfileLabels(t *testing.T) {
	m, ref := loadOracle(t, 64)
	ids, err := ref.Ints("seq1.input_ids")
	if err != nil {
		t.Fatal(err)
	}
	prof := &model.Profile{}
	m.Profile = prof
	s := m.NewState(4096)
	if err := m.Forward(s, ids[:9], model.LastLogits, func(int, []float32) {}); err != nil {
		t.Fatal(err)
	}
	if err := m.Forward(s, ids[9:10], model.LastLogits, func(int, []float32) {}); err != nil {
		t.Fatal(err)
	}
	m.Profile = nil
	if prof.Runs != 2 {
		t.Errorf("%d programs profiled, want 2", prof.Runs)
	}
	want := []string{"embed", "final_norm", "head.logits", "advance"}
	for i, full := range m.Dims.Full {
		L := "L" + strconv.Itoa(i) + "."
		want = append(want, L+"input_norm", L+"post_norm", L+"moe.router", L+"moe.experts")
		if full {
			want = append(want, L+"attn.qkv_proj", L+"attn.qk_prep", L+"attn.sdpa", L+"attn.o_proj")
		} else {
			want = append(want, L+"delta.in_proj", L+"delta.conv", L+"delta.rule", L+"delta.norm", L+"delta.out_proj")
		}
	}
	for _, l := range want {
		if prof.ByLabel[l] <= 0 {
			t.Errorf("op %s: no time recorded", l)
		}
	}
	if len(prof.ByLabel) != len(want) {
		var extra []string
		for l := range prof.ByLabel {
			extra = append(extra, l)
		}
		t.Errorf("%d labels, want %d: %s", len(prof.ByLabel), len(want), strings.Join(extra, " "))
	}
	if layer, fam := model.SplitLabel("L12.attn.sdpa"); layer != 12 || fam != "attn.sdpa" {
		t.Errorf("SplitLabel: %d %q", layer, fam)
	}
	if layer, fam := model.SplitLabel("head.logits"); layer != -1 || fam != "head.logits" {
		t.Errorf("SplitLabel: %d %q", layer, fam)
	}
}
