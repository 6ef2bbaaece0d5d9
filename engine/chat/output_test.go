package chat

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseOutputThinking(t *testing.T) {
	cases := []struct {
		name              string
		text              string
		inThinking        bool
		reasoning, answer string
	}{
		{"complete block", "<think>\nLet me think.\n</think>\n\nThe answer is 4.", false, "Let me think.", "The answer is 4."},
		{"opened by the prompt", "Let me think.\n</think>\n\nThe answer is 4.", true, "Let me think.", "The answer is 4."},
		{"closing tag only, prompt state unknown", "Let me think.\n</think>\n\nThe answer is 4.", false, "Let me think.", "The answer is 4."},
		{"stopped inside, opened by the prompt", "Let me think about", true, "Let me think about", ""},
		{"stopped inside, opened by the model", "<think>\nLet me think about", false, "Let me think about", ""},
		{"no block", "Hello there.", false, "", "Hello there."},
		{"empty block", "<think>\n\n</think>\n\nHi", false, "", "Hi"},
		{"content keeps its indentation and trailing text", "plan\n</think>\n\n    x = 1\n", true, "plan", "    x = 1\n"},
		{"reasoning keeps inner newlines", "a\n\nb\n</think>\n\nc", true, "a\n\nb", "c"},
		{"text before <think> stays content", "Sure. <think>\nr\n</think>\n\nc", false, "r", "Sure. c"},
		{"a later <think> is text", "r\n</think>\n\nuse <think> tags", true, "r", "use <think> tags"},
		{"bare <tool_call> mention stays reasoning", "maybe a <tool_call> later", true, "maybe a <tool_call> later", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := ParseOutput(c.text, ParseOptions{InThinking: c.inThinking})
			if out.Reasoning != c.reasoning || out.Content != c.answer || len(out.ToolCalls) != 0 {
				t.Errorf("got reasoning %q, content %q, %d calls; want %q, %q", out.Reasoning, out.Content, len(out.ToolCalls), c.reasoning, c.answer)
			}
		})
	}
}

// Generation prompts rendered by transformers tell whether the model starts in reasoning.
func TestPromptOpensThink(t *testing.T) {
	qwen36 := gjson.ParseBytes(readOracle(t, "qwen36-template/golden.json"))
	qwen3 := gjson.ParseBytes(readOracle(t, "goldens/chat_templates.json"))
	cases := []struct {
		prompt string
		want   bool
	}{
		{qwen36.Get("simple.ok").Str, true},
		{qwen36.Get("no_system_nothink.ok").Str, false},
		{qwen3.Get("qwen3.#(name==user_genprompt_think).rendered").Str, false},
		{qwen3.Get("qwen3.#(name==user_genprompt_nothink).rendered").Str, false},
	}
	for i, c := range cases {
		if c.prompt == "" {
			t.Fatalf("case %d: golden prompt not found", i)
		}
		if got := PromptOpensThink(c.prompt); got != c.want {
			t.Errorf("case %d (%q...): got %v, want %v", i, c.prompt[max(0, len(c.prompt)-40):], got, c.want)
		}
	}
}

var weatherTools = []byte(`[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
	"properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "zip": {"type": "string"},
	"ratio": {"type": "number"}, "hourly": {"type": "boolean"}, "filters": {"type": "object"},
	"note": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "count": {"type": ["integer", "null"]}}}}}]`)

type wantCall struct{ name, args string }

