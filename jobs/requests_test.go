package jobs

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"petal/engine/chat"
)

const userMsg = `"messages":[{"role":"user","content":"x"}]`

// A chat_template_kwargs key the request itself sets would silently replace
// the validated field in the template's variables.
func TestTemplateKwargsCannotReplaceRequestFields(t *testing.T) {
	for _, key := range []string{"messages", "tools", "add_generation_prompt", "raise_exception"} {
		line := `{` + userMsg + `,"chat_template_kwargs":{"enable_thinking":false,"` + key + `":[{"role":"user","content":"evil"}]}}`
		_, lerr := ParseLine([]byte(line), 1)
		if lerr == nil {
			t.Errorf("chat_template_kwargs.%s accepted", key)
			continue
		}
		if lerr.Param != "chat_template_kwargs" || !strings.Contains(lerr.Message, `"`+key+`"`) || lerr.Code != CodeInvalidValue {
			t.Errorf("chat_template_kwargs.%s: param %q code %q message %q", key, lerr.Param, lerr.Code, lerr.Message)
		}
	}
	// with the enable_thinking shortcut too (the kwargs are rebuilt then)
	_, lerr := ParseLine([]byte(`{`+userMsg+`,"enable_thinking":true,"chat_template_kwargs":{"messages":[]}}`), 1)
	if lerr == nil || lerr.Param != "chat_template_kwargs" {
		t.Errorf("shortcut + kwargs.messages: %+v", lerr)
	}
	// other keys are the template's own switches and pass
	if _, lerr := ParseLine([]byte(`{`+userMsg+`,"chat_template_kwargs":{"preserve_thinking":true,"bos_token":"<s>"}}`), 1); lerr != nil {
		t.Errorf("ordinary kwargs refused: %v", lerr)
	}
}

func nested(depth int, leaf string) string {
	return strings.Repeat("[", depth) + leaf + strings.Repeat("]", depth)
}

