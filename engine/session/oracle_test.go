package session

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"petal/engine/checkpoint"
	"petal/engine/model"
)

// TestRoundTripOracle: a state saved after a 100-token prefill and imported
// into a fresh state continues with bit-identical logits.
func TestRoundTripOracle(t *testing.T) {
	m, fp := loadOracle(t)
	ids := tokenIDs(130, 1, m.Dims.Vocab)
	s := m.NewState(1024)
	if err := m.Forward(s, ids[:100], model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	exported := m.Export(s)
	st := openTestStore(t, fp, StoreOptions{})
	if _, err := st.SaveTurn("rt", exported); err != nil {
		t.Fatal(err)
	}
	want := allLogits(t, m, s, ids[100:])

	r, err := st.Latest("rt")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Data, exported) {
		t.Fatal("the restored state differs from the exported one")
	}
	restored, err := m.Import(r.Data, 1024)
	if err != nil {
		t.Fatal(err)
	}
	got := allLogits(t, m, restored, ids[100:])
	if len(got) != len(want) || len(got) != 30*m.Dims.Vocab {
		t.Fatalf("%d logits, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("logit %d (position %d): restored %v, original %v", i, 100+i/m.Dims.Vocab, got[i], want[i])
		}
	}
}

// TestSampledCorruptionOracle flips 2000 evenly spaced bytes (and every
// header byte) of a real snapshot: each must be refused.
func TestSampledCorruptionOracle(t *testing.T) {
	m, fp := loadOracle(t)
	s := m.NewState(64)
	if err := m.Forward(s, tokenIDs(5, 2, m.Dims.Vocab), model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, fp, m.Export(s)); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	positions := make([]int, 0, 2000+int(headerLen(b)))
	for i := range int(headerLen(b)) {
		positions = append(positions, i)
	}
	for k := range 2000 {
		positions = append(positions, k*(len(b)-1)/1999)
	}
	for _, i := range positions {
		b[i] ^= 0x10
		_, err := decode(b, fp)
		b[i] ^= 0x10
		var se *SnapshotError
		if !errors.As(err, &se) {
			t.Fatalf("byte %d of %d flipped: got %v", i, len(b), err)
		}
	}
	if _, err := decode(b, fp); err != nil {
		t.Fatalf("the unflipped snapshot: %v", err)
	}
}

// modelCopy lays out a copy of the oracle model folder: every file linked
// except those edit rewrites.
func modelCopy(t *testing.T, edit map[string]func([]byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(oracleDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, _ := filepath.Abs(filepath.Join(oracleDir, e.Name()))
		dst := filepath.Join(dir, e.Name())
		if f, ok := edit[e.Name()]; ok {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, f(b), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Symlink(src, dst); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func fingerprintOf(t *testing.T, dir string) Fingerprint {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	return ModelFingerprint(ck)
}

// TestFingerprint: the same weights in another folder match; a changed
// config value or a changed weight byte does not.
func TestFingerprint(t *testing.T) {
	_, fp := loadOracle(t)
	if got := fingerprintOf(t, modelCopy(t, nil)); got != fp {
		t.Errorf("a copy of the model has fingerprint %s, the original %s", got.Short(), fp.Short())
	}
	eps := modelCopy(t, map[string]func([]byte) []byte{"config.json": func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"rms_norm_eps": 1e-06`), []byte(`"rms_norm_eps": 1e-05`), 1)
	}})
	if fingerprintOf(t, eps) == fp {
		t.Error("a different rms_norm_eps gives the same fingerprint")
	}
	weight := modelCopy(t, map[string]func([]byte) []byte{"model-00002-of-00002.safetensors": func(b []byte) []byte {
		b[len(b)-1] ^= 1
		return b
	}})
	if fingerprintOf(t, weight) == fp {
		t.Error("a different weight byte gives the same fingerprint")
	}
}

// TestOtherModelSnapshotRefused: a store of one model refuses another
// model's session with an error naming the file, also when looking for the
// longest prefix it would restore, and passes it over, with a warning,
// when the prompt does not need it.
func TestOtherModelSnapshotRefused(t *testing.T) {
	m, fp := loadOracle(t)
	s := m.NewState(64)
	ids := tokenIDs(8, 3, m.Dims.Vocab)
	if err := m.Forward(s, ids, model.NoLogits, nil); err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, fp, StoreOptions{})
	info, err := st.SaveTurn("s", m.Export(s))
	if err != nil {
		t.Fatal(err)
	}
	other := fp
	other[0] ^= 1
	foreign, _ := OpenStore(st.Dir, other, StoreOptions{})
	_, err = foreign.Latest("s")
	var se *SnapshotError
	if !errors.As(err, &se) || !errors.Is(err, ErrOtherModel) || se.File != info.File {
		t.Fatalf("got %v, want an other-model error for %s", err, info.File)
	}
	_, _, err = foreign.LongestPrefixOf("s", append(slices.Clone(ids), 1))
	if !errors.As(err, &se) || !errors.Is(err, ErrOtherModel) || se.File != info.File {
		t.Fatalf("prefix lookup: %v, want an other-model error for %s", err, info.File)
	}
	r, ok, err := foreign.LongestPrefixOf("s", []int32{ids[0] + 1, 2})
	if err != nil || ok || len(r.Skipped) != 1 || !errors.Is(r.Skipped[0], ErrOtherModel) {
		t.Fatalf("prefix lookup of another prompt: ok=%v err=%v skipped=%v", ok, err, r.Skipped)
	}
}
