package chat

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// pyJSON holds the json.dumps options that transformers' tojson filter exposes.
type pyJSON struct {
	ensureASCII bool
	indent      string // "" with hasIndent false: single line
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// newPyJSON returns json.dumps defaults for the given indent: ", " between items on one
// line, "," when indenting (the newline carries the spacing).
func newPyJSON(indent string, hasIndent bool) pyJSON {
	p := pyJSON{indent: indent, hasIndent: hasIndent, itemSep: ", ", keySep: ": "}
	if hasIndent {
		p.itemSep = ","
	}
	return p
}

// encodePyJSON writes v as Python's json.dumps would with default options and
// ensure_ascii=False: the format of tool-call arguments in vLLM and of tojson in
// transformers.
func encodePyJSON(v jinja.Value) (string, error) {
	var sb strings.Builder
	err := newPyJSON("", false).encode(&sb, v, 0)
	return sb.String(), err
}

func (p pyJSON) encode(sb *strings.Builder, v jinja.Value, depth int) error {
	switch {
	case v.IsUndefined(), v.IsNone(), v.IsCallable():
		sb.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case v.IsInt():
		sb.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		sb.WriteString(pyFloatRepr(v.AsFloat(), true))
	case v.IsString():
		p.encodeString(sb, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			sb.WriteString("[]")
			return nil
		}
		sb.WriteByte('[')
		for i, item := range items {
			if i > 0 {
				sb.WriteString(p.itemSep)
			}
			p.newline(sb, depth+1)
			if err := p.encode(sb, item, depth+1); err != nil {
				return err
			}
		}
		p.newline(sb, depth)
		sb.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		if d.Len() == 0 {
			sb.WriteString("{}")
			return nil
		}
		keys := d.Keys
		if p.sortKeys {
			keys = slices.Sorted(slices.Values(d.Keys))
		}
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(p.itemSep)
			}
			p.newline(sb, depth+1)
			p.encodeString(sb, k)
			sb.WriteString(p.keySep)
			item, _ := d.Get(k)
			if err := p.encode(sb, item, depth+1); err != nil {
				return err
			}
		}
		p.newline(sb, depth)
		sb.WriteByte('}')
	default:
		return fmt.Errorf("chat: cannot encode %s as json", v.String())
	}
	return nil
}

func (p pyJSON) newline(sb *strings.Builder, depth int) {
	if !p.hasIndent {
		return
	}
	sb.WriteByte('\n')
	for range depth {
		sb.WriteString(p.indent)
	}
}

// encodeString follows CPython's json encoder: the short escapes for \" \\ \n \r \t \b \f,
// \u00XX for the other control characters, and with ensure_ascii DEL and every non-ASCII
// code point as \uXXXX (surrogate pairs above the BMP). Unlike Go's encoder it leaves <, >, & and
// U+2028/U+2029 alone.
func (p pyJSON) encodeString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(sb, `\u%04x`, r)
			case r < 0x7f || !p.ensureASCII: // ensure_ascii escapes DEL too
				sb.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(sb, `\u%04x`, r)
			default:
				r -= 0x10000
				fmt.Fprintf(sb, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			}
		}
	}
	sb.WriteByte('"')
}

// pyFloatRepr formats f as Python's repr(float): the shortest round-trip digits, fixed
// notation with at least one decimal for exponents -4..15, scientific otherwise. inJSON
// selects json.dumps' spelling of the non-finite values.
func pyFloatRepr(f float64, inJSON bool) string {
	switch {
	case math.IsNaN(f):
		if inJSON {
			return "NaN"
		}
		return "nan"
	case math.IsInf(f, 1):
		if inJSON {
			return "Infinity"
		}
		return "inf"
	case math.IsInf(f, -1):
		if inJSON {
			return "-Infinity"
		}
		return "-inf"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci // Go and Python agree here: "1e-05", "1.5e+16"
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}
