package checkpoint

import (
	"encoding/binary"
	"testing"
)

// TestOpenHeaderLengthShort: a header length a few bytes short still parses
// (the writers pad the JSON with spaces), but every tensor would start that
// many bytes early; the data area then runs past the last tensor.
func TestOpenHeaderLengthShort(t *testing.T) {
	enc := encodeSafetensors(routerTensors())
	n := binary.LittleEndian.Uint64(enc)
	// the same file with four more spaces of padding after the JSON
	good := withHeader(string(enc[8:8+n])+"    ", enc[8+n:])
	for short := uint64(1); short <= 4; short++ {
		dir := t.TempDir()
		writeConfig(t, dir, testTextConfig(), testQuantBlock())
		file := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(file, n+4-short)
		writeBytes(t, dir, singleFile, file)
		_, err := Open(dir)
		wantErr(t, err, "model.safetensors", "header length", "trailing")
	}
}

func TestOpenTrailingData(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, testTextConfig(), testQuantBlock())
	writeBytes(t, dir, singleFile, append(encodeSafetensors(routerTensors()), "junk"...))
	_, err := Open(dir)
	wantErr(t, err, "model.safetensors", "4 bytes", "trailing")
}

// TestOpenDataGap: bytes that no tensor owns between two tensors mean the
// header does not describe the file.
func TestOpenDataGap(t *testing.T) {
	header := `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`
	_, _, err := parseHeader("gap.safetensors", withHeader(header, make([]byte, 12)))
	wantErr(t, err, "gap.safetensors", `"a"`, `"b"`, "bytes 4 to 8")

	// the data area must start at the first tensor too
	header = `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`
	_, _, err = parseHeader("lead.safetensors", withHeader(header, make([]byte, 8)))
	wantErr(t, err, "lead.safetensors", `"a"`, "bytes 0 to 4")

	// zero-length tensors sit anywhere inside the layout, as safetensors writes them
	header = `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`
	if _, _, err := parseHeader("ok.safetensors", withHeader(header, make([]byte, 8))); err != nil {
		t.Error(err)
	}
	header = `{"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`
	if _, _, err := parseHeader("empty.safetensors", withHeader(header, nil)); err != nil {
		t.Error(err)
	}
}
