package jobs

import (
	"fmt"
	"math"

	"github.com/tidwall/gjson"
)

// decodePrompts reads a completions prompt: a string, an array of token
// ids, or an array of several of either kind (all of one kind), which asks
// for one choice per prompt. A single prompt goes in job.Prompt or
// job.PromptIDs, several in job.Prompts.
func decodePrompts(v gjson.Result, job *Job) *fieldError {
	if v.Type == gjson.String {
		if v.Str == "" {
			return fieldErrorf("prompt", codeInvalidValue, "field %q must not be empty", "prompt")
		}
		job.Prompt = v.Str
		return nil
	}
	if !v.IsArray() {
		return typeError("prompt", "a string, an array of token ids, or an array of either", v)
	}
	items := v.Array()
	if len(items) == 0 {
		return fieldErrorf("prompt", codeInvalidValue, "field %q must not be empty", "prompt")
	}
	first := items[0]
	if first.Type != gjson.String && !first.IsArray() {
		ids, err := tokenIDs("prompt", items)
		job.PromptIDs = ids
		return err
	}
	prompts := make([]Prompt, len(items))
	for i, it := range items {
		at := fmt.Sprintf("prompt[%d]", i)
		if len(items) == 1 {
			at = "prompt"
		}
		switch {
		case first.Type == gjson.String && it.Type != gjson.String:
			return typeError(at, "a string, as the first prompt of the list is", it)
		case first.Type == gjson.String && it.Str == "":
			return fieldErrorf(at, codeInvalidValue, "field %q must not be empty", at)
		case first.Type == gjson.String:
			prompts[i].Text = it.Str
		case !it.IsArray():
			return typeError(at, "an array of token ids, as the first prompt of the list is", it)
		default:
			ids, err := tokenIDs(at, it.Array())
			if err != nil {
				return err
			}
			prompts[i].IDs = ids
		}
	}
	if len(prompts) == 1 {
		job.Prompt, job.PromptIDs = prompts[0].Text, prompts[0].IDs
		return nil
	}
	job.Prompts = prompts
	return nil
}

func tokenIDs(param string, items []gjson.Result) ([]int32, *fieldError) {
	if len(items) == 0 {
		return nil, fieldErrorf(param, codeInvalidValue, "field %q must not be empty", param)
	}
	ids := make([]int32, len(items))
	for i, it := range items {
		if it.Type != gjson.Number {
			return nil, fieldErrorf(param, codeInvalidType,
				"field %q must be a string or an array of token ids, got %s at index %d", param, jsonType(it), i)
		}
		n, err := asInteger(param, it)
		if err != nil {
			return nil, err
		}
		if n < 0 || n > math.MaxInt32 {
			return nil, fieldErrorf(param, codeInvalidValue, "field %q has token id %d out of range at index %d", param, n, i)
		}
		ids[i] = int32(n)
	}
	return ids, nil
}
