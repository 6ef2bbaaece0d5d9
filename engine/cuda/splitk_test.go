package cuda

import (
	"math"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
)

// TestParseMoESplit: moesplit=on and off choose moe_split.cu's launch or the
// two kernels, off by default until measured, and loading the family only
// when on.
func TestParseMoESplit(t *testing.T) {
	for value, want := range map[string]bool{"on": true, "off": false} {
		o, err := ParseOptions([]backend.Option{{Key: "moesplit", Value: value}})
		if err != nil {
			t.Fatalf("moesplit=%s: %v", value, err)
		}
		if o.MoESplit != want || slices.Contains(noticeFamilies(o), "moe_split") != want {
			t.Errorf("moesplit=%s: MoESplit %v, families %v", value, o.MoESplit, noticeFamilies(o))
		}
	}
	if DefaultOptions().MoESplit {
		t.Error("the default is moesplit=on; want off until it is measured")
	}
	if _, err := ParseOptions([]backend.Option{{Key: "moesplit", Value: "yes"}}); err == nil || !strings.Contains(err.Error(), "moesplit") {
		t.Errorf("moesplit=yes: error %v, want one naming moesplit", err)
	}
	if !strings.Contains(OptionsHelp, "moesplit=on|off") {
		t.Error("the options' help does not list moesplit")
	}
}

// TestMoESplitMatchesReference runs moe_split (moesplit=on) on each MoE
// shape against the float64 reference of spec 2.8, as TestMoEMatchesReference
// runs the two kernels: fresh random weights, input, residual and routing,
// h, the logit and the output poisoned before each launch, guards checked.
// Each variant runs twice on the same sums: the launch must leave them and
// its ticket zero (the second run's output the first's, bit for bit: the
// fixed-point sums do not depend on the order blocks arrive in).
func TestMoESplitMatchesReference(t *testing.T) {
	c := gpu(t)
	s, err := c.NewStream("test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, err := c.NewUploader(s, 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	mod, err := LoadMoEModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	splitMod, err := LoadMoESplitModule(c)
	if err != nil {
		t.Fatal(err)
	}
	defer splitMod.Close()
	rng := freshRNG(t)
	for _, sh := range moeShapes {
		hm := randomMoE(rng, sh)
		w := hm.upload(t, c, up, sh)
		x := randomVector(rng, sh.hidden)
		ids, wts := randomRouting(rng, sh.experts)
		wantH, wantLogit, wantY := moeReference(hm, sh, x, ids, wts)
		var rms float64
		for _, v := range wantY {
			rms += v * v
		}
		rms = math.Sqrt(rms / float64(len(wantY)))
		resid := randomVector(rng, sh.hidden)
		want := make([]float64, sh.hidden)
		for i := range resid {
			resid[i] *= float32(rms)
			want[i] = float64(resid[i]) + wantY[i]
		}
		d := newDeviceMoE(t, c, s, sh, x, resid, ids, wts)
		accBytes := SplitKSumBytes(sh.hidden)
		acc, err := c.Alloc(accBytes, "sums")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Fill32(acc, 0, accBytes/4); err != nil {
			t.Fatal(err)
		}
		ran := 0
		for _, v := range MoEVariants {
			k, err := NewMoE(c, mod, v)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.AddSplitForms(c, splitMod); err != nil {
				t.Fatal(err)
			}
			if !k.HasSplit(w) {
				if err := k.LaunchSplit(s, w, d.bufs, acc); err == nil || !strings.Contains(err.Error(), "moesplit") {
					t.Errorf("%v: LaunchSplit without the kernel: error %v, want one naming moesplit", v, err)
				}
				continue
			}
			ran++
			var first []float32
			for run := range 2 {
				d.Poison(t, s)
				if err := k.LaunchSplit(s, w, d.bufs, acc); err != nil {
					t.Fatal(err)
				}
				gotH := d.read(t, s, d.bufs.H, "h")
				gotLogit := d.read(t, s, d.bufs.Logit, "logit")
				got := d.read(t, s, d.bufs.Out, "out")
				left := make([]uint32, accBytes/4)
				if err := s.CopyToHost(bytesOf(left), acc); err != nil {
					t.Fatal(err)
				}
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				for i, u := range left {
					if u != 0 {
						t.Fatalf("%s %v run %d: word %d of the sums (of %d; the ticket at %d) left %#x, want 0", sh.name, v, run, i, len(left), 2*sh.hidden, u)
					}
				}
				var worst, maxY float64
				for i := range got {
					worst = max(worst, math.Abs(float64(got[i])-want[i]))
					maxY = max(maxY, math.Abs(wantY[i]))
				}
				rel := worst / maxY
				t.Logf("%-20s %-8v run %d out: max error %.2g of max|moe|, relative L2 of moe %.2g; h relative L2 %.2g; logit %v (want %.6g)",
					sh.name, v, run, rel, relL2Shift(got, resid, wantY), relL2(gotH, wantH), gotLogit[0], wantLogit)
				if tol := moeTolerance(v.Kind); !(rel <= tol) {
					t.Errorf("%s %v: output off by %.2g of max|moe| (tolerance %g)", sh.name, v, rel, tol)
				}
				if e := relL2(gotH, wantH); !(e <= 1e-5) {
					t.Errorf("%s %v: h off by %.2g (relative L2)", sh.name, v, e)
				}
				if e := math.Abs(float64(gotLogit[0])-wantLogit) / (1 + math.Abs(wantLogit)); !(e <= 1e-5) {
					t.Errorf("%s %v: shared expert gate logit %v, want %v", sh.name, v, gotLogit[0], wantLogit)
				}
				if first == nil {
					first = got
				} else {
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
							t.Fatalf("%s %v: out[%d] %v on the second run, %v on the first", sh.name, v, i, got[i], first[i])
						}
					}
				}
			}
		}
		if ran == 0 {
			t.Errorf("%s: no variant has the split kernel", sh.name)
		}
		c.Free(acc)
		d.free()
		w.free()
	}
}

