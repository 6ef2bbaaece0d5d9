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

	"os"
	"path/filepath"
	"slices"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/model"
)

// encodeV1 writes d in format version 1, as petal wrote snapshots before
// sections had element types.
func encodeV1(t testing.TB, fp Fingerprint, d model.StateData) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := encodeVersion(&b, 1, fp, d); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestKVTypesRoundTrip: states of f32 and of bf16 KV caches come back
// identical with their element type; bf16 sections take two bytes a
// value; a K value that bf16 does not hold is refused, not rounded.
func TestKVTypesRoundTrip(t *testing.T) {
	fp := testFP(1)
	for _, n := range []int{0, 1, 300} {
		f32, bf16 := synthState(n, 9), synthStateBF16(n, 9)
		bf, ff := encode(t, fp, bf16), encode(t, fp, f32)
		for _, c := range []struct {
			b []byte
			d model.StateData
		}{{ff, f32}, {bf, bf16}} {
			got, err := decode(c.b, fp)
			if err != nil {
				t.Fatalf("%d tokens, %s: %v", n, c.d.KV, err)
			}
			if !reflect.DeepEqual(got, c.d) {
				t.Fatalf("%d tokens, %s: decoded state differs (KV %s)", n, c.d.KV, got.KV)
			}
		}
		// 2 attention layers of K and V, 6 values a token each
		if saved := len(ff) - len(bf); saved != 2*2*6*n*2 {
			t.Errorf("%d tokens: the bf16 snapshot is %d bytes smaller, want %d", n, saved, 2*2*6*n*2)
		}
	}
	d := synthStateBF16(4, 1)
	d.K[3][5] = 1.0 / 3
	if err := Encode(&bytes.Buffer{}, fp, d); err == nil || !strings.Contains(err.Error(), "not a bf16 value") {
		t.Errorf("an inexact bf16 value: %v", err)
	}
}

// TestVersion1Read: a snapshot written by an earlier petal (format version
// 1, f32 sections without element types; testdata made by that code) is
// read as an f32 state; one made by the version 1 writer kept for tests
// is the same file.
func TestVersion1Read(t *testing.T) {
	fp := testFP(1)
	b, err := os.ReadFile("testdata/v1-synth-3-7.snap")
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != 1 {
		t.Fatalf("testdata is version %d", v)
	}
	got, err := decode(b, fp)
	if err != nil {
		t.Fatal(err)
	}
	if want := synthState(3, 7); !reflect.DeepEqual(got, want) || got.KV != backend.F32 {
		t.Fatalf("version 1 file decodes differently (KV %s)", got.KV)
	}
	if !bytes.Equal(encodeV1(t, fp, got), b) {
		t.Error("the version 1 writer of the tests does not write what earlier petals wrote")
	}
	if err := encodeVersion(&bytes.Buffer{}, 1, fp, synthStateBF16(2, 1)); err == nil {
		t.Error("a bf16 state was written as version 1")
	}
	// under another fingerprint (every version 1 file since the fingerprint
	// covers all the weights) the refusal says why and what to do
	if _, err := decode(b, testFP(2)); !errors.Is(err, ErrOtherModel) || !strings.Contains(err.Error(), "older petal") {
		t.Errorf("a version 1 file of another fingerprint: %v", err)
	}
}

// TestSectionTypesChecked: a header whose checksums hold but whose element
// types are impossible or mixed is refused, naming the problem.
func TestSectionTypesChecked(t *testing.T) {
	fp := testFP(1)
	b := encode(t, fp, synthState(2, 1))
	le := binary.LittleEndian
	typeAt := func(i int) int { return fixedHeader + 24*i + 16 }
	edits := map[string]struct {
		edit func([]byte)
		want string
	}{
		"i32 section":       {func(c []byte) { le.PutUint32(c[typeAt(0):], uint32(backend.I32)) }, "element type 4"},
		"unknown type":      {func(c []byte) { le.PutUint32(c[typeAt(0):], 77) }, "element type 77"},
		"reserved field":    {func(c []byte) { le.PutUint32(c[typeAt(0)+4:], 1) }, "reserved"},
		"bf16 conv section": {func(c []byte) { le.PutUint32(c[typeAt(0):], uint32(backend.BF16)) }, ""},
	}
	for name, e := range edits {
		c := bytes.Clone(b)
		e.edit(c)
		_, err := decode(resign(c, headerLen(b)), fp)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	// K of bf16 and V of f32 in one layer: sizes made to add up
	d := synthStateBF16(2, 1)
	c := encode(t, fp, d)
	le.PutUint32(c[typeAt(7):], uint32(backend.F32)) // layer 3's V
	if _, err := decode(resign(c, headerLen(c)), fp); !errors.Is(err, ErrCorrupt) {
		t.Errorf("mixed K and V types: got %v", err)
	}
}

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
	binary.LittleEndian.PutUint32(c[8:], 3)
	if _, err := decode(resign(c, headerLen(b)), fp); !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "version 3") ||
		!strings.Contains(err.Error(), "reads versions 1 and 2") {
		t.Errorf("version 3: got %v", err)
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
	f.Add(encode(f, fp, synthStateBF16(3, 4)))
	f.Add(encodeV1(f, fp, synthState(3, 5)))
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
		if err := encodeVersion(&out, binary.LittleEndian.Uint32(b[8:]), fp, d); err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		if !bytes.Equal(out.Bytes(), b) {
			t.Fatal("decoded state encodes to different bytes")
		}
	})
}