// Values the chat template receives are capped in depth, quickly, with the
// field named; the cap agrees with the template's own.
func TestNestingDepthRefused(t *testing.T) {
	if MaxNesting != chat.MaxValueDepth {
		t.Fatalf("MaxNesting %d != chat.MaxValueDepth %d", MaxNesting, chat.MaxValueDepth)
	}
	deep := nested(100000, "1")
	cases := []struct{ name, line, param string }{
		{"kwargs", `{` + userMsg + `,"chat_template_kwargs":{"x":` + deep + `}}`, "chat_template_kwargs.x"},
		{"kwargs at limit+1", `{` + userMsg + `,"chat_template_kwargs":{"x":` + nested(MaxNesting+1, "") + `}}`, "chat_template_kwargs.x"},
		{"message extra field", `{"messages":[{"role":"user","content":"x"},{"role":"user","content":"y","meta":` + deep + `}]}`, "messages[1]"},
		{"tool parameters", `{` + userMsg + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"a":` + deep + `}}}]}`, "tools[0]"},
		{"tool call arguments string", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":` +
			jsonString(`{"a":`+deep+`}`) + `}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
	}
	for _, c := range cases {
		start := time.Now()
		_, lerr := ParseLine([]byte(c.line), 1)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refused after %v", c.name, d)
		}
		if lerr == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if lerr.Param != c.param || lerr.Code != CodeInvalidValue || !strings.Contains(lerr.Message, "nested") || !strings.Contains(lerr.Message, c.param) {
			t.Errorf("%s: param %q code %q message %q", c.name, lerr.Param, lerr.Code, lerr.Message)
		}
	}
	// exactly at the cap is fine, in every place
	ok := nested(MaxNesting, "1")
	for _, line := range []string{
		`{` + userMsg + `,"chat_template_kwargs":{"x":` + ok + `}}`,
		`{"messages":[{"role":"user","content":"x","meta":` + nested(MaxNesting-2, "1") + `}]}`,
		`{` + userMsg + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"a":` + nested(MaxNesting-4, "1") + `}}}]}`,
	} {
		if _, lerr := ParseLine([]byte(line), 1); lerr != nil {
			t.Errorf("depth at the cap refused: %v", lerr)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// max_tokens 0 with echo scores the prompt (as the legacy completions API
// and vLLM do); without echo, or for chat, it stays refused.
func TestMaxTokensZeroWithEcho(t *testing.T) {
	job, lerr := ParseLine([]byte(`{"prompt":"x","max_tokens":0,"echo":true,"logprobs":1}`), 1)
	if lerr != nil {
		t.Fatalf("echo scoring refused: %v", lerr)
	}
	if job.Params.MaxTokens == nil || *job.Params.MaxTokens != 0 || !job.Params.Echo || !job.ScoreOnly() {
		t.Errorf("params %+v", job.Params)
	}
	for _, line := range []string{
		`{"prompt":"x","max_tokens":0}`,
		`{"prompt":"x","max_tokens":0,"echo":false,"logprobs":1}`,
		`{` + userMsg + `,"max_tokens":0}`,
		`{"prompt":"x","max_tokens":-1,"echo":true}`,
	} {
		_, lerr := ParseLine([]byte(line), 1)
		if lerr == nil || lerr.Param != "max_tokens" || lerr.Code != CodeInvalidValue {
			t.Errorf("%s: %+v", line, lerr)
		}
	}
	if job, _ := ParseLine([]byte(`{"prompt":"x","max_tokens":1,"echo":true}`), 1); job.ScoreOnly() {
		t.Errorf("max_tokens 1 is not scoring only")
	}
}

// A list of prompts gives one choice per prompt.
func TestPromptLists(t *testing.T) {
	cases := []struct {
		prompt string
		want   []Prompt
	}{
		{`["a","b"]`, []Prompt{{Text: "a"}, {Text: "b"}}},
		{`["a","b","c"]`, []Prompt{{Text: "a"}, {Text: "b"}, {Text: "c"}}},
		{`[[1,2],[3]]`, []Prompt{{IDs: []int32{1, 2}}, {IDs: []int32{3}}}},
		{`"one"`, []Prompt{{Text: "one"}}},
		{`["one"]`, []Prompt{{Text: "one"}}},
		{`[5,6]`, []Prompt{{IDs: []int32{5, 6}}}},
		{`[[5,6]]`, []Prompt{{IDs: []int32{5, 6}}}},
	}
	for _, c := range cases {
		job, lerr := ParseLine([]byte(`{"prompt":`+c.prompt+`}`), 1)
		if lerr != nil {
			t.Errorf("%s: %v", c.prompt, lerr)
			continue
		}
		got := job.CompletionPrompts()
		if !slices.EqualFunc(got, c.want, func(a, b Prompt) bool { return a.Text == b.Text && slices.Equal(a.IDs, b.IDs) }) {
			t.Errorf("%s: prompts %+v, want %+v", c.prompt, got, c.want)
		}
		if len(c.want) == 1 && (job.Prompt != c.want[0].Text || !slices.Equal(job.PromptIDs, c.want[0].IDs)) {
			t.Errorf("%s: a single prompt is Prompt/PromptIDs, got %q %v", c.prompt, job.Prompt, job.PromptIDs)
		}
	}
	errs := []struct{ prompt, param, want string }{
		{`["a",""]`, "prompt[1]", `field "prompt[1]" must not be empty`},
		{`["a",[1]]`, "prompt[1]", `field "prompt[1]" must be a string`},
		{`[[1],"a"]`, "prompt[1]", `field "prompt[1]" must be an array of token ids`},
		{`[[1],[]]`, "prompt[1]", `field "prompt[1]" must not be empty`},
		{`[[1],[2,-1]]`, "prompt[1]", `token id -1 out of range at index 1`},
		{`[[1],[2,"x"]]`, "prompt[1]", `got string at index 1`},
	}
	for _, c := range errs {
		_, lerr := ParseLine([]byte(`{"prompt":`+c.prompt+`}`), 1)
		if lerr == nil || lerr.Param != c.param || !strings.Contains(lerr.Message, c.want) || lerr.Code == "" {
			t.Errorf("%s: %+v, want param %q message containing %q", c.prompt, lerr, c.param, c.want)
		}
	}
}

// The developer role (OpenAI's newer name for system instructions) is
// rendered as system, with a warning.
func TestDeveloperRoleBecomesSystem(t *testing.T) {
	line := `{"messages":[{"role":"developer","content":"Be brief.","name":"d"},{"role":"user","content":"Hi"},{"role":"developer","content":[{"type":"text","text":"x"}]}]}`
	job, lerr := ParseLine([]byte(line), 1)
	if lerr != nil {
		t.Fatal(lerr)
	}
	var msgs []map[string]any
	if err := json.Unmarshal(job.Messages, &msgs); err != nil {
		t.Fatalf("messages %s: %v", job.Messages, err)
	}
	if len(msgs) != 3 || msgs[0]["role"] != "system" || msgs[0]["content"] != "Be brief." || msgs[0]["name"] != "d" ||
		msgs[1]["role"] != "user" || msgs[2]["role"] != "system" {
		t.Errorf("messages %s", job.Messages)
	}
	if len(job.Warnings) != 1 || !strings.Contains(job.Warnings[0], "developer") || !strings.Contains(job.Warnings[0], "messages[0], messages[2]") {
		t.Errorf("warnings %q", job.Warnings)
	}
	job, _ = ParseLine([]byte(`{`+userMsg+`}`), 1)
	if len(job.Warnings) != 0 || string(job.Messages) != `[{"role":"user","content":"x"}]` {
		t.Errorf("a request without developer messages changed: %s %q", job.Messages, job.Warnings)
	}
}

// The legacy top_logprobs object keeps the order it is given (most likely
// first), not a map's; a repeated token text keeps its first entry.
func TestTopTokensOrder(t *testing.T) {
	tt := TopTokens{{"zeta", -0.1}, {"alpha", -1}, {"\ufffd", -2}, {"mid", -3}, {"\ufffd", -4}}
	b, err := json.Marshal(tt)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"zeta":-0.1,"alpha":-1,"\ufffd":-2,"mid":-3}`; string(b) != strings.Replace(want, `\ufffd`, "\ufffd", 1) {
		t.Errorf("got %s", b)
	}
	if b, _ := json.Marshal(TopTokens(nil)); string(b) != "null" {
		t.Errorf("nil: %s", b)
	}
	if b, _ := json.Marshal(TopTokens{}); string(b) != "{}" {
		t.Errorf("empty: %s", b)
	}
}

// Timings summed over several prompts count each prompt's first token out
// of the decode rate.
func TestTimingsFinishRuns(t *testing.T) {
	tm := Timings{PredictedN: 12, PredictedMS: 100}
	tm.FinishRuns(3)
	if tm.PredictedPerSecond != 90 {
		t.Errorf("rate %v, want 90", tm.PredictedPerSecond)
	}
}
