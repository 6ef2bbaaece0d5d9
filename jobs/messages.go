package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true}

// checkMessages validates the chat messages; the raw JSON goes on to the
// chat template unchanged.
func checkMessages(v gjson.Result) *fieldError {
	if !v.IsArray() {
		return typeError("messages", "an array", v)
	}
	msgs := v.Array()
	if len(msgs) == 0 {
		return fieldErrorf("messages", codeInvalidValue, "field %q must not be empty", "messages")
	}
	for i, m := range msgs {
		at := fmt.Sprintf("messages[%d]", i)
		if err := checkNesting(at, m.Raw, 1); err != nil {
			return err
		}
		if err := checkMessage(at, m); err != nil {
			return err
		}
	}
	return nil
}

// developerAsSystem renders OpenAI's developer role (its newer name for
// system instructions) as system, which is the only instruction role the
// Qwen templates know; the other messages are kept byte for byte. It
// returns the messages and a warning, or the input and "" when no message
// is a developer's.
func developerAsSystem(v gjson.Result) (json.RawMessage, string) {
	msgs := v.Array()
	var at []string
	for i, m := range msgs {
		if m.Get("role").Str == "developer" {
			at = append(at, fmt.Sprintf("messages[%d]", i))
		}
	}
	if len(at) == 0 {
		return json.RawMessage(v.Raw), ""
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		if m.Get("role").Str != "developer" {
			b.WriteString(m.Raw)
			continue
		}
		f := objectFields(m)
		b.WriteByte('{')
		for j, name := range f.order {
			if j > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(name)
			b.Write(key)
			b.WriteByte(':')
			if name == "role" {
				b.WriteString(`"system"`)
			} else {
				b.WriteString(f.m[name].Raw)
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return json.RawMessage(b.Bytes()), fmt.Sprintf("role \"developer\" of %s rendered as \"system\" (the chat template has no developer role)", strings.Join(at, ", "))
}

func checkMessage(at string, m gjson.Result) *fieldError {
	if !m.IsObject() {
		return typeError(at, "an object", m)
	}
	f := objectFields(m)
	role, ok, err := f.str("role")
	if err != nil {
		return typeError(at+".role", "a string", f.m["role"])
	}
	if !ok {
		return fieldErrorf(at+".role", codeMissing, "field %q is required", at+".role")
	}
	if !roles[role] {
		return fieldErrorf(at+".role", codeInvalidValue,
			"field %q must be one of system, user, assistant, tool, developer, got %q", at+".role", role)
	}
	if err := checkContent(at+".content", role, f); err != nil {
		return err
	}
	if v, ok := f.get("reasoning_content"); ok && v.Type != gjson.String {
		return typeError(at+".reasoning_content", "a string", v)
	}
	if v, ok := f.get("tool_calls"); ok {
		if err := checkToolCalls(at+".tool_calls", v); err != nil {
			return err
		}
	}
	return nil
}

// checkContent accepts a string, an array of text parts, or null (only for
// an assistant turn, which may consist of tool calls alone).
func checkContent(at, role string, f fields) *fieldError {
	c, ok := f.get("content")
	switch {
	case !ok:
		if role == "assistant" {
			return nil
		}
		return fieldErrorf(at, codeMissing, "field %q is required for role %q", at, role)
	case c.Type == gjson.String:
		return nil
	case !c.IsArray():
		return typeError(at, "a string, an array of content parts or null", c)
	}
	for i, part := range c.Array() {
		pat := fmt.Sprintf("%s[%d]", at, i)
		if !part.IsObject() {
			return typeError(pat, "an object", part)
		}
		pf := objectFields(part)
		typ, ok, err := pf.str("type")
		if err != nil {
			return typeError(pat+".type", "a string", pf.m["type"])
		}
		if !ok {
			return fieldErrorf(pat+".type", codeMissing, "field %q is required", pat+".type")
		}
		if typ != "text" {
			return fieldErrorf(pat+".type", codeUnsupported, "field %q must be \"text\" (only text is supported), got %q", pat+".type", typ)
		}
		if t, ok := pf.get("text"); !ok || t.Type != gjson.String {
			return typeError(pat+".text", "a string", t)
		}
	}
	return nil
}

func checkToolCalls(at string, v gjson.Result) *fieldError {
	if !v.IsArray() {
		return typeError(at, "an array", v)
	}
	for i, call := range v.Array() {
		if err := checkFunction(fmt.Sprintf("%s[%d]", at, i), call, "arguments"); err != nil {
			return err
		}
	}
	return nil
}

// checkTools validates the function tools offered to the model.
func checkTools(v gjson.Result) *fieldError {
	if !v.IsArray() {
		return typeError("tools", "an array", v)
	}
	for i, tool := range v.Array() {
		at := fmt.Sprintf("tools[%d]", i)
		if err := checkNesting(at, tool.Raw, 1); err != nil {
			return err
		}
		if err := checkFunction(at, tool, "parameters"); err != nil {
			return err
		}
	}
	return nil
}

// checkFunction validates {"type": "function", "function": {"name", extra}}
// where extra (arguments of a call, parameters of a tool) is optional and may
// be a JSON string or an object.
func checkFunction(at string, v gjson.Result, extra string) *fieldError {
	if !v.IsObject() {
		return typeError(at, "an object", v)
	}
	f := objectFields(v)
	if typ, ok, _ := f.str("type"); ok && typ != "function" {
		return fieldErrorf(at+".type", codeUnsupported, "field %q must be \"function\", got %q", at+".type", typ)
	}
	fn, ok := f.get("function")
	if !ok {
		return fieldErrorf(at+".function", codeMissing, "field %q is required", at+".function")
	}
	if !fn.IsObject() {
		return typeError(at+".function", "an object", fn)
	}
	ff := objectFields(fn)
	name, ok, err := ff.str("name")
	if err != nil || !ok || name == "" {
		return fieldErrorf(at+".function.name", codeMissing, "field %q must be a non-empty string", at+".function.name")
	}
	x, ok := ff.get(extra)
	if ok && x.Type != gjson.String && !x.IsObject() {
		return typeError(at+".function."+extra, "a string or an object", x)
	}
	if ok && x.Type == gjson.String {
		// JSON text in a string is parsed into a value for the template
		return checkNesting(at+".function."+extra, x.Str, 0)
	}
	return nil
}

// requestVariables are the template variables the request's own fields
// (or the renderer) set: a chat_template_kwargs key of that name would
// silently replace the validated field, so it is refused.
var requestVariables = map[string]string{
	"messages":              `give the conversation in "messages"`,
	"tools":                 `give tools in "tools"`,
	"add_generation_prompt": "petal sets it: the prompt always ends with the assistant's turn",
	"raise_exception":       "the renderer defines it",
	"petal_tojson":          "the renderer defines it",
}

// templateKwargs returns chat_template_kwargs with the top-level
// enable_thinking shortcut folded in.
func templateKwargs(f fields) (json.RawMessage, *fieldError) {
	kw, hasKw := f.get("chat_template_kwargs")
	if hasKw && !kw.IsObject() {
		return nil, typeError("chat_template_kwargs", "an object", kw)
	}
	if hasKw {
		kf := objectFields(kw)
		for _, name := range kf.order {
			if why, taken := requestVariables[name]; taken {
				return nil, fieldErrorf("chat_template_kwargs", codeInvalidValue,
					"field \"chat_template_kwargs\" must not set %q: %s", name, why)
			}
			if err := checkNesting("chat_template_kwargs."+name, kf.m[name].Raw, 0); err != nil {
				return nil, err
			}
		}
	}
	think, hasThink, err := f.boolean("enable_thinking")
	if err != nil {
		return nil, err
	}
	if !hasThink {
		if !hasKw {
			return nil, nil
		}
		return json.RawMessage(kw.Raw), nil
	}
	m := map[string]json.RawMessage{}
	if hasKw {
		if inner := kw.Get("enable_thinking"); inner.Exists() && inner.Type != gjson.Null {
			if (inner.Type == gjson.True) != think || !inner.IsBool() {
				return nil, fieldErrorf("enable_thinking", codeInvalidValue,
					"field %q disagrees with \"chat_template_kwargs.enable_thinking\": give one", "enable_thinking")
			}
		}
		if err := json.Unmarshal([]byte(kw.Raw), &m); err != nil {
			return nil, fieldErrorf("chat_template_kwargs", codeInvalidValue, "field %q is not a valid object: %v", "chat_template_kwargs", err)
		}
	}
	m["enable_thinking"] = json.RawMessage(fmt.Sprint(think))
	raw, merr := marshal(m)
	if merr != nil {
		return nil, fieldErrorf("chat_template_kwargs", codeInvalidValue, "field %q: %v", "chat_template_kwargs", merr)
	}
	return raw, nil
}

// MaxNesting is how deeply arrays and objects may nest in a value passed to
// the chat template (engine/chat's MaxValueDepth): deeper values are refused
// before anything walks them.
const MaxNesting = 100
