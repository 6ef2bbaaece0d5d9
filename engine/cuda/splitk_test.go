package cuda

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
)

// TestParseGDNSplit: gdnsplit=on and off, off by default (measured slower),
// the family loaded only when on (with gdnnorm=cluster, which it builds on).
func TestParseGDNSplit(t *testing.T) {
	checkOnOffForm(t, "gdnsplit", "gdn_split", "yes", "measured slower", func(o Options) bool { return o.GDNSplit })
	o, err := ParseOptions([]backend.Option{{Key: "gdnsplit", Value: "on"}, {Key: "gdnnorm", Value: "ticket"}})
	if err != nil || slices.Contains(noticeFamilies(o), "gdn_split") {
		t.Errorf("gdnsplit=on,gdnnorm=ticket: %v, families %v; want gdn_split left out (it needs the cluster form)", err, noticeFamilies(o))
	}
}

// TestParseAttnSplit: attnsplit=on and off, off by default (not benched),
// the family loaded only when on.
func TestParseAttnSplit(t *testing.T) {
	checkOnOffForm(t, "attnsplit", "attn_out_split", "yes", "not benched", func(o Options) bool { return o.AttnSplit })
}

// TestParseSplitCopies: splitcopies=N takes 1 to 64, 1 by default, and
// refuses anything else naming the option.
func TestParseSplitCopies(t *testing.T) {
	if n := DefaultOptions().splitCopies(); n != 1 {
		t.Errorf("default copies %d, want 1", n)
	}
	for _, v := range []string{"1", "8", "64"} {
		o, err := ParseOptions([]backend.Option{{Key: "splitcopies", Value: v}})
		if err != nil || fmt.Sprint(o.splitCopies()) != v {
			t.Errorf("splitcopies=%s: %v, copies %d", v, err, o.splitCopies())
		}
	}
	for _, v := range []string{"0", "65", "x", "-1"} {
		if _, err := ParseOptions([]backend.Option{{Key: "splitcopies", Value: v}}); err == nil || !strings.Contains(err.Error(), "splitcopies") {
			t.Errorf("splitcopies=%s: error %v, want one naming splitcopies", v, err)
		}
	}
	if !strings.Contains(OptionsHelp, "splitcopies=N") {
		t.Error("the options' help does not list splitcopies")
	}
}