// TestKVTypeNotMixed: a store of one KV element type never restores a
// snapshot of the other: a prefix is passed over with a warning that says
// why (the job prefills), a session's turn is an error that says why, and
// the prefix is saved again in this run's type.
func TestKVTypeNotMixed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	base := tokenIDs(40, 3, 4096)
	bf16 := func(n int) model.StateData {
		d := synthStateBF16(n, uint64(n))
		d.Tokens = slices.Clone(base[:n])
		return d
	}
	st16, _ := OpenStore(dir, testFP(1), StoreOptions{KV: backend.BF16})
	if _, err := st16.SavePrefix(bf16(20)); err != nil {
		t.Fatal(err)
	}
	if _, err := st16.SaveTurn("s", bf16(30)); err != nil {
		t.Fatal(err)
	}
	prompt := append(slices.Clone(base[:35]), 1)
	if r, ok, err := st16.LongestPrefix(prompt); err != nil || !ok || r.Data.KV != backend.BF16 {
		t.Fatalf("the bf16 store: ok=%v err=%v", ok, err)
	}

	st32, _ := OpenStore(dir, testFP(1), StoreOptions{})
	r, ok, err := st32.LongestPrefix(prompt)
	if err != nil || ok {
		t.Fatalf("an f32 store restored a bf16 prefix: ok=%v err=%v", ok, err)
	}
	if len(r.Skipped) != 1 || !errors.Is(r.Skipped[0], ErrOtherKV) || !strings.Contains(r.Skipped[0].Error(), "KV cache is bf16, this run keeps f32") {
		t.Fatalf("skipped: %v", r.Skipped)
	}
	_, _, err = st32.LongestPrefixOf("s", prompt)
	if !errors.Is(err, ErrOtherKV) || !strings.Contains(err.Error(), "kv= option") {
		t.Fatalf("a bf16 session turn into an f32 store: %v", err)
	}
	// saving the same prefix in f32 replaces the bf16 file
	f32 := withTokens(base[:20], 20)
	if _, err := st32.SavePrefix(f32); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := st32.LongestPrefix(prompt); err != nil || !ok || r.Data.KVType() != backend.F32 {
		t.Fatalf("after saving in f32: ok=%v err=%v", ok, err)
	}
}

// TestModelRoundTripKVTypes: a state of the oracle model with f32 and with
// bf16 KV caches, written to a file and read back, continues with logits
// identical to the original's; the bf16 file is the smaller.
func TestModelRoundTripKVTypes(t *testing.T) {
	sizes := map[backend.DType]int64{}
	for _, kv := range []backend.DType{backend.F32, backend.BF16} {
		m, fp := loadOracleOn(t, cpu.Options{KV: kv})
		ids := tokenIDs(80, 5, m.Dims.Vocab)
		s := m.NewState(1024)
		if err := m.Forward(s, ids[:60], model.NoLogits, nil); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "s.snap")
		size, err := WriteFile(path, fp, snapshot(t, m, s))
		if err != nil {
			t.Fatal(err)
		}
		sizes[kv] = size
		want := allLogits(t, m, s, ids[60:])
		d, err := ReadFile(path, fp)
		if err != nil {
			t.Fatal(err)
		}
		if d.KV != kv {
			t.Fatalf("%s state read back as %s", kv, d.KV)
		}
		restored, err := m.Import(d, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if got := allLogits(t, m, restored, ids[60:]); !slices.Equal(got, want) {
			t.Errorf("%s: the restored state continues differently", kv)
		}
	}
	if sizes[backend.BF16] >= sizes[backend.F32] {
		t.Errorf("bf16 snapshot %d bytes, f32 %d", sizes[backend.BF16], sizes[backend.F32])
	}
}
