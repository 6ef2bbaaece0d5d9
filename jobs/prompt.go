package jobs

import (
	"math"

	"github.com/tidwall/gjson"
)

// decodePrompt reads a completions prompt: a string, an array of token ids,
// or a one-element array of either (batched prompts are not supported).
func decodePrompt(v gjson.Result) (string, []int32, *fieldError) {
	if v.Type == gjson.String {
		if v.Str == "" {
			return "", nil, fieldErrorf("prompt", codeInvalidValue, "field %q must not be empty", "prompt")
		}
		return v.Str, nil, nil
	}
	if !v.IsArray() {
		return "", nil, typeError("prompt", "a string or an array of token ids", v)
	}
	items := v.Array()
	if len(items) == 0 {
		return "", nil, fieldErrorf("prompt", codeInvalidValue, "field %q must not be empty", "prompt")
	}
	first := items[0]
	if first.Type == gjson.String || first.IsArray() {
		if len(items) > 1 {
			return "", nil, fieldErrorf("prompt", codeUnsupported,
				"field %q holds %d prompts: give one prompt per job line", "prompt", len(items))
		}
		if first.IsArray() {
			ids, err := tokenIDs(first.Array())
			return "", ids, err
		}
		return decodePrompt(first)
	}
	ids, err := tokenIDs(items)
	return "", ids, err
}

func tokenIDs(items []gjson.Result) ([]int32, *fieldError) {
	if len(items) == 0 {
		return nil, fieldErrorf("prompt", codeInvalidValue, "field %q must not be empty", "prompt")
	}
	ids := make([]int32, len(items))
	for i, it := range items {
		if it.Type != gjson.Number {
			return nil, fieldErrorf("prompt", codeInvalidType,
				"field %q must be a string or an array of token ids, got %s at index %d", "prompt", jsonType(it), i)
		}
		n, err := asInteger("prompt", it)
		if err != nil {
			return nil, err
		}
		if n < 0 || n > math.MaxInt32 {
			return nil, fieldErrorf("prompt", codeInvalidValue, "field %q has token id %d out of range at index %d", "prompt", n, i)
		}
		ids[i] = int32(n)
	}
	return ids, nil
}
