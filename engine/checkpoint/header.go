package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// maxHeaderLen is the safetensors format's own limit on the JSON header.
const maxHeaderLen = 100 << 20

// headerEntry is one tensor's record in a safetensors header.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// parseHeader validates a whole safetensors file held in buf (usually a
// memory map) and returns its tensors under their original names, sorted by
// name, with Data viewing buf, and the optional __metadata__ strings. file
// names the file in errors.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON, then the
// data area; data_offsets are relative to the start of the data area.
func parseHeader(file string, buf []byte) ([]*Tensor, map[string]string, error) {
	if len(buf) < 8 {
		return nil, nil, fmt.Errorf("checkpoint: %s: file is %d bytes, too short for a safetensors header", file, len(buf))
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	if n > maxHeaderLen {
		return nil, nil, fmt.Errorf("checkpoint: %s: header length %d is over the %d-byte limit: not a safetensors file", file, n, maxHeaderLen)
	}
	if n < 2 {
		return nil, nil, fmt.Errorf("checkpoint: %s: header length %d is too small for a JSON header: not a safetensors file", file, n)
	}
	if n > uint64(len(buf)-8) {
		return nil, nil, fmt.Errorf("checkpoint: %s: header length %d does not fit in the %d-byte file: not a safetensors file or truncated", file, n, len(buf))
	}
	head := bytes.TrimRight(buf[8:8+n], " \x00")
	var raw map[string]json.RawMessage
	if len(head) == 0 || head[0] != '{' {
		return nil, nil, fmt.Errorf("checkpoint: %s: header does not start with a JSON object: not a safetensors file", file)
	}
	if err := json.Unmarshal(head, &raw); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: the %d-byte header is not a JSON object (a wrong header length or a damaged file): %v", file, n, err)
	}
	data := buf[8+n:]

	var meta map[string]string
	tensors := make([]*Tensor, 0, len(raw))
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			// MLX writes {"format": "mlx"}; non-string values are tolerated and dropped.
			var m map[string]any
			if err := json.Unmarshal(msg, &m); err != nil {
				return nil, nil, fmt.Errorf("checkpoint: %s: __metadata__ is not a JSON object: %v", file, err)
			}
			meta = make(map[string]string, len(m))
			for k, v := range m {
				if s, ok := v.(string); ok {
					meta[k] = s
				}
			}
			continue
		}
		t, begin, err := parseEntry(file, name, msg, data)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
		spans = append(spans, span{begin, begin + int64(len(t.Data)), name})
	}
	if err := checkLayout(file, n, spans, int64(len(data))); err != nil {
		return nil, nil, err
	}
	sort.Slice(tensors, func(i, j int) bool { return tensors[i].Name < tensors[j].Name })
	return tensors, meta, nil
}

// parseEntry checks one tensor record against the data area and slices it.
func parseEntry(file, name string, msg json.RawMessage, data []byte) (*Tensor, int64, error) {
	var e headerEntry
	if err := json.Unmarshal(msg, &e); err != nil {
		return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q: bad header entry: %v", file, name, err)
	}
	dtype, err := checkDType(file, name, e.DType)
	if _, inText := normaliseName(name); err != nil && inText {
		return nil, 0, err
	}
	// A tensor petal ignores (vision tower, MTP head) may have any dtype:
	// only its place in the file is checked.
	ignoredDType := err != nil
	if len(e.DataOffsets) != 2 {
		return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q: data_offsets has %d values, want 2", file, name, len(e.DataOffsets))
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if begin < 0 || end < begin {
		return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q: bad data_offsets [%d, %d]", file, name, begin, end)
	}
	if end > int64(len(data)) {
		return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q runs past the end of the file (its data ends at byte %d, the file holds %d bytes of data): file truncated",
			file, name, end, len(data))
	}
	shape := make([]int, len(e.Shape))
	numel := int64(1)
	for i, d := range e.Shape {
		if d < 0 {
			return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q: negative dimension in shape %v", file, name, e.Shape)
		}
		// Keep numel*size within int64; a tensor that large cannot fit in the file anyway.
		if d > 0 && numel > math.MaxInt64/8/d {
			return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q: shape %v is too large", file, name, e.Shape)
		}
		numel *= d
		shape[i] = int(d)
	}
	if ignoredDType {
		return &Tensor{Name: name, DType: DType(e.DType), Shape: shape, Data: data[begin:end:end], File: file}, begin, nil
	}
	if want := numel * int64(dtype.Size()); end-begin != want {
		return nil, 0, fmt.Errorf("checkpoint: %s: tensor %q: %d bytes of data, but shape %v of %s needs %d",
			file, name, end-begin, e.Shape, dtype, want)
	}
	return &Tensor{Name: name, DType: dtype, Shape: shape, Data: data[begin:end:end], File: file}, begin, nil
}

// span is the byte range of one tensor in the data area.
type span struct {
	begin, end int64
	name       string
}

// checkLayout requires the tensors to tile the data area exactly, as the
// safetensors format does: contiguous from byte 0, no gap, no overlap, and
// the last one ending at the end of the file. A header length a few bytes
// short still parses when the JSON is padded, but shifts every tensor; it
// shows up here as bytes left after the last tensor.
func checkLayout(file string, headerLen uint64, spans []span, dataLen int64) error {
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var pos int64 // where the next tensor must start
	prev := ""    // the tensor that ends at pos
	for _, s := range spans {
		switch {
		case s.begin < pos:
			return fmt.Errorf("checkpoint: %s: tensors %q and %q overlap", file, prev, s.name)
		case s.begin > pos && prev == "":
			return fmt.Errorf("checkpoint: %s: bytes 0 to %d of the data area belong to no tensor (the first, %q, starts at %d): header and data do not agree",
				file, s.begin, s.name, s.begin)
		case s.begin > pos:
			return fmt.Errorf("checkpoint: %s: bytes %d to %d of the data area, between tensors %q and %q, belong to no tensor: header and data do not agree",
				file, pos, s.begin, prev, s.name)
		}
		pos, prev = s.end, s.name
	}
	if pos != dataLen {
		return fmt.Errorf("checkpoint: %s: %d bytes of trailing data after the last tensor (the tensors end at byte %d of the data area, the file has %d bytes after its %d-byte header): "+
			"the header length is wrong or data was appended to the file", file, dataLen-pos, pos, dataLen, headerLen)
	}
	return nil
}
