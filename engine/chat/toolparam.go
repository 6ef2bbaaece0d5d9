package chat

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
	"github.com/tidwall/gjson"
)

// toolSchemas is a request's tools array, for typing XML tool-call parameters.
type toolSchemas struct{ tools gjson.Result }

func newToolSchemas(tools []byte) toolSchemas {
	if !gjson.ValidBytes(tools) {
		return toolSchemas{}
	}
	return toolSchemas{gjson.ParseBytes(tools)}
}

// property is the JSON schema of a function's parameter, if the tools declare it.
func (t toolSchemas) property(function, param string) gjson.Result {
	var prop gjson.Result
	t.tools.ForEach(func(_, tool gjson.Result) bool {
		fn := tool.Get("function")
		if fn.Get("name").Str != function {
			return true
		}
		prop = fn.Get("parameters.properties").Get(gjson.Escape(param))
		return false
	})
	return prop
}

// convert types a parameter value written in the XML form. The template writes strings
// as they are and everything else as JSON, so the text alone cannot tell "3" from 3.
// A declared parameter is typed by its schema as vLLM's Qwen3 coder parser types it: string
// types keep the text; "null"/"None" is null for other types (and for nullable strings);
// integers and numbers parse or stay text, a whole number being an integer; booleans are
// true only for "true" in any case; other types parse as JSON or stay text (vLLM tries
// Python literal syntax after JSON; that is not done here). An undeclared parameter, for
// which vLLM keeps the text, is kept as JSON when it parses as JSON and as text otherwise.
func (t toolSchemas) convert(function, param, value string) jinja.Value {
	schema := t.property(function, param)
	if !schema.Exists() {
		return jsonOrString(value)
	}
	typ, nullable := schemaType(schema)
	isNull := strings.EqualFold(value, "null") || strings.EqualFold(value, "none")
	switch {
	case nullable && isNull:
		return jinja.None()
	case typ == "string" || typ == "str" || typ == "text" || typ == "varchar" || typ == "char" || typ == "enum":
		return jinja.NewString(value)
	case isNull:
		return jinja.None()
	case hasAnyPrefix(typ, "int", "uint", "long", "short", "unsigned"):
		if n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64); err == nil {
			return jinja.NewInt(n)
		}
	case hasAnyPrefix(typ, "num", "float"):
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				return jinja.NewInt(int64(f))
			}
			return jinja.NewFloat(f)
		}
	case typ == "boolean" || typ == "bool" || typ == "binary":
		return jinja.NewBool(strings.ToLower(value) == "true")
	default:
		return jsonOrString(value)
	}
	return jinja.NewString(value)
}

// schemaType is a property's type, lower case, and whether it admits null: "type" as a
// string or a list, or the first non-null type of "anyOf"; "string" when neither is given.
func schemaType(schema gjson.Result) (typ string, nullable bool) {
	var types []string
	switch t := schema.Get("type"); {
	case t.Type == gjson.String:
		types = []string{t.Str}
	case t.IsArray():
		for _, item := range t.Array() {
			types = append(types, item.String())
		}
	default:
		for _, option := range schema.Get("anyOf").Array() {
			if option.Get("type").Type == gjson.String {
				types = append(types, option.Get("type").Str)
			}
		}
	}
	for _, ty := range types {
		ty = strings.ToLower(strings.TrimSpace(ty))
		if ty == "null" {
			nullable = true
		} else if typ == "" {
			typ = ty
		}
	}
	switch {
	case typ == "" && nullable:
		typ = "null"
	case typ == "":
		typ = "string"
	}
	return typ, nullable
}

func jsonOrString(value string) jinja.Value {
	if json.Valid([]byte(value)) {
		if v, err := valueFromJSON(value); err == nil {
			return v
		}
	}
	return jinja.NewString(value) // not JSON, or too deeply nested to convert
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
