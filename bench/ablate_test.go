package bench

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"petal/engine/backend"
)

func TestParseSwitches(t *testing.T) {
	got, err := ParseSwitches("graphs=off, kv=bf16")
	if err != nil || !reflect.DeepEqual(got, []backend.Option{{Key: "graphs", Value: "off"}, {Key: "kv", Value: "bf16"}}) {
		t.Errorf("got %v, %v", got, err)
	}
	// one key with two values is two switches, two runs
	got, err = ParseSwitches("gemm=tc,gemm=plain")
	if err != nil || !reflect.DeepEqual(got, []backend.Option{{Key: "gemm", Value: "tc"}, {Key: "gemm", Value: "plain"}}) {
		t.Errorf("gemm=tc,gemm=plain: got %v, %v", got, err)
	}
	for in, want := range map[string]string{"graphs": "not KEY=VALUE", "kv=bf16,kv=bf16": "kv=bf16 given twice", ",": "not KEY=VALUE", "": "no KEY=VALUE"} {
		if _, err := ParseSwitches(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", in, err, want)
		}
	}
}

func TestWithOption(t *testing.T) {
	for _, c := range [][3]string{
		{"cuda", "graphs=off", "cuda:graphs=off"},
		{"cuda:kv=bf16", "graphs=off", "cuda:kv=bf16,graphs=off"},
		{"cuda:kv=bf16,qmv=fast", "kv=f32", "cuda:kv=f32,qmv=fast"},
	} {
		k, v, _ := strings.Cut(c[1], "=")
		if got, err := WithOption(c[0], backend.Option{Key: k, Value: v}); err != nil || got != c[2] {
			t.Errorf("%s with %s: %q, %v; want %q", c[0], c[1], got, err, c[2])
		}
	}
}

// TestCompare: each length's effect is the variant's rate over the
// base's, less one, in percent; a phase one side lacks has none.
func TestCompare(t *testing.T) {
	base := &Report{Results: []Entry{
		{Length: 256, Prefill: &Prefill{TokensPerSecond: 1000}, Decode: &Decode{TokensPerSecond: 300}},
		{Length: 512, Prefill: &Prefill{TokensPerSecond: 800}},
	}}
	variant := &Report{Results: []Entry{
		{Length: 256, Prefill: &Prefill{TokensPerSecond: 500}, Decode: &Decode{TokensPerSecond: 330, KernelsPerToken: 455}},
		{Length: 512, Prefill: &Prefill{TokensPerSecond: 800}, Decode: &Decode{TokensPerSecond: 100}},
	}}
	a := Compare(base, variant, "graphs=off", "cuda:graphs=off")
	if a.Switch != "graphs=off" || a.Backend != "cuda:graphs=off" || len(a.Results) != 2 {
		t.Fatalf("%+v", a)
	}
	e := a.Results[0]
	if *e.PrefillEffectPercent != -50 || !near(*e.DecodeEffectPercent, 10) || e.DecodeKernelsPerToken != 455 {
		t.Errorf("256: %+v", e)
	}
	if e := a.Results[1]; *e.PrefillEffectPercent != 0 || e.DecodeEffectPercent != nil || e.DecodeTokensPerSecond != 100 {
		t.Errorf("512: %+v", e)
	}
	base.Ablation = []Ablation{a, {Switch: "gemm=plain", Error: "out of memory"}}
	var out bytes.Buffer
	if err := WriteAblation(&out, base); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ablation, prefill", "ablation, decode", "-50.0", "+0.0", "+10.0", "gemm=plain  failed: out of memory", "kernel launches per token with each switch", "455"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}
