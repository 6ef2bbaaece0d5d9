package cpu

import (
	"math"
	"strings"
	"testing"
	"time"

	"petal/engine/backend"
)

// TestParseOptions: the command line's cpu options reach the backend; a
// wrong one is an error that names it.
func TestParseOptions(t *testing.T) {
	sp, err := backend.ParseSpec("cpu:delta=chunked,delta-chunk=32")
	if err != nil {
		t.Fatal(err)
	}
	o, err := ParseOptions(sp.Options)
	if err != nil || o.DeltaRule != "chunked" || o.DeltaChunk != 32 {
		t.Fatalf("options %+v, %v", o, err)
	}
	b, err := NewWithOptions(o)
	if err != nil || b.deltaForm != deltaChunked || b.deltaChunk != 32 {
		t.Fatalf("backend %+v, %v", b, err)
	}
	for opt, want := range map[string]string{
		"delta=fast":      `delta rule form "fast"`,
		"delta-chunk=big": `delta-chunk="big" is not a number`,
		"kv=f16":          `kv="f16": the KV cache is f32 or bf16`,
		"kv=i32":          `kv="i32"`,
		"cache=bf16":      `unknown option "cache"`,
	} {
		sp, _ := backend.ParseSpec("cpu:" + opt)
		if _, err := ParseOptions(sp.Options); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %s", opt, err, want)
		}
	}
}

// TestKVOption: kv=bf16 reaches the backend, which models ask for the type
// of their KV caches; f32 is the default.
func TestKVOption(t *testing.T) {
	sp, _ := backend.ParseSpec("cpu:kv=bf16")
	o, err := ParseOptions(sp.Options)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewWithOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	var kt backend.KVCacheTyper = b
	if kt.KVCacheType() != backend.BF16 {
		t.Errorf("kv=bf16 gives %s caches", kt.KVCacheType())
	}
	if New().KVCacheType() != backend.F32 {
		t.Errorf("the default KV cache is %s, want f32", New().KVCacheType())
	}
	if _, err := NewWithOptions(Options{KV: backend.I32}); err == nil {
		t.Error("i32 KV caches accepted")
	}
}

// TestProfiledRun: the CPU times a program op by op, with the results of a
// plain run, and refuses a times slice of the wrong length.
func TestProfiledRun(t *testing.T) {
	b := New()
	x, _ := backend.AllocFloats(b, backend.F32, []float32{3, 4})
	w, _ := backend.AllocFloats(b, backend.F32, []float32{1, 1})
	out, _ := b.Alloc(2, backend.F32)
	pos, _ := backend.AllocInts(b, []int32{5})
	p, err := b.Compile([]backend.Op{
		&backend.AddRMSNorm{Labeled: backend.Labeled{Label: "L0.input_norm"}, H: x, Weight: w, Out: out, Rows: 1, Dim: 2, Eps: 0},
		&backend.Advance{Pos: pos, By: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	times := make([]time.Duration, 2)
	if err := b.ProfiledRun(p, times); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	b.Read(out, got)
	ps := make([]int32, 1)
	b.ReadInts(pos, ps)
	if ps[0] != 7 || math.Abs(float64(got[0])-3/math.Sqrt(12.5)) > 1e-6 {
		t.Errorf("profiled run computed %v, position %d", got, ps[0])
	}
	if times[0] <= 0 || times[1] <= 0 {
		t.Errorf("times %v", times)
	}
	if err := b.ProfiledRun(p, times[:1]); err == nil {
		t.Error("one time for two ops accepted")
	}
	if l := backend.LabelOf(p.Ops()[0]); l != "L0.input_norm" {
		t.Errorf("label %q", l)
	}
	if l := backend.LabelOf(p.Ops()[1]); l != "Advance" {
		t.Errorf("an unlabelled op is %q, want its name", l)
	}
}
