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
		"kv=bf16":         `unknown option "kv"`,
	} {
		sp, _ := backend.ParseSpec("cpu:" + opt)
		if _, err := ParseOptions(sp.Options); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %s", opt, err, want)
		}
	}
}
