package jobs

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// fields are the members of one JSON object by name; the last of
// duplicated keys wins, as in encoding/json and Python's json.
type fields struct {
	m     map[string]gjson.Result
	order []string
}

func objectFields(obj gjson.Result) fields {
	f := fields{m: map[string]gjson.Result{}}
	obj.ForEach(func(k, v gjson.Result) bool {
		if _, seen := f.m[k.Str]; !seen {
			f.order = append(f.order, k.Str)
		}
		f.m[k.Str] = v
		return true
	})
	return f
}

// get returns the field's value and whether it is set; null counts as unset,
// as OpenAI clients send null for options left at their default.
func (f fields) get(name string) (gjson.Result, bool) {
	v, ok := f.m[name]
	if !ok || v.Type == gjson.Null {
		return v, false
	}
	return v, true
}

func (f fields) has(name string) bool {
	_, ok := f.m[name]
	return ok
}

// jsonType names a value's JSON type for error messages.
func jsonType(v gjson.Result) string {
	switch v.Type {
	case gjson.Null:
		return "null"
	case gjson.False, gjson.True:
		return "boolean"
	case gjson.Number:
		return "number"
	case gjson.String:
		return "string"
	}
	if v.IsArray() {
		return "array"
	}
	return "object"
}

func typeError(param, want string, v gjson.Result) *fieldError {
	return fieldErrorf(param, codeInvalidType, "field %q must be %s, got %s", param, want, jsonType(v))
}

func (f fields) str(name string) (string, bool, *fieldError) {
	v, ok := f.get(name)
	if !ok {
		return "", false, nil
	}
	if v.Type != gjson.String {
		return "", false, typeError(name, "a string", v)
	}
	return v.Str, true, nil
}

func (f fields) boolean(name string) (bool, bool, *fieldError) {
	v, ok := f.get(name)
	if !ok {
		return false, false, nil
	}
	if v.Type != gjson.True && v.Type != gjson.False {
		return false, false, typeError(name, "a boolean", v)
	}
	return v.Type == gjson.True, true, nil
}

func (f fields) number(name string) (*float64, *fieldError) {
	v, ok := f.get(name)
	if !ok {
		return nil, nil
	}
	if v.Type != gjson.Number {
		return nil, typeError(name, "a number", v)
	}
	x, err := strconv.ParseFloat(v.Raw, 64)
	if err != nil || math.IsInf(x, 0) {
		return nil, fieldErrorf(name, codeInvalidValue, "field %q is out of range, got %s", name, v.Raw)
	}
	return &x, nil
}

func (f fields) integer(name string) (*int64, *fieldError) {
	v, ok := f.get(name)
	if !ok {
		return nil, nil
	}
	n, err := asInteger(name, v)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// asInteger reads an integral JSON number; 2.0 and 1e3 are accepted as
// some encoders write integers that way.
func asInteger(param string, v gjson.Result) (int64, *fieldError) {
	if v.Type != gjson.Number {
		return 0, typeError(param, "an integer", v)
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, nil
	}
	x, err := strconv.ParseFloat(v.Raw, 64)
	if err == nil && x != math.Trunc(x) {
		return 0, fieldErrorf(param, codeInvalidType, "field %q must be an integer, got %s", param, v.Raw)
	}
	if err != nil || x < math.MinInt64 || x >= math.MaxInt64 {
		return 0, fieldErrorf(param, codeInvalidValue, "field %q is out of range, got %s", param, v.Raw)
	}
	return int64(x), nil
}
