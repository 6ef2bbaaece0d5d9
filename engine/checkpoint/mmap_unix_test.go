//go:build unix

package checkpoint

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestOpenMapsWithoutCopying opens a 1 GiB (sparse) checkpoint and checks
// that the weights stay outside the Go heap, including the typed view.
func TestOpenMapsWithoutCopying(t *testing.T) {
	const rows, words = 1 << 18, 1 << 10 // U32 [262144, 1024]: 1 GiB
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	head := safetensorsHeader([]testTensor{{"language_model.lm_head.weight", "U32", []int{rows, words}, nil}}, []int{rows * words * 4})
	path := filepath.Join(dir, singleFile)
	writeBytes(t, dir, singleFile, head)
	if err := os.Truncate(path, int64(len(head))+rows*words*4); err != nil {
		t.Skipf("cannot make a sparse 1 GiB file here: %v", err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tn, _ := c.Tensor("lm_head.weight")
	w := tn.Uint32s()
	if len(w) != rows*words || w[len(w)-1] != 0 {
		t.Fatalf("view of %d words", len(w))
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
		t.Errorf("heap grew by %d bytes opening a 1 GiB checkpoint", grew)
	}
}
