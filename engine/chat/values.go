package chat

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/tidwall/gjson"
)

// valueFromJSON converts parsed JSON to a template value, keeping object keys in document
// order: tojson must print tool schemas exactly as Python's json.loads + json.dumps would,
// and a Go map would reorder them.
func valueFromJSON(r gjson.Result) jinja.Value {
	switch r.Type {
	case gjson.Null:
		return jinja.None()
	case gjson.False:
		return jinja.NewBool(false)
	case gjson.True:
		return jinja.NewBool(true)
	case gjson.Number:
		// Python keeps 3 and 3.0 apart (tojson prints "3" and "3.0"), so the spelling decides.
		if !strings.ContainsAny(r.Raw, ".eE") {
			if n, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
				return jinja.NewInt(n)
			}
		}
		return jinja.NewFloat(r.Float())
	case gjson.String:
		return jinja.NewString(r.Str)
	}
	if r.IsArray() {
		var items []jinja.Value
		r.ForEach(func(_, item gjson.Result) bool {
			items = append(items, valueFromJSON(item))
			return true
		})
		return jinja.NewList(items)
	}
	d := jinja.NewDict()
	dict := d.AsDict()
	r.ForEach(func(k, item gjson.Result) bool {
		dict.Set(k.Str, valueFromJSON(item)) // a repeated key keeps its first place, last value, as in Python
		return true
	})
	return d
}

// messagesFromJSON converts the messages array. Assistant tool-call arguments given as a
// JSON string (the OpenAI wire form) become objects, as vLLM does before rendering: the
// Qwen3.5/3.6 template iterates them with |items and fails on a string. With flatten (for
// templates that never iterate over content), content becomes one string as in vLLM's
// "string" content format: text parts joined by "\n", and "" for null or missing content.
func messagesFromJSON(r gjson.Result, flatten bool) (jinja.Value, error) {
	v := valueFromJSON(r)
	if !v.IsList() {
		return v, nil
	}
	for i, m := range v.AsList().Items {
		if !m.IsDict() {
			continue
		}
		normalizeToolCalls(m.AsDict())
		if !flatten {
			continue
		}
		switch content, _ := m.AsDict().Get("content"); {
		case content.IsList():
			text, err := joinTextParts(content.AsList())
			if err != nil {
				return v, fmt.Errorf("message %d: %w", i, err)
			}
			m.AsDict().Set("content", jinja.NewString(text))
		case content.IsNone(), content.IsUndefined():
			m.AsDict().Set("content", jinja.NewString("")) // vLLM: no content is an empty string
		}
	}
	return v, nil
}

// joinTextParts joins the text parts of a content list, as vLLM does for templates that take
// a string; any other part is an error, since the template could not place it.
func joinTextParts(parts *jinja.List) (string, error) {
	texts := make([]string, 0, parts.Len())
	for i, part := range parts.Items {
		var typ, text jinja.Value
		if part.IsDict() {
			typ, _ = part.AsDict().Get("type")
			text, _ = part.AsDict().Get("text")
		}
		if !typ.IsString() || !textPartTypes[typ.AsString()] || !(text.IsString() || text.IsNone()) {
			return "", fmt.Errorf("content part %d is not a text part and this template only takes text: %s", i, part.String())
		}
		if text.IsString() {
			texts = append(texts, text.AsString())
		}
	}
	return strings.Join(texts, "\n"), nil
}

// textPartTypes are the content part types vLLM reads as text.
var textPartTypes = map[string]bool{"text": true, "input_text": true, "output_text": true, "refusal": true, "thinking": true}

// contentLoop finds a for loop over a message's content, as in the Qwen3.5/3.6 template's
// {%- for item in content %}. Templates without one get list content flattened.
var contentLoop = regexp.MustCompile(`\{%-?\s*for\s+\w+\s+in\s+[\w.\[\]'"]*\bcontent\b`)

func iteratesContent(src string) bool { return contentLoop.MatchString(src) }

// normalizeToolCalls follows vLLM's _postprocess_messages: an empty tool_calls list is
// dropped, and arguments that are missing, empty, not valid JSON or not a JSON object
// become an empty object.
func normalizeToolCalls(msg *jinja.Dict) {
	role, _ := msg.Get("role")
	calls, ok := msg.Get("tool_calls")
	if !ok || !role.IsString() || role.AsString() != "assistant" || !calls.IsList() {
		return
	}
	if calls.AsList().Len() == 0 {
		delete(msg.Data, "tool_calls")
		msg.Keys = removeKey(msg.Keys, "tool_calls")
		return
	}
	for _, call := range calls.AsList().Items {
		if !call.IsDict() {
			continue
		}
		fn, ok := call.AsDict().Get("function")
		if !ok || !fn.IsDict() {
			continue
		}
		args, _ := fn.AsDict().Get("arguments")
		switch {
		case args.IsDict():
		case args.IsString() && gjson.Valid(args.AsString()) && gjson.Parse(args.AsString()).IsObject():
			fn.AsDict().Set("arguments", valueFromJSON(gjson.Parse(args.AsString())))
		default:
			fn.AsDict().Set("arguments", jinja.NewDict())
		}
	}
}

func removeKey(keys []string, key string) []string {
	out := keys[:0]
	for _, k := range keys {
		if k != key {
			out = append(out, k)
		}
	}
	return out
}

// MaxValueDepth is how deeply arrays and objects may nest in a template value.
const MaxValueDepth = 100
