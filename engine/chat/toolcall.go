package chat

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/tidwall/gjson"
)

const (
	toolCallOpen   = "<tool_call>"
	toolCallClose  = "</tool_call>"
	functionOpen   = "<function="
	functionClose  = "</function>"
	parameterOpen  = "<parameter="
	parameterClose = "</parameter>"
)

// extractToolCalls takes the well-formed tool calls out of content, in either of the
// model's forms:
//
//	<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
//	<tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
//
// The first is the Qwen3.5/3.6 (and Qwen3-Coder) form, the second the Qwen3 form. A block
// that does not parse stays in the content as text. The content keeps the text before the
// first call, less the newlines the template puts before <tool_call>, and any text between
// or after calls that is not blank (vLLM drops the latter).
//
// Arguments are a JSON object written as Python's json.dumps writes it (", " and ": "), as
// vLLM returns them, keys in the order the model wrote them.
func extractToolCalls(content string, tools toolSchemas) (string, []ToolCall) {
	var calls []ToolCall
	var text strings.Builder
	last := 0 // start of the text not yet copied
	for pos := 0; ; {
		i := strings.Index(content[pos:], toolCallOpen)
		if i < 0 {
			break
		}
		start := pos + i
		body := content[start+len(toolCallOpen):]
		name, args, n, ok := parseXMLCall(body, tools)
		if !ok {
			name, args, n, ok = parseJSONCall(body)
		}
		if !ok {
			pos = start + len(toolCallOpen)
			continue
		}
		arguments, err := encodePyJSON(args)
		if err != nil { // cannot happen for values parsed from text; keep the block as text
			pos = start + len(toolCallOpen)
			continue
		}
		between := content[last:start]
		if len(calls) == 0 {
			text.WriteString(strings.TrimRight(between, "\n"))
		} else if strings.TrimSpace(between) != "" {
			text.WriteString(between)
		}
		calls = append(calls, ToolCall{ID: newToolCallID(), Type: "function", Function: FunctionCall{Name: name, Arguments: arguments}})
		last = start + len(toolCallOpen) + n
		pos = last
	}
	if len(calls) == 0 {
		return content, nil
	}
	if rest := content[last:]; strings.TrimSpace(rest) != "" {
		text.WriteString(rest)
	}
	return text.String(), calls
}

// parseXMLCall reads "<function=NAME> <parameter=KEY>VALUE</parameter>... </function>
// </tool_call>" from the text after <tool_call> and returns the length it used. A
// </parameter> closes a value only when <parameter= or </function> comes next, so a value
// may itself contain "</parameter>". One newline after the opening tag and one before the
// closing tag belong to the format and are dropped from the value.
func parseXMLCall(s string, tools toolSchemas) (name string, args jinja.Value, n int, ok bool) {
	i := skipBlank(s, 0)
	if !strings.HasPrefix(s[i:], functionOpen) {
		return "", args, 0, false
	}
	name, i, ok = tagName(s, i+len(functionOpen))
	if !ok || !validFunctionName(name) {
		return "", args, 0, false
	}
	args = jinja.NewDict()
	for {
		i = skipBlank(s, i)
		switch {
		case strings.HasPrefix(s[i:], functionClose):
			i = skipBlank(s, i+len(functionClose))
			if !strings.HasPrefix(s[i:], toolCallClose) {
				return "", args, 0, false
			}
			return name, args, i + len(toolCallClose), true
		case strings.HasPrefix(s[i:], parameterOpen):
			var key string
			key, i, ok = tagName(s, i+len(parameterOpen))
			if !ok {
				return "", args, 0, false
			}
			end := parameterEnd(s, i)
			if end < 0 {
				return "", args, 0, false
			}
			value := strings.TrimSuffix(strings.TrimPrefix(s[i:end], "\n"), "\n")
			args.AsDict().Set(key, tools.convert(name, key, value))
			i = end + len(parameterClose)
		default:
			return "", args, 0, false
		}
	}
}

// tagName reads NAME> at i: a name without line breaks or angle brackets.
func tagName(s string, i int) (string, int, bool) {
	gt := strings.IndexByte(s[i:], '>')
	if gt <= 0 {
		return "", i, false
	}
	name := s[i : i+gt]
	if strings.ContainsAny(name, "<\n\r") {
		return "", i, false
	}
	return name, i + gt + 1, true
}

// validFunctionName rejects what cannot be a function (vLLM's rule): template syntax,
// blanks and quotes, as in a model writing "<function={{ name }}>" in prose.
func validFunctionName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "{}<>\"' \t\n\r")
}

// parameterEnd is the index of the </parameter> closing the value that starts at i: the
// first one followed, after blanks, by another <parameter= or by </function>.
func parameterEnd(s string, i int) int {
	for {
		j := strings.Index(s[i:], parameterClose)
		if j < 0 {
			return -1
		}
		end := i + j
		next := s[skipBlank(s, end+len(parameterClose)):]
		if strings.HasPrefix(next, parameterOpen) || strings.HasPrefix(next, functionClose) {
			return end
		}
		i = end + len(parameterClose)
	}
}

// parseJSONCall reads `{"name": NAME, "arguments": {...}} </tool_call>` from the text after
// <tool_call>. Arguments written as a string holding a JSON object are accepted too, and
// missing or null arguments are an empty object.
func parseJSONCall(s string) (name string, args jinja.Value, n int, ok bool) {
	i := skipBlank(s, 0)
	if i >= len(s) || s[i] != '{' {
		return "", args, 0, false
	}
	dec := json.NewDecoder(strings.NewReader(s[i:]))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return "", args, 0, false
	}
	end := skipBlank(s, i+int(dec.InputOffset()))
	if !strings.HasPrefix(s[end:], toolCallClose) {
		return "", args, 0, false
	}
	obj := gjson.ParseBytes(raw)
	nameField, argsField := obj.Get("name"), obj.Get("arguments")
	if nameField.Type != gjson.String || !validFunctionName(nameField.Str) {
		return "", args, 0, false
	}
	if argsField.Type == gjson.String && gjson.Valid(argsField.Str) {
		argsField = gjson.Parse(argsField.Str)
	}
	switch {
	case argsField.IsObject():
		var err error
		if args, err = valueFromJSON(argsField.Raw); err != nil {
			return "", args, 0, false // too deeply nested: left as text
		}
	case !argsField.Exists() || argsField.Type == gjson.Null:
		args = jinja.NewDict()
	default:
		return "", args, 0, false
	}
	return nameField.Str, args, end + len(toolCallClose), true
}

func skipBlank(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// newToolCallID makes an id in the form vLLM's Qwen3 tool parsers use: "call_" and 24 hex
// digits.
func newToolCallID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return "call_" + hex.EncodeToString(b[:])
}
