package session

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"petal/engine/checkpoint"
	"petal/fixtures"
)

// embeddedCopy unpacks the embedded model into a fresh folder and applies
// edit to the named files' bytes.
func embeddedCopy(t *testing.T, edit map[string]func([]byte) []byte) string {
	t.Helper()
	dir, err := fixtures.DefaultModel(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range edit {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func fingerprintCached(t *testing.T, dir, cache string) Fingerprint {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	return ModelFingerprintCached(ck, cache)
}

// flipMiddleOfLargest flips one bit in the middle of the largest tensor of
// a safetensors file: far from both ends of every tensor.
func flipMiddleOfLargest(t *testing.T) func([]byte) []byte {
	return func(b []byte) []byte {
		n := binary.LittleEndian.Uint64(b)
		var header map[string]json.RawMessage
		if err := json.Unmarshal(b[8:8+n], &header); err != nil {
			t.Fatal(err)
		}
		var begin, end int64
		for name, raw := range header {
			if name == "__metadata__" {
				continue
			}
			var e struct {
				DataOffsets []int64 `json:"data_offsets"`
			}
			json.Unmarshal(raw, &e)
			if e.DataOffsets[1]-e.DataOffsets[0] > end-begin {
				begin, end = e.DataOffsets[0], e.DataOffsets[1]
			}
		}
		if end-begin < 4096 {
			t.Fatalf("largest tensor has %d bytes", end-begin)
		}
		b[8+int64(n)+(begin+end)/2] ^= 0x10
		return b
	}
}

// TestFingerprintCoversEveryWeight: one weight changed in the middle of a
// tensor (where sampling a tensor's ends does not look) is another model.
func TestFingerprintCoversEveryWeight(t *testing.T) {
	fp := fingerprintCached(t, embeddedCopy(t, nil), "")
	changed := embeddedCopy(t, map[string]func([]byte) []byte{"model-00001-of-00002.safetensors": flipMiddleOfLargest(t)})
	if got := fingerprintCached(t, changed, ""); got == fp {
		t.Error("a weight changed in the middle of a tensor gives the same fingerprint")
	}
	if got := fingerprintCached(t, embeddedCopy(t, nil), ""); got != fp {
		t.Errorf("another copy of the model has fingerprint %s, want %s", got.Short(), fp.Short())
	}
}

// TestFingerprintCached: the cached fingerprint is the uncached one, on the
// first open (which fills the cache) and on later ones.
func TestFingerprintCached(t *testing.T) {
	dir, cache := embeddedCopy(t, nil), t.TempDir()
	want := fingerprintCached(t, dir, "")
	for i := range 2 {
		if got := fingerprintCached(t, dir, cache); got != want {
			t.Errorf("open %d with a cache: %s, want %s", i+1, got.Short(), want.Short())
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "*.json")); len(entries) != 2 {
		t.Errorf("cache holds %v, want one entry per shard", entries)
	}
}

// TestFingerprintConfigBytes: the fingerprint follows config.json's content,
// not petal's parsed view of it: reformatting the file keeps it, changing a
// value petal does not read (but a state could depend on) changes it.
func TestFingerprintConfigBytes(t *testing.T) {
	fp := fingerprintCached(t, embeddedCopy(t, nil), "")
	compact := embeddedCopy(t, map[string]func([]byte) []byte{"config.json": func(b []byte) []byte {
		var out bytes.Buffer
		if err := json.Compact(&out, b); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}})
	if got := fingerprintCached(t, compact, ""); got != fp {
		t.Errorf("config.json without spaces: fingerprint %s, want %s", got.Short(), fp.Short())
	}
	other := embeddedCopy(t, map[string]func([]byte) []byte{"config.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"image_token_id": 4082`), []byte(`"image_token_id": 4083`), 1)
	}})
	if got := fingerprintCached(t, other, ""); got == fp {
		t.Error("a changed config.json value gives the same fingerprint")
	}
}
