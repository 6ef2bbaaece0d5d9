package session

import (
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

// sampleBytes of each end of every tensor enter the fingerprint, so that two
// fine-tunes of one architecture (same config, names and shapes) differ,
// while a 19 GB model costs two pages per tensor rather than a full read.
const sampleBytes = 512

// ModelFingerprint hashes (SHA-256) what makes a checkpoint's states
// interchangeable: the typed text config, the sorted tensor index (name,
// dtype, shape, byte length), each tensor's quantisation spec, and a sample
// of each tensor's first and last bytes.
func ModelFingerprint(ck *checkpoint.Checkpoint) Fingerprint {
	h := sha256.New()
	h.Write([]byte("petal model fingerprint 1\n"))
	cfg, err := json.Marshal(ck.Config)
	if err != nil {
		panic("session: config does not marshal: " + err.Error()) // plain struct: cannot happen
	}
	h.Write(cfg)
	var buf []byte
	for _, name := range ck.Names() {
		t, _ := ck.Tensor(name)
		q := ck.Quant(moduleOf(name))
		buf = append(buf[:0], name...)
		buf = append(buf, 0)
		buf = append(buf, t.DType...)
		buf = append(buf, 0)
		for _, d := range t.Shape {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(d))
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(t.Data)))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(q.Bits))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(q.GroupSize))
		buf = append(buf, q.Mode...)
		buf = append(buf, 0)
		h.Write(buf)
		n := min(len(t.Data), sampleBytes)
		h.Write(t.Data[:n])
		h.Write(t.Data[len(t.Data)-n:])
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// moduleOf strips the last component of a tensor name ("x.y.weight" -> "x.y").
func moduleOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}
