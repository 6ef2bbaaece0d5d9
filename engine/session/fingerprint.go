package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"

	"petal/engine/checkpoint"
)

// Fingerprint identifies the model a snapshot belongs to. A state is only
// meaningful to the exact weights that produced it, so a snapshot from any
// other model is refused.
type Fingerprint [32]byte

// String is the fingerprint in hex.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// Short is the first 12 hex digits, enough to tell models apart in messages.
func (f Fingerprint) Short() string { return f.String()[:12] }

// IsZero reports the zero fingerprint (no model).
func (f Fingerprint) IsZero() bool { return f == Fingerprint{} }

// ModelFingerprint hashes (SHA-256) what makes a checkpoint's states
// interchangeable: config.json, the sorted tensor index (name, dtype,
// shape, byte length, quantisation spec) and a digest of every byte of
// every shard, so that two fine-tunes of one architecture differ even in a
// single weight. It reads the whole checkpoint; ModelFingerprintCached
// keeps the shards' digests from one process to the next.
func ModelFingerprint(ck *checkpoint.Checkpoint) Fingerprint {
	return ModelFingerprintCached(ck, "")
}

// ModelFingerprintCached is ModelFingerprint with the shards' digests kept
// in digestCache (a folder; "" for none), keyed by each file's absolute
// path, size, modification time and inode: hashing a 19 GB checkpoint
// takes seconds, reading a cached digest a stat and a small file.
func ModelFingerprintCached(ck *checkpoint.Checkpoint, digestCache string) Fingerprint {
	h := sha256.New()
	h.Write([]byte("petal model fingerprint 2\n"))
	cfg := canonicalJSON(ck.ConfigJSON())
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(cfg))))
	h.Write(cfg)
	var buf []byte
	for _, name := range ck.Names() {
		t, _ := ck.Tensor(name)
		q := ck.Quant(moduleOf(name))
		buf = append(buf[:0], name...)
		buf = append(buf, 0)
		buf = append(buf, t.DType...)
		buf = append(buf, 0)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(t.Shape)))
		for _, d := range t.Shape {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(d))
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(t.Data)))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(q.Bits))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(q.GroupSize))
		buf = append(buf, q.Mode...)
		buf = append(buf, 0)
		h.Write(buf)
	}
	for _, d := range ck.Digests(digestCache) {
		h.Write(append([]byte(d.File), 0))
		h.Write(d.Digest[:])
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// canonicalJSON re-encodes a JSON document with sorted keys and no spacing
// (numbers as written), so that reformatting config.json keeps the
// fingerprint while any value it holds, read by petal or not, changes it.
// Bytes that do not parse (Open has parsed them) are used as they are.
func canonicalJSON(data []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return data
	}
	out, err := json.Marshal(v)
	if err != nil {
		return data
	}
	return out
}

// moduleOf strips the last component of a tensor name ("x.y.weight" -> "x.y").
func moduleOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}
