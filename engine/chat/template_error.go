package chat

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// TemplateError is a chat template that failed to compile or to render.
type TemplateError struct {
	Template string // where the template came from
	Line     int    // 1-based line of the template source; 0 when unknown
	Source   string // that line, trimmed
	Raised   bool   // the template called raise_exception
	Message  string // the library's message, or the raised message
}

func (e *TemplateError) Error() string {
	var sb strings.Builder
	sb.WriteString("chat: template ")
	sb.WriteString(e.Template)
	if e.Line > 0 {
		fmt.Fprintf(&sb, " line %d", e.Line)
	}
	if e.Raised {
		sb.WriteString(" raised")
	}
	sb.WriteString(": ")
	sb.WriteString(e.Message)
	if e.Source != "" {
		fmt.Fprintf(&sb, " (at %q)", e.Source)
	}
	return sb.String()
}

// raisedError carries a raise_exception message up through the library.
type raisedError struct{ message string }

func (e *raisedError) Error() string { return e.message }

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), &raisedError{"raise_exception called without a message"}
	}
	msg := args[0].String()
	if args[0].IsString() {
		msg = args[0].AsString()
	}
	return jinja.Undefined(), &raisedError{msg}
}

// The library reports positions as "line N" (parse errors) or "at line N, col M" (scan).
var linePattern = regexp.MustCompile(`\bline (\d+)`)

func compileError(name, src string, err error) error {
	e := &TemplateError{Template: name, Message: err.Error()}
	if m := linePattern.FindStringSubmatch(e.Message); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Message = strings.Replace(e.Message, m[0]+": ", "", 1) // the line is printed once, up front
	} else {
		// "unclosed if block" and the like carry no position: point at the opener.
		e.Line = unclosedBlockLine(src)
	}
	e.Source = sourceLine(src, e.Line)
	return e
}

// renderError locates a render failure. The library keeps no positions in its syntax tree,
// so a raised message is found by the raise_exception call whose string literal it starts
// with, and another failure by a name it quotes ("unknown filter \"x\"") when that name
// appears on a single line of the source.
func renderError(name, src string, err error) error {
	e := &TemplateError{Template: name, Message: err.Error()}
	var raised *raisedError
	if errors.As(err, &raised) {
		e.Raised, e.Message = true, raised.message
		e.Line = raiseLine(src, raised.message)
	} else {
		e.Line = quotedNameLine(src, e.Message)
	}
	e.Source = sourceLine(src, e.Line)
	return e
}

var quotedName = regexp.MustCompile(`"([A-Za-z_]\w*)"`)

func quotedNameLine(src, msg string) int {
	for _, m := range quotedName.FindAllStringSubmatch(msg, -1) {
		word := regexp.MustCompile(`\b` + m[1] + `\b`)
		found := 0
		for i, line := range strings.Split(src, "\n") {
			if word.MatchString(line) {
				if found != 0 {
					found = -1
					break
				}
				found = i + 1
			}
		}
		if found > 0 {
			return found
		}
	}
	return 0
}

var raiseCall = regexp.MustCompile(`raise_exception\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")`)

// raiseLine is the line of the first raise_exception call whose literal message (or the
// literal start of a concatenated one) begins msg; 0 when none does.
func raiseLine(src, msg string) int {
	for i, line := range strings.Split(src, "\n") {
		for _, m := range raiseCall.FindAllStringSubmatch(line, -1) {
			lit := m[1] + m[2]
			if lit != "" && strings.HasPrefix(msg, unescapeLiteral(lit)) {
				return i + 1
			}
		}
	}
	return 0
}

func unescapeLiteral(s string) string {
	r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\'`, "'", `\"`, `"`, `\\`, `\`)
	return r.Replace(s)
}

var blockTag = regexp.MustCompile(`\{%-?\s*(if|for|macro|call|filter|raw|generation|set|endif|endfor|endmacro|endcall|endfilter|endraw|endgeneration|endset)\b([^%]*)%\}`)

// unclosedBlockLine is the line of the innermost block opener left without its end tag,
// or 0 when every block is closed.
func unclosedBlockLine(src string) int {
	type opener struct{ kind, line int }
	kinds := map[string]int{"if": 1, "for": 2, "macro": 3, "call": 4, "filter": 5, "raw": 6, "generation": 7, "set": 8}
	var stack []opener
	for _, m := range blockTag.FindAllStringSubmatchIndex(src, -1) {
		word := src[m[2]:m[3]]
		line := strings.Count(src[:m[0]], "\n") + 1
		if k, ok := kinds[word]; ok {
			// Only a block set ({% set x %}...{% endset %}) has an end tag.
			if word == "set" && strings.Contains(src[m[4]:m[5]], "=") {
				continue
			}
			stack = append(stack, opener{k, line})
			continue
		}
		k := kinds[strings.TrimPrefix(word, "end")]
		if n := len(stack); n > 0 && stack[n-1].kind == k {
			stack = stack[:n-1]
		}
	}
	if len(stack) == 0 {
		return 0
	}
	return stack[len(stack)-1].line
}

// sourceLine is line n of src without surrounding blanks, shortened for error messages.
func sourceLine(src string, n int) string {
	lines := strings.Split(src, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	line := []rune(strings.TrimSpace(lines[n-1]))
	if len(line) > 100 {
		return string(line[:97]) + "..."
	}
	return string(line)
}
