package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

func orDefault[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func isNull(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	return len(m) == 0 || string(m) == "null"
}

// parseTokenID reads an optional non-negative id; absent or null gives -1.
func parseTokenID(m json.RawMessage) (int, error) {
	if isNull(m) {
		return -1, nil
	}
	var id int
	if err := json.Unmarshal(m, &id); err != nil || id < 0 {
		return 0, fmt.Errorf("want a token id, got %s", m)
	}
	return id, nil
}

// parseTokenIDs reads an id or a list of ids; absent or null gives none.
func parseTokenIDs(m json.RawMessage) ([]int, error) {
	if isNull(m) {
		return nil, nil
	}
	var ids []int
	if m = bytes.TrimSpace(m); m[0] == '[' {
		if err := json.Unmarshal(m, &ids); err != nil {
			return nil, fmt.Errorf("want a token id or a list of them, got %s", m)
		}
	} else {
		id, err := parseTokenID(m)
		if err != nil {
			return nil, err
		}
		ids = []int{id}
	}
	for _, id := range ids {
		if id < 0 {
			return nil, fmt.Errorf("negative token id %d", id)
		}
	}
	return ids, nil
}

// describeJSONError names the offending field of a type mismatch instead of
// the Go type it was decoded into.
func describeJSONError(prefix string, err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s%s: want %s, got a JSON %s", prefix, te.Field, te.Type, te.Value)
	}
	if prefix != "" {
		return strings.TrimSuffix(prefix, ".") + ": " + err.Error()
	}
	return err.Error()
}
