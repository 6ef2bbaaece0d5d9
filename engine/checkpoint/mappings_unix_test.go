//go:build unix

package checkpoint

import (
	"os"
	"testing"
	"testing/fstest"
	"unsafe"
)

// TestMappings: a checkpoint on disk lists one memory map per shard, the
// whole file starting on a page, with the length of its largest tensor;
// every tensor's data lies inside its shard's map. A checkpoint read into
// memory (OpenFS) lists none, and after Close there are none.
func TestMappings(t *testing.T) {
	c, err := Open(shardedDir(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	maps := c.Mappings()
	if len(maps) != 2 {
		t.Fatalf("%d mappings for 2 shards", len(maps))
	}
	page := uintptr(os.Getpagesize())
	for _, m := range maps {
		st, err := os.Stat(c.Dir + "/" + m.File)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(m.Data)) != st.Size() || uintptr(unsafe.Pointer(unsafe.SliceData(m.Data)))%page != 0 {
			t.Errorf("%s: %d bytes at %p, want the whole file (%d bytes) on a page", m.File, len(m.Data), m.Data, st.Size())
		}
		var largest int64
		for _, name := range c.Names() {
			tn, _ := c.Tensor(name)
			if tn.File != m.File {
				continue
			}
			largest = max(largest, int64(len(tn.Data)))
			p, base := uintptr(unsafe.Pointer(unsafe.SliceData(tn.Data))), uintptr(unsafe.Pointer(unsafe.SliceData(m.Data)))
			if p < base || p+uintptr(len(tn.Data)) > base+uintptr(len(m.Data)) {
				t.Errorf("%s: tensor %s lies outside the mapping", m.File, name)
			}
		}
		if largest == 0 || m.Largest != largest {
			t.Errorf("%s: largest %d, want %d", m.File, m.Largest, largest)
		}
	}
	c.Close()
	if n := len(c.Mappings()); n != 0 {
		t.Errorf("%d mappings after Close", n)
	}

	fsys := fstest.MapFS{}
	dir := shardedDir(t, nil)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(dir + "/" + e.Name())
		fsys["m/"+e.Name()] = &fstest.MapFile{Data: b}
	}
	f, err := OpenFS(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := len(f.Mappings()); n != 0 {
		t.Errorf("a checkpoint read into memory lists %d mappings", n)
	}
}