func checkCalls(t *testing.T, out Output, content string, want ...wantCall) {
	t.Helper()
	if out.Content != content {
		t.Errorf("content %q, want %q", out.Content, content)
	}
	if len(out.ToolCalls) != len(want) {
		t.Fatalf("%d tool calls %+v, want %d", len(out.ToolCalls), out.ToolCalls, len(want))
	}
	idForm := regexp.MustCompile(`^call_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for i, w := range want {
		got := out.ToolCalls[i]
		if got.Type != "function" || got.Function.Name != w.name || got.Function.Arguments != w.args {
			t.Errorf("call %d: %+v, want %s %s", i, got, w.name, w.args)
		}
		if !json.Valid([]byte(got.Function.Arguments)) {
			t.Errorf("call %d: arguments %q are not JSON", i, got.Function.Arguments)
		}
		if !idForm.MatchString(got.ID) || seen[got.ID] {
			t.Errorf("call %d: id %q is malformed or repeated", i, got.ID)
		}
		seen[got.ID] = true
	}
}

func TestParseOutputXMLToolCalls(t *testing.T) {
	one := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
	t.Run("one call", func(t *testing.T) {
		checkCalls(t, ParseOutput(one, ParseOptions{Tools: weatherTools}), "", wantCall{"get_weather", `{"city": "Paris", "days": 3}`})
	})
	t.Run("after reasoning", func(t *testing.T) {
		out := ParseOutput("The user wants weather.\n</think>\n\n"+one, ParseOptions{InThinking: true, Tools: weatherTools})
		if out.Reasoning != "The user wants weather." {
			t.Errorf("reasoning %q", out.Reasoning)
		}
		checkCalls(t, out, "", wantCall{"get_weather", `{"city": "Paris", "days": 3}`})
	})
	t.Run("two calls after content", func(t *testing.T) {
		text := "Let me check.\n\n" + one + "\n<tool_call>\n<function=search>\n<parameter=query>\nnews in Paris\n</parameter>\n</function>\n</tool_call>"
		checkCalls(t, ParseOutput(text, ParseOptions{Tools: weatherTools}), "Let me check.",
			wantCall{"get_weather", `{"city": "Paris", "days": 3}`}, wantCall{"search", `{"query": "news in Paris"}`})
	})
	t.Run("values without a schema: JSON when they parse, else text", func(t *testing.T) {
		text := "<tool_call>\n<function=f>\n<parameter=opts>\n{\"hourly\": false, \"tags\": [\"a\", \"é\"]}\n</parameter>\n" +
			"<parameter=note>\nhello world\n</parameter>\n<parameter=n>\n3\n</parameter>\n<parameter=x>\n1.0\n</parameter>\n" +
			"<parameter=body>\nline 1\n\nline 2\n</parameter>\n<parameter=flag>\ntrue\n</parameter>\n</function>\n</tool_call>"
		checkCalls(t, ParseOutput(text, ParseOptions{}), "", wantCall{"f",
			`{"opts": {"hourly": false, "tags": ["a", "é"]}, "note": "hello world", "n": 3, "x": 1.0, "body": "line 1\n\nline 2", "flag": true}`})
	})
	t.Run("values typed by the schema", func(t *testing.T) {
		param := func(k, v string) string { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n" }
		text := "<tool_call>\n<function=get_weather>\n" + param("zip", "75001") + param("days", "three") + param("ratio", "2.0") +
			param("hourly", "True") + param("filters", `{"rain": null}`) + param("note", "None") + param("count", "null") +
			param("city", "null") + param("extra", "[1, 2]") + "</function>\n</tool_call>"
		checkCalls(t, ParseOutput(text, ParseOptions{Tools: weatherTools}), "", wantCall{"get_weather",
			`{"zip": "75001", "days": "three", "ratio": 2, "hourly": true, "filters": {"rain": null}, "note": null, "count": null, "city": "null", "extra": [1, 2]}`})
	})
	t.Run("a value may contain the closing tag", func(t *testing.T) {
		text := "<tool_call>\n<function=write>\n<parameter=code>\ns = \"</parameter>\"\n</parameter>\n</function>\n</tool_call>"
		checkCalls(t, ParseOutput(text, ParseOptions{}), "", wantCall{"write", `{"code": "s = \"</parameter>\""}`})
	})
	t.Run("tool call begun inside the reasoning", func(t *testing.T) {
		out := ParseOutput("I need the weather.\n"+one, ParseOptions{InThinking: true, Tools: weatherTools})
		if out.Reasoning != "I need the weather." {
			t.Errorf("reasoning %q", out.Reasoning)
		}
		checkCalls(t, out, "", wantCall{"get_weather", `{"city": "Paris", "days": 3}`})
	})
}

func TestParseOutputMalformedToolCallsStayText(t *testing.T) {
	cases := map[string]string{
		"unterminated":            "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n",
		"no </function>":          "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>",
		"no </parameter>":         "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>",
		"template syntax as name": "Write <tool_call>\n<function={{ name }}>\n</function>\n</tool_call> in the template.",
		"prose in the block":      "Use <tool_call>like this</tool_call> to call.",
		"bad JSON":                "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",
		"JSON without a name":     "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
		"JSON, text after it":     "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} trailing\n</tool_call>",
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			checkCalls(t, ParseOutput(text, ParseOptions{}), text)
		})
	}
	t.Run("a malformed block before a good one", func(t *testing.T) {
		bad := "Use <tool_call>like this</tool_call>.\n"
		good := "<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n</function>\n</tool_call>"
		checkCalls(t, ParseOutput(bad+good+"\n\nDone.", ParseOptions{}), "Use <tool_call>like this</tool_call>.\n\nDone.", wantCall{"f", `{"a": "x"}`})
	})
}

func TestParseOutputJSONToolCalls(t *testing.T) {
	text := "I will look it up.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\": \"Paris\", \"precise\": 1.0, \"z\": [1e5]}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"get_date\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\"}\n</tool_call>"
	checkCalls(t, ParseOutput(text, ParseOptions{}), "I will look it up.",
		wantCall{"get_time", `{"city": "Paris", "precise": 1.0, "z": [100000.0]}`},
		wantCall{"get_date", `{"tz": "CET"}`},
		wantCall{"ping", `{}`})
}

// The tool call in the Qwen3.5/3.6 golden prompt, read back with the case's tools, gives the
// arguments the case was rendered from.
func TestParseOutputReadsRenderedToolCall(t *testing.T) {
	var vars gjson.Result
	for _, c := range gjson.ParseBytes(readOracle(t, "qwen36-template/cases.json")).Array() {
		if c.Get("name").Str == "tools" {
			vars = c.Get("vars")
		}
	}
	rendered := gjson.GetBytes(readOracle(t, "qwen36-template/golden.json"), "tools.ok").Str
	// The last block is the assistant's call; the others are in the system turn's instructions.
	blocks := regexp.MustCompile(`(?s)<tool_call>.*?</tool_call>`).FindAllString(rendered, -1)
	if !vars.Exists() || len(blocks) == 0 {
		t.Fatal("tools case or its tool call not found in the goldens")
	}
	out := ParseOutput(blocks[len(blocks)-1], ParseOptions{Tools: []byte(vars.Get("tools").Raw)})
	call := vars.Get("messages.2.tool_calls.0.function")
	args, err := valueFromJSON(call.Get("arguments").Raw)
	if err != nil {
		t.Fatal(err)
	}
	want, err := encodePyJSON(args)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, out, "", wantCall{call.Get("name").Str, want})
}

func TestOutputJSON(t *testing.T) {
	out := Output{Reasoning: "r", Content: "c", ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "f", Arguments: "{}"}}}}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"reasoning_content":"r","content":"c","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(Output{}); string(b) != `{"content":""}` {
		t.Errorf("empty output: %s", b)
	}
}

func BenchmarkParseOutput(b *testing.B) {
	text := "The user wants the weather.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
	opts := ParseOptions{InThinking: true, Tools: weatherTools}
	for b.Loop() {
		ParseOutput(text, opts)
	}
}
