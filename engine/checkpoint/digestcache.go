package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
)

// digestCacheVersion changes when the digest or the entry format does.
const digestCacheVersion = 1

// digestEntry is one cache file: the identity of the file hashed, and its
// digest in hex.
type digestEntry struct {
	Version int    `json:"version"`
	File    fileID `json:"file"`
	Digest  string `json:"digest"`
}

// digestCachePath names a file's entry by a hash of its absolute path, so
// each checkpoint file has one entry, replaced when the file changes.
func digestCachePath(cacheDir string, id *fileID) string {
	h := sha256.Sum256([]byte(id.Path))
	return filepath.Join(cacheDir, hex.EncodeToString(h[:16])+".json")
}

// readCachedDigest returns the cached digest of the file version id, if
// its entry is whole and keyed by exactly that version.
func readCachedDigest(cacheDir string, id *fileID) (Digest, bool) {
	data, err := os.ReadFile(digestCachePath(cacheDir, id))
	if err != nil {
		return Digest{}, false
	}
	var e digestEntry
	if json.Unmarshal(data, &e) != nil || e.Version != digestCacheVersion || e.File != *id {
		return Digest{}, false
	}
	var d Digest
	raw, err := hex.DecodeString(e.Digest)
	if err != nil || len(raw) != len(d) {
		return Digest{}, false
	}
	copy(d[:], raw)
	return d, true
}

// writeCachedDigest replaces the file's entry atomically (a temporary file
// renamed over it), so a reader sees the old entry or the new one; errors
// are ignored, since the cache only saves time.
func writeCachedDigest(cacheDir string, id *fileID, d Digest) {
	data, err := json.Marshal(digestEntry{Version: digestCacheVersion, File: *id, Digest: hex.EncodeToString(d[:])})
	if err != nil {
		return
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(cacheDir, ".tmp-digest-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), digestCachePath(cacheDir, id)) != nil {
		os.Remove(tmp.Name())
	}
}
