package chat

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/tidwall/gjson"
)

// valueFromJSON converts JSON text to a template value in one pass, keeping object keys in
// document order: tojson must print tool schemas exactly as Python's json.loads + json.dumps
// would, and a Go map would reorder them. Arrays and objects may nest MaxValueDepth deep; a
// deeper value is refused before it is walked.
func valueFromJSON(raw string) (jinja.Value, error) {
	p := valueParser{s: raw}
	v := p.value(0)
	if p.err == nil {
		if p.skipSpace(); p.i < len(p.s) {
			p.failf("unexpected %q after the value", p.s[p.i])
		}
	}
	return v, p.err
}

// errTooDeep is a value nested deeper than MaxValueDepth.
var errTooDeep = fmt.Errorf("a value is nested more than %d levels deep (arrays and objects within each other)", MaxValueDepth)

// valueParser reads JSON text from s at i; the first error stops it.
type valueParser struct {
	s   string
	i   int
	err error
}

func (p *valueParser) failf(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("invalid JSON at byte %d: %s", p.i, fmt.Sprintf(format, args...))
	}
}

func (p *valueParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// value reads one value; depth is the number of arrays and objects around it.
func (p *valueParser) value(depth int) jinja.Value {
	p.skipSpace()
	if p.i >= len(p.s) {
		p.failf("unexpected end")
		return jinja.None()
	}
	switch c := p.s[p.i]; {
	case c == '[' || c == '{':
		if depth >= MaxValueDepth {
			if p.err == nil {
				p.err = errTooDeep
			}
			return jinja.None()
		}
		if c == '[' {
			return p.list(depth + 1)
		}
		return p.dict(depth + 1)
	case c == '"':
		return jinja.NewString(p.str())
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return jinja.NewBool(true)
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return jinja.NewBool(false)
	case strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return jinja.None()
	}
	return p.number()
}

func (p *valueParser) list(depth int) jinja.Value {
	p.i++ // [
	var items []jinja.Value
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return jinja.NewList(items)
	}
	for p.err == nil {
		items = append(items, p.value(depth))
		if !p.next(']') {
			break
		}
	}
	return jinja.NewList(items)
}

func (p *valueParser) dict(depth int) jinja.Value {
	p.i++ // {
	d := jinja.NewDict()
	dict := d.AsDict()
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return d
	}
	for p.err == nil {
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			p.failf("expected a key")
			break
		}
		key := p.str()
		if p.skipSpace(); p.i >= len(p.s) || p.s[p.i] != ':' {
			p.failf("expected ':'")
			break
		}
		p.i++
		dict.Set(key, p.value(depth)) // a repeated key keeps its first place, last value, as in Python
		if !p.next('}') {
			break
		}
	}
	return d
}

// next reads the ',' before another member (true) or the closer (false).
func (p *valueParser) next(closer byte) bool {
	if p.skipSpace(); p.err == nil && p.i < len(p.s) {
		switch p.s[p.i] {
		case ',':
			p.i++
			return true
		case closer:
			p.i++
			return false
		}
	}
	p.failf("expected ',' or %q", closer)
	return false
}

// str reads a string; escapes are decoded as gjson decodes them.
func (p *valueParser) str() string {
	start, escaped := p.i, false
	for p.i++; p.i < len(p.s); p.i++ {
		switch p.s[p.i] {
		case '\\':
			escaped = true
			p.i++
		case '"':
			p.i++
			if !escaped {
				return p.s[start+1 : p.i-1]
			}
			return gjson.Parse(p.s[start:p.i]).Str
		}
	}
	p.failf("unterminated string")
	return ""
}

func (p *valueParser) number() jinja.Value {
	start := p.i
	for p.i < len(p.s) && strings.IndexByte("+-.eE0123456789", p.s[p.i]) >= 0 {
		p.i++
	}
	raw := p.s[start:p.i]
	if raw == "" {
		p.failf("unexpected %q", p.s[p.i])
		return jinja.None()
	}
	// Python keeps 3 and 3.0 apart (tojson prints "3" and "3.0"), so the spelling decides.
	if !strings.ContainsAny(raw, ".eE") {
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return jinja.NewInt(n)
		}
	}
	x, err := strconv.ParseFloat(raw, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		p.failf("bad number %q", raw)
	}
	return jinja.NewFloat(x)
}

// messagesFromJSON converts the messages array. Assistant tool-call arguments given as a
// JSON string (the OpenAI wire form) become objects, as vLLM does before rendering: the
// Qwen3.5/3.6 template iterates them with |items and fails on a string. With flatten (for
// templates that never iterate over content), content becomes one string as in vLLM's
// "string" content format: text parts joined by "\n", and "" for null or missing content.
func messagesFromJSON(raw string, flatten bool) (jinja.Value, error) {
	v, err := valueFromJSON(raw)
	if err != nil || !v.IsList() {
		return v, err
	}
	for i, m := range v.AsList().Items {
		if !m.IsDict() {
			continue
		}
		if err := normalizeToolCalls(m.AsDict()); err != nil {
			return v, fmt.Errorf("message %d: %w", i, err)
		}
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
// become an empty object. Arguments too deeply nested to convert are an error.
func normalizeToolCalls(msg *jinja.Dict) error {
	role, _ := msg.Get("role")
	calls, ok := msg.Get("tool_calls")
	if !ok || !role.IsString() || role.AsString() != "assistant" || !calls.IsList() {
		return nil
	}
	if calls.AsList().Len() == 0 {
		delete(msg.Data, "tool_calls")
		msg.Keys = removeKey(msg.Keys, "tool_calls")
		return nil
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
			obj, err := valueFromJSON(args.AsString())
			if err != nil {
				return fmt.Errorf("tool call arguments: %w", err)
			}
			fn.AsDict().Set("arguments", obj)
		default:
			fn.AsDict().Set("arguments", jinja.NewDict())
		}
	}
	return nil
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
