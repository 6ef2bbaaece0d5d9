package chat

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ardanlabs/jinja"
)

// The library's built-in tojson prints 1.0 as "1" and 1234567.0 as "1.234567e+06", escapes
// U+2028/U+2029, and loses key order with indent=. transformers' tojson is json.dumps, so
// templates are compiled with their tojson filter renamed to this one, which the library
// looks up among the render variables.
const toJSONFilter = "petal_tojson"

var toJSONUse = regexp.MustCompile(`\|(\s*)tojson\b`)

// renameToJSON points every `| tojson` inside a {{ }} or {% %} tag at toJSONFilter. Text
// outside tags and quoted strings inside them are left alone; no line breaks change, so
// line numbers in errors still match the source.
func renameToJSON(src string) string {
	var sb strings.Builder
	for {
		open := tagOpen(src)
		if open < 0 {
			sb.WriteString(src)
			return sb.String()
		}
		closer := "}}"
		switch src[open+1] {
		case '%':
			closer = "%}"
		case '#':
			closer = "#}"
		}
		end := tagEnd(src, open+2, closer)
		sb.WriteString(src[:open])
		tag := src[open:end]
		if closer != "#}" {
			tag = renameOutsideQuotes(tag)
		}
		sb.WriteString(tag)
		src = src[end:]
	}
}

// tagOpen is the index of the next "{{", "{%" or "{#", or -1.
func tagOpen(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// tagEnd is the index just past the closer, skipping quoted strings as the library's
// scanner does; an unclosed tag runs to the end (compilation reports it).
func tagEnd(s string, from int, closer string) int {
	for i := from; i < len(s); i++ {
		c := s[i]
		if closer != "#}" && (c == '\'' || c == '"') {
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			continue
		}
		if strings.HasPrefix(s[i:], closer) {
			return i + 2
		}
	}
	return len(s)
}

func renameOutsideQuotes(tag string) string {
	var sb strings.Builder
	start := 0
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if c != '\'' && c != '"' {
			continue
		}
		sb.WriteString(toJSONUse.ReplaceAllString(tag[start:i], "|${1}"+toJSONFilter))
		j := i + 1
		for ; j < len(tag) && tag[j] != c; j++ {
			if tag[j] == '\\' {
				j++
			}
		}
		j = min(j+1, len(tag))
		sb.WriteString(tag[i:j])
		start, i = j, j-1
	}
	sb.WriteString(toJSONUse.ReplaceAllString(tag[start:], "|${1}"+toJSONFilter))
	return sb.String()
}

// toJSON is transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), with the arguments in that order.
func toJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: missing value")
	}
	arg := func(pos int, name string) jinja.Value {
		if v, ok := kwargs[name]; ok {
			return v
		}
		if pos < len(args) {
			return args[pos]
		}
		return jinja.Undefined()
	}
	indent, hasIndent := "", false
	switch v := arg(2, "indent"); {
	case v.IsInt():
		indent, hasIndent = strings.Repeat(" ", int(max(v.AsInt(), 0))), true
	case v.IsString():
		indent, hasIndent = v.AsString(), true
	case v.IsUndefined(), v.IsNone():
	default:
		return jinja.Undefined(), fmt.Errorf("tojson: indent must be an integer or a string, not %s", v.String())
	}
	p := newPyJSON(indent, hasIndent)
	p.ensureASCII = arg(1, "ensure_ascii").IsTruthy()
	p.sortKeys = arg(4, "sort_keys").IsTruthy()
	if sep := arg(3, "separators"); !sep.IsUndefined() && !sep.IsNone() {
		if !sep.IsList() || sep.AsList().Len() != 2 || !sep.AsList().Get(0).IsString() || !sep.AsList().Get(1).IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings, not %s", sep.String())
		}
		p.itemSep, p.keySep = sep.AsList().Get(0).AsString(), sep.AsList().Get(1).AsString()
	}
	var sb strings.Builder
	if err := p.encode(&sb, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(sb.String()), nil
}
