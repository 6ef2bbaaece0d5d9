package checkpoint

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// bigTensors is one 40 MB tensor (three digest chunks) between two small ones.
func bigTensors() []testTensor {
	return []testTensor{
		{"language_model.model.layers.0.mlp.switch_mlp.up_proj.weight", "U32", []int{10 << 20}, zeros(40 << 20)},
		{"language_model.model.norm.weight", "BF16", []int{64}, zeros(128)},
	}
}

func openDigests(t *testing.T, dir, cacheDir string) []ShardDigest {
	t.Helper()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Digests(cacheDir)
}

// TestDigestsCoverEveryByte: one byte changed anywhere in a file, the middle
// of a large tensor included, changes its digest.
func TestDigestsCoverEveryByte(t *testing.T) {
	file := encodeSafetensors(bigTensors())
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	writeBytes(t, dir, singleFile, file)
	base := openDigests(t, dir, "")
	if len(base) != 1 || base[0].File != singleFile {
		t.Fatalf("digests %v", base)
	}
	seen := map[Digest]int{base[0].Digest: -1}
	first := len(file) - 40<<20 - 128 // the first byte of data
	for _, at := range []int{len(file) / 2, 20<<20 + 3, len(file) - 1, first} {
		changed := append([]byte(nil), file...)
		changed[at] ^= 0x01
		writeBytes(t, dir, singleFile, changed)
		d := openDigests(t, dir, "")[0].Digest
		if prev, dup := seen[d]; dup {
			t.Errorf("a bit flipped at byte %d gives the digest of %d", at, prev)
		}
		seen[d] = at
	}
}

// TestDigestCache: a digest is computed once per file version and reused;
// an entry whose key differs (modification time, inode, size) or that is
// damaged is ignored and rewritten.
func TestDigestCache(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	path := filepath.Join(dir, singleFile)
	writeBytes(t, dir, singleFile, encodeSafetensors(routerTensors()))
	real := openDigests(t, dir, "")[0].Digest
	if got := openDigests(t, dir, cache)[0].Digest; got != real {
		t.Fatalf("cached run gives %x, want %x", got, real)
	}
	entries, _ := filepath.Glob(filepath.Join(cache, "*.json"))
	if len(entries) != 1 {
		t.Fatalf("cache holds %v, want one entry", entries)
	}
	entry := entries[0]
	// plant a digest under the right key: a cached open must return it unread
	var e digestEntry
	data, _ := os.ReadFile(entry)
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	planted := e
	planted.Digest = hex.EncodeToString(make([]byte, 32))
	plant := func(e digestEntry) {
		t.Helper()
		data, _ := json.Marshal(e)
		if err := os.WriteFile(entry, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plant(planted)
	if got := openDigests(t, dir, cache)[0].Digest; got != (Digest{}) {
		t.Fatalf("the cache entry was not used: got %x", got)
	}

	check := func(what string) {
		t.Helper()
		if got := openDigests(t, dir, cache)[0].Digest; got != real {
			t.Errorf("%s: digest %x, want the file's own %x", what, got, real)
		}
		var rewritten digestEntry
		data, _ := os.ReadFile(entry)
		if json.Unmarshal(data, &rewritten) != nil || rewritten.Digest != hex.EncodeToString(real[:]) {
			t.Errorf("%s: entry not rewritten: %s", what, data)
		}
	}
	// a new modification time
	plant(planted)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	check("modification time changed")

	// the same bytes and time in a new file (another inode) renamed over it
	plant(planted)
	st, _ := os.Stat(path)
	data, _ = os.ReadFile(path)
	tmp := filepath.Join(dir, "copy")
	os.WriteFile(tmp, data, 0o644)
	os.Chtimes(tmp, st.ModTime(), st.ModTime())
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if id := newFileID(path, mustStat(t, path)); id.Inode == 0 {
		t.Log("no inodes here: only the rest of the key is checked")
	} else {
		check("inode changed")
	}

	// other keys and damage
	for what, e := range map[string]digestEntry{
		"size differs":   func() digestEntry { e := planted; e.File.Size++; return e }(),
		"path differs":   func() digestEntry { e := planted; e.File.Path += "x"; return e }(),
		"old version":    func() digestEntry { e := planted; e.Version = 0; return e }(),
		"short digest":   func() digestEntry { e := planted; e.Digest = "abcd"; return e }(),
		"digest not hex": func() digestEntry { e := planted; e.Digest = "zz" + e.Digest[2:]; return e }(),
	} {
		plant(e)
		check(what)
	}
	for what, junk := range map[string]string{"garbage": "\x00\x01 not json", "empty": "", "truncated": `{"version":1,"file":{"pa`} {
		if err := os.WriteFile(entry, []byte(junk), 0o644); err != nil {
			t.Fatal(err)
		}
		check(what)
	}
	// an unwritable cache folder costs only the hashing
	if got := openDigests(t, dir, filepath.Join(path, "not-a-dir"))[0].Digest; got != real {
		t.Errorf("unwritable cache: %x", got)
	}
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// BenchmarkDigest hashes 512 MiB held in memory (on every core).
func BenchmarkDigest(b *testing.B) {
	data := make([]byte, 512<<20)
	for i := range data {
		data[i] = byte(i * 7919 >> 3)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		digestBytes(data)
	}
}