// TestParseGDNSplit: gdnsplit=on and off, off by default until measured,
// the family loaded only when on (with gdnnorm=cluster, which it builds on).
func TestParseGDNSplit(t *testing.T) {
	for value, want := range map[string]bool{"on": true, "off": false} {
		o, err := ParseOptions([]backend.Option{{Key: "gdnsplit", Value: value}})
		if err != nil {
			t.Fatalf("gdnsplit=%s: %v", value, err)
		}
		if o.GDNSplit != want || slices.Contains(noticeFamilies(o), "gdn_split") != want {
			t.Errorf("gdnsplit=%s: GDNSplit %v, families %v", value, o.GDNSplit, noticeFamilies(o))
		}
	}
	o, err := ParseOptions([]backend.Option{{Key: "gdnsplit", Value: "on"}, {Key: "gdnnorm", Value: "ticket"}})
	if err != nil || slices.Contains(noticeFamilies(o), "gdn_split") {
		t.Errorf("gdnsplit=on,gdnnorm=ticket: %v, families %v; want gdn_split left out (it needs the cluster form)", err, noticeFamilies(o))
	}
	if DefaultOptions().GDNSplit {
		t.Error("the default is gdnsplit=on; want off until it is measured")
	}
	if _, err := ParseOptions([]backend.Option{{Key: "gdnsplit", Value: "yes"}}); err == nil || !strings.Contains(err.Error(), "gdnsplit") {
		t.Errorf("gdnsplit=yes: error %v, want one naming gdnsplit", err)
	}
	if !strings.Contains(OptionsHelp, "gdnsplit=on|off") {
		t.Error("the options' help does not list gdnsplit")
	}
}

// TestParseAttnSplit: attnsplit=on and off, off by default until measured,
// the family loaded only when on.
func TestParseAttnSplit(t *testing.T) {
	for value, want := range map[string]bool{"on": true, "off": false} {
		o, err := ParseOptions([]backend.Option{{Key: "attnsplit", Value: value}})
		if err != nil {
			t.Fatalf("attnsplit=%s: %v", value, err)
		}
		if o.AttnSplit != want || slices.Contains(noticeFamilies(o), "attn_out_split") != want {
			t.Errorf("attnsplit=%s: AttnSplit %v, families %v", value, o.AttnSplit, noticeFamilies(o))
		}
	}
	if DefaultOptions().AttnSplit {
		t.Error("the default is attnsplit=on; want off until it is measured")
	}
	if _, err := ParseOptions([]backend.Option{{Key: "attnsplit", Value: "yes"}}); err == nil || !strings.Contains(err.Error(), "attnsplit") {
		t.Errorf("attnsplit=yes: error %v, want one naming attnsplit", err)
	}
	if !strings.Contains(OptionsHelp, "attnsplit=on|off") {
		t.Error("the options' help does not list attnsplit")
	}
}
