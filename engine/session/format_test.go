package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"petal/engine/model"
)

func encode(t testing.TB, fp Fingerprint, d model.StateData) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, fp, d); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decode(b []byte, fp Fingerprint) (model.StateData, error) {
	return Decode(bytes.NewReader(b), int64(len(b)), fp)
}

// TestEncodeDecode: every state comes back identical, nil (other layer
// kind) and empty (attention layer of an empty state) slices included.
func TestEncodeDecode(t *testing.T) {
	fp := testFP(1)
	for _, n := range []int{0, 1, 5, 300} {
		d := synthState(n, uint64(n))
		b := encode(t, fp, d)
		got, err := decode(b, fp)
		if err != nil {
			t.Fatalf("%d tokens: %v", n, err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("%d tokens: decoded state differs", n)
		}
		if n == 0 && (got.K[3] == nil || got.Conv[3] != nil) {
			t.Fatalf("empty state: K[3] nil=%v, Conv[3] nil=%v", got.K[3] == nil, got.Conv[3] == nil)
		}
	}
}

// TestEveryByteFlipDetected flips each byte of a small snapshot three ways:
// Decode must fail with a *SnapshotError every time.
func TestEveryByteFlipDetected(t *testing.T) {
	fp := testFP(1)
	b := encode(t, fp, synthState(3, 7))
	for i := range b {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[i] ^= mask
			_, err := decode(c, fp)
			var se *SnapshotError
			if !errors.As(err, &se) {
				t.Fatalf("byte %d of %d xor %#x: got %v, want a snapshot error", i, len(b), mask, err)
			}
		}
	}
}

// TestEveryTruncationDetected: every shorter file, and one with a byte more.
func TestEveryTruncationDetected(t *testing.T) {
	fp := testFP(1)
	b := encode(t, fp, synthState(3, 7))
	for n := range len(b) {
		if _, err := decode(b[:n], fp); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d of %d bytes: got %v", n, len(b), err)
		}
	}
	if _, err := decode(append(bytes.Clone(b), 0), fp); !errors.Is(err, ErrTruncated) {
		t.Fatalf("one byte too many: got %v", err)
	}
	// a reader that ends before the size it was said to have
	if _, err := Decode(bytes.NewReader(b[:len(b)-10]), int64(len(b)), fp); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short reader: got %v", err)
	}
}

func TestOtherModelRefused(t *testing.T) {
	b := encode(t, testFP(1), synthState(4, 1))
	_, err := decode(b, testFP(2))
	if !errors.Is(err, ErrOtherModel) {
		t.Fatalf("got %v, want ErrOtherModel", err)
	}
	for _, want := range []string{testFP(1).Short(), testFP(2).Short(), "different model"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// resign recomputes both checksums of a snapshot after a deliberate edit,
// as a writer of a hostile file would; h is the header length as written.
func resign(b []byte, h uint64) []byte {
	le := binary.LittleEndian
	le.PutUint32(b[h-4:], crc32.Checksum(b[:h-4], castagnoli))
	le.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

func headerLen(b []byte) uint64 { return binary.LittleEndian.Uint64(b[48:]) }

func TestUnknownVersionAndFlags(t *testing.T) {
	fp := testFP(1)
	b := encode(t, fp, synthState(2, 1))
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint32(c[8:], 2)
	if _, err := decode(resign(c, headerLen(b)), fp); !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("version 2: got %v", err)
	}
	c = bytes.Clone(b)
	binary.LittleEndian.PutUint32(c[12:], 1)
	if _, err := decode(resign(c, headerLen(b)), fp); !errors.Is(err, ErrVersion) {
		t.Errorf("compression flag: got %v", err)
	}
}

// TestHostileLengthsDoNotAllocate: a header whose checksums hold but whose
// counts claim gigabytes is refused without allocating them.
func TestHostileLengthsDoNotAllocate(t *testing.T) {
	fp := testFP(1)
	b := encode(t, fp, synthState(2, 1))
	le := binary.LittleEndian
	edits := map[string]func([]byte){
		"payload length": func(c []byte) { le.PutUint64(c[56:], 1<<40) },
		"token count":    func(c []byte) { le.PutUint32(c[64:], 1<<31) },
		"section count":  func(c []byte) { le.PutUint32(c[72:], 1<<31) },
		"section size":   func(c []byte) { le.PutUint64(c[fixedHeader+8:], 1<<38) },
		"header length":  func(c []byte) { le.PutUint64(c[48:], 1<<40) },
	}
	for name, edit := range edits {
		c := bytes.Clone(b)
		edit(c)
		resign(c, headerLen(b))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := decode(c, fp)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s: allocated %d bytes before refusing (%v)", name, grew, err)
		}
	}
}

// TestEncodeRefusesBadStates: what Decode would refuse is never written.
func TestEncodeRefusesBadStates(t *testing.T) {
	bad := map[string]func(*model.StateData){
		"missing V":          func(d *model.StateData) { d.V[3] = nil },
		"both kinds":         func(d *model.StateData) { d.Conv[3] = []float32{1} },
		"ragged K":           func(d *model.StateData) { d.K[3] = d.K[3][:len(d.K[3])-1] },
		"short layer list":   func(d *model.StateData) { d.Recur = d.Recur[:7] },
		"uneven conv states": func(d *model.StateData) { d.Conv[0] = d.Conv[0][:2] },
		"empty layer":        func(d *model.StateData) { d.Conv[0], d.Recur[0] = nil, nil },
	}
	for name, edit := range bad {
		d := synthState(4, 1)
		edit(&d)
		if err := Encode(&bytes.Buffer{}, testFP(1), d); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// FuzzDecode: arbitrary bytes never panic Decode, and whatever it accepts
// re-encodes to exactly the same bytes (nothing is accepted that differs
// from what was written).
func FuzzDecode(f *testing.F) {
	fp := testFP(1)
	for _, n := range []int{0, 1, 3} {
		b := encode(f, fp, synthState(n, uint64(n)))
		f.Add(b)
		f.Add(b[:fixedHeader])
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte(magic))
	c := encode(f, fp, synthState(2, 1))
	binary.LittleEndian.PutUint32(c[72:], 3)
	f.Add(resign(c, headerLen(c)))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decode(b, fp)
		if err != nil {
			var se *SnapshotError
			if !errors.As(err, &se) {
				t.Fatalf("error is not a *SnapshotError: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := Encode(&out, fp, d); err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		if !bytes.Equal(out.Bytes(), b) {
			t.Fatal("decoded state encodes to different bytes")
		}
	})
}
