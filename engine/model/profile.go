package model

import (
	"strconv"
	"strings"
	"time"

	"petal/engine/backend"
)

// Profile is the time of each op of the Forward calls made while it is set
// (Model.Profile), summed by the op's label.
type Profile struct {
	ByLabel map[string]time.Duration
	Runs    int // programs run
}

func (p *Profile) add(ops []backend.Op, times []time.Duration) {
	if p.ByLabel == nil {
		p.ByLabel = map[string]time.Duration{}
	}
	for i, op := range ops {
		p.ByLabel[backend.LabelOf(op)] += times[i]
	}
	p.Runs++
}

// Total is the time of all ops.
func (p *Profile) Total() time.Duration {
	var t time.Duration
	for _, d := range p.ByLabel {
		t += d
	}
	return t
}

// SplitLabel splits an op label into its layer ("L3." prefix; -1 for ops
// outside the layers: embed, final_norm, head.logits, advance) and its
// family, the rest ("attn.sdpa", "moe.experts", "input_norm").
func SplitLabel(label string) (layer int, family string) {
	if rest, ok := strings.CutPrefix(label, "L"); ok {
		if num, fam, ok := strings.Cut(rest, "."); ok {
			if n, err := strconv.Atoi(num); err == nil {
				return n, fam
			}
		}
	}
	return -1, label
}
