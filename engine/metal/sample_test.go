package metal

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
)

// TestSamplerOption: sampler=topk and sampler=row are read, topk is the
// default, and another value is refused naming sampler=.
func TestSamplerOption(t *testing.T) {
	if !DefaultOptions().SamplerTopK {
		t.Errorf("the default is sampler=row, want topk")
	}
	if o, err := ParseOptions(nil); err != nil || !o.SamplerTopK {
		t.Errorf("no options: topk %v (%v), want topk", o.SamplerTopK, err)
	}
	for value, topk := range map[string]bool{"topk": true, "row": false} {
		o, err := ParseOptions([]backend.Option{{Key: "sampler", Value: value}})
		if err != nil || o.SamplerTopK != topk {
			t.Errorf("sampler=%s: topk %v (%v), want %v", value, o.SamplerTopK, err, topk)
		}
	}
	if o, err := ParseOptions([]backend.Option{{Key: "sampler", Value: "row"}, {Key: "sampler", Value: "topk"}}); err != nil || !o.SamplerTopK {
		t.Errorf("sampler=row,sampler=topk: topk %v (%v), want the last", o.SamplerTopK, err)
	}
	for _, bad := range []string{"fast", "", "TopK"} {
		_, err := ParseOptions([]backend.Option{{Key: "sampler", Value: bad}})
		if err == nil || !strings.Contains(err.Error(), "sampler=") || !strings.Contains(err.Error(), "topk or row") {
			t.Errorf("sampler=%q: %v, want an error naming sampler= and its values", bad, err)
		}
	}
	if !strings.Contains(OptionsHelp, "sampler=topk|row") || !strings.Contains(OptionsHelp, "default topk") {
		t.Errorf("the help does not say sampler=topk|row and its default: %s", OptionsHelp)
	}
}

// TestSampleLowering: the Sample op is sample_prep over SAMPLE_PARTS
// threadgroups, a barrier, then sample_row in one, both told whether the
// top-k fast path is on (sampler=topk) and bound to the same scratch:
// the penalised logits, the parts and the candidates, apart from each
// other and from the weights.
func TestSampleLowering(t *testing.T) {
	const V = 1000
	for _, topk := range []bool{true, false} {
		o := DefaultOptions()
		o.SamplerTopK = topk
		b, _ := newRecorded(t, o)
		f := fixture{t, b, rand.New(rand.NewPCG(4, 4))}
		op := &backend.Sample{Logits: f.f32(V), Params: f.f32(backend.SampleParamCount), Config: f.buf(backend.SampleConfigCount, backend.I32),
			Counts: f.buf(V, backend.I32), InPrompt: f.buf(V, backend.I32), Token: f.buf(1, backend.I32), Status: f.buf(2, backend.I32), Vocab: V}
		p := compile(t, b, op)
		want := []string{"sample_prep 128x1x1 256x1x1", "|", "sample_row 1x1x1 1024x1x1"}
		if got := launched(p); !slices.Equal(got, want) {
			t.Fatalf("sampler topk %v: %q, want %q", topk, got, want)
		}
		prep, row := p.cmds[0], p.cmds[2]
		fast := int32(0)
		if topk {
			fast = 1
		}
		for _, c := range []dispatch.Command{prep, row} {
			if got := paramsOf[kernels.SampleParams](t, c); got != (kernels.SampleParams{V: V, FastOn: fast}) {
				t.Errorf("sampler topk %v: %s parameters %+v, want V %d, fastOn %d", topk, c.Kernel.Name(), got, V, fast)
			}
		}
		x, part, cand := prep.Buffers[5], prep.Buffers[6], prep.Buffers[7]
		if row.Buffers[5] != x || row.Buffers[7] != part || row.Buffers[8] != cand {
			t.Errorf("sampler topk %v: sample_row reads x, part, cand at %+v, %+v, %+v; sample_prep wrote them at %+v, %+v, %+v",
				topk, row.Buffers[5], row.Buffers[7], row.Buffers[8], x, part, cand)
		}
		w := row.Buffers[6]
		spans := [][2]int64{{x.Off, 4 * V}, {w.Off, 4 * V}, {part.Off, 16 * sampleParts}, {cand.Off, 8 * sampleParts * sampleFastK}}
		for i, a := range spans {
			if a[0]+a[1] > p.scratchNeed {
				t.Errorf("scratch %d ends at %d, past the %d bytes reserved", i, a[0]+a[1], p.scratchNeed)
			}
			for _, c := range spans[i+1:] {
				if a[0] < c[0]+c[1] && c[0] < a[0]+a[1] {
					t.Errorf("scratch spans %v and %v overlap", a, c)
				}
			}
		}
	}
}

// TestSampleConstants: the launcher's sizes are sample.metal's.
func TestSampleConstants(t *testing.T) {
	src, err := kernels.Source("sample")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"SAMPLE_THREADS": sampleThreads, "SAMPLE_PARTS": sampleParts,
		"SAMPLE_PREP_THREADS": samplePrepThreads, "SAMPLE_FAST_K": sampleFastK} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindStringSubmatch(src)
		if m == nil {
			t.Errorf("sample.metal defines no %s", name)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n != want {
			t.Errorf("sample.metal has %s %d, the launcher %d", name, n, want)
		}
	}
}
