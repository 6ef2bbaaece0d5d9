package cpu

import (
	"strings"
	"testing"

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
