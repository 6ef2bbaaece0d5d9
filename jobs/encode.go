package jobs

import (
	"bytes"
	"encoding/json"
)

// marshal encodes v as encoding/json does but without escaping <, > and &,
// which model output is full of. Every MarshalJSON here uses it, as the
// outer encoder does not undo escapes made by an inner one.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
