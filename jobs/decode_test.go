package jobs

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

const chatBody = `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`

func TestParseLineChatForms(t *testing.T) {
	lines := map[string]string{
		"envelope": `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m",` + chatBody + `,"max_tokens":7,"temperature":0.5}}`,
		"bare":     `{"custom_id":"a","model":"m",` + chatBody + `,"max_tokens":7,"temperature":0.5}`,
	}
	for form, line := range lines {
		t.Run(form, func(t *testing.T) {
			job, lerr := ParseLine([]byte(line), 3)
			if lerr != nil {
				t.Fatalf("ParseLine: %v", lerr)
			}
			if job.Envelope != (form == "envelope") || job.Kind != Chat || job.Line != 3 || job.CustomID != "a" || job.Model != "m" {
				t.Errorf("job identity = %+v", job)
			}
			var msgs []map[string]string
			if err := json.Unmarshal(job.Messages, &msgs); err != nil || len(msgs) != 2 || msgs[1]["content"] != "Hi" {
				t.Errorf("messages = %s (%v)", job.Messages, err)
			}
			if job.Params.MaxTokens == nil || *job.Params.MaxTokens != 7 || job.Params.Temperature == nil || *job.Params.Temperature != 0.5 {
				t.Errorf("params = %+v", job.Params)
			}
			if job.Params.TopP != nil || job.Params.Seed != nil || job.Prompt != "" || job.PromptIDs != nil || len(job.Ignored) != 0 {
				t.Errorf("unexpected fields set: %+v", job)
			}
		})
	}
}

func TestParseLineCompletionForms(t *testing.T) {
	lines := map[string]string{
		"envelope": `{"custom_id":"c","method":"post","url":"/v1/completions","body":{"prompt":"Once","logprobs":3,"echo":true,"stop":"\n"}}`,
		"bare":     `{"custom_id":"c","prompt":"Once","logprobs":3,"echo":true,"stop":"\n"}`,
	}
	for form, line := range lines {
		t.Run(form, func(t *testing.T) {
			job, lerr := ParseLine([]byte(line), 1)
			if lerr != nil {
				t.Fatalf("ParseLine: %v", lerr)
			}
			if job.Kind != Completion || job.Envelope != (form == "envelope") || job.Prompt != "Once" {
				t.Errorf("job = %+v", job)
			}
			p := job.Params
			if !p.Logprobs || p.TopLogprobs != 3 || !p.Echo || !slices.Equal(p.Stop, []string{"\n"}) {
				t.Errorf("params = %+v", p)
			}
		})
	}
}

func TestParsePromptShapes(t *testing.T) {
	cases := []struct {
		prompt string
		text   string
		ids    []int32
	}{
		{`"abc"`, "abc", nil},
		{`["abc"]`, "abc", nil},
		{`[1, 2, 151643]`, "", []int32{1, 2, 151643}},
		{`[[5, 6]]`, "", []int32{5, 6}},
		{`[7.0]`, "", []int32{7}},
	}
	for _, c := range cases {
		job, lerr := ParseLine([]byte(`{"prompt":`+c.prompt+`}`), 1)
		if lerr != nil {
			t.Errorf("prompt %s: %v", c.prompt, lerr)
			continue
		}
		if job.Prompt != c.text || !slices.Equal(job.PromptIDs, c.ids) {
			t.Errorf("prompt %s: got %q %v", c.prompt, job.Prompt, job.PromptIDs)
		}
	}
}

func TestParseParamsAll(t *testing.T) {
	line := `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":9,"max_tokens":9,"temperature":0,
		"top_p":1,"top_k":-1,"min_p":0.05,"presence_penalty":-2,"frequency_penalty":2,"repetition_penalty":1.1,
		"seed":-12345678901,"stop":["a","b","c","d","e"],"logprobs":true,"top_logprobs":20,"n":1,"stream":false,
		"session":"s1","fork_from":"s0","chat_template_kwargs":{"enable_thinking":false,"x":1},
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`
	job, lerr := ParseLine([]byte(line), 1)
	if lerr != nil {
		t.Fatal(lerr)
	}
	p := job.Params
	if *p.MaxTokens != 9 || *p.Temperature != 0 || *p.TopP != 1 || *p.TopK != -1 || *p.MinP != 0.05 ||
		*p.PresencePenalty != -2 || *p.FrequencyPenalty != 2 || *p.RepetitionPenalty != 1.1 || *p.Seed != -12345678901 ||
		len(p.Stop) != 5 || !p.Logprobs || p.TopLogprobs != 20 || p.Echo {
		t.Errorf("params = %+v", p)
	}
	if job.Session != "s1" || job.ForkFrom != "s0" {
		t.Errorf("session = %q fork_from = %q", job.Session, job.ForkFrom)
	}
	if string(job.TemplateKwargs) != `{"enable_thinking":false,"x":1}` || !strings.Contains(string(job.Tools), `"name":"f"`) {
		t.Errorf("kwargs = %s tools = %s", job.TemplateKwargs, job.Tools)
	}
}

func TestParseNullMeansUnset(t *testing.T) {
	job, lerr := ParseLine([]byte(`{"messages":[{"role":"user","content":"x"}],"temperature":null,"stop":null,"seed":null,"n":null,"logprobs":null}`), 1)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if job.Params.Temperature != nil || job.Params.Stop != nil || job.Params.Seed != nil || job.Params.Logprobs {
		t.Errorf("params = %+v", job.Params)
	}
}

func TestEnableThinkingShortcut(t *testing.T) {
	cases := []struct{ extra, want string }{
		{`"enable_thinking":false`, `{"enable_thinking":false}`},
		{`"enable_thinking":true,"chat_template_kwargs":{"a":"b"}`, `{"a":"b","enable_thinking":true}`},
		{`"enable_thinking":true,"chat_template_kwargs":{"enable_thinking":true}`, `{"enable_thinking":true}`},
		{`"chat_template_kwargs":{"enable_thinking":false}`, `{"enable_thinking":false}`},
	}
	for _, c := range cases {
		job, lerr := ParseLine([]byte(`{"messages":[{"role":"user","content":"x"}],`+c.extra+`}`), 1)
		if lerr != nil {
			t.Errorf("%s: %v", c.extra, lerr)
			continue
		}
		if string(job.TemplateKwargs) != c.want {
			t.Errorf("%s: kwargs %s, want %s", c.extra, job.TemplateKwargs, c.want)
		}
	}
}

func TestIgnoredFields(t *testing.T) {
	line := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","extra":1,"body":{"model":"m","user":"u",` +
		chatBody + `,"metadata":{},"response_format":{"type":"json_object"},"echo":true,"custom_id":"inner"}}`
	job, lerr := ParseLine([]byte(line), 1)
	if lerr != nil {
		t.Fatal(lerr)
	}
	want := []string{"extra", "user", "metadata", "response_format", "echo", "custom_id"}
	if !slices.Equal(job.Ignored, want) {
		t.Errorf("ignored = %v, want %v", job.Ignored, want)
	}
	// prompt-side fields are ignored on chat and the reverse.
	job, lerr = ParseLine([]byte(`{"prompt":"p","top_logprobs":2,"tools":[],"suffix":"s"}`), 1)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if !slices.Equal(job.Ignored, []string{"top_logprobs", "tools", "suffix"}) {
		t.Errorf("ignored = %v", job.Ignored)
	}
}

func TestParseLineErrors(t *testing.T) {
	msg := `"messages":[{"role":"user","content":"x"}]`
	env := func(body string) string {
		return `{"custom_id":"e","method":"POST","url":"/v1/chat/completions","body":` + body + `}`
	}
	cases := []struct {
		name, line, param, want string
	}{
		{"not json", `{"messages": [}`, "", "not valid JSON"},
		{"bad utf8", "{\"prompt\":\"\xff\"}", "", "not valid UTF-8"},
		{"not object", `[1,2]`, "", "must be a JSON object, got array"},
		{"neither", `{"model":"m"}`, "messages", `one of fields "messages" (chat) or "prompt" (completions) is required`},
		{"both", `{` + msg + `,"prompt":"p"}`, "prompt", `fields "messages" and "prompt" exclude each other`},
		{"custom_id type", `{"custom_id":5,` + msg + `}`, "custom_id", `field "custom_id" must be a string, got number`},
		{"custom_id empty", `{"custom_id":"",` + msg + `}`, "custom_id", `field "custom_id" must not be empty`},
		{"model type", `{"model":1,` + msg + `}`, "model", `field "model" must be a string, got number`},

		{"envelope no custom_id", `{"method":"POST","url":"/v1/completions","body":{"prompt":"p"}}`, "custom_id", `field "custom_id" is required`},
		{"envelope no method", `{"custom_id":"e","url":"/v1/completions","body":{"prompt":"p"}}`, "method", `field "method" is required`},
		{"envelope GET", `{"custom_id":"e","method":"GET","url":"/v1/completions","body":{"prompt":"p"}}`, "method", `field "method" must be "POST", got "GET"`},
		{"envelope url", `{"custom_id":"e","method":"POST","url":"/v1/embeddings","body":{"input":"p"}}`, "url", `field "url" must be "/v1/chat/completions" or "/v1/completions", got "/v1/embeddings"`},
		{"envelope no url", `{"custom_id":"e","method":"POST","body":{"prompt":"p"}}`, "url", `field "url" is required`},
		{"envelope no body", `{"custom_id":"e","method":"POST","url":"/v1/completions"}`, "body", `field "body" is required`},
		{"envelope body type", `{"custom_id":"e","method":"POST","url":"/v1/completions","body":"p"}`, "body", `field "body" must be an object, got string`},
		{"envelope chat without messages", env(`{"prompt":"p"}`), "messages", `field "messages" is required for /v1/chat/completions`},
		{"envelope completion without prompt", `{"custom_id":"e","method":"POST","url":"/v1/completions","body":{` + msg + `}}`, "prompt", `field "prompt" is required for /v1/completions`},

		{"messages type", `{"messages":"hi"}`, "messages", `field "messages" must be an array, got string`},
		{"messages empty", `{"messages":[]}`, "messages", `field "messages" must not be empty`},
		{"message type", `{"messages":["hi"]}`, "messages[0]", `field "messages[0]" must be an object, got string`},
		{"role missing", `{"messages":[{"content":"x"}]}`, "messages[0].role", `field "messages[0].role" is required`},
		{"role type", `{"messages":[{"role":1,"content":"x"}]}`, "messages[0].role", `field "messages[0].role" must be a string, got number`},
		{"role value", `{"messages":[{"role":"user","content":"x"},{"role":"bot","content":"y"}]}`, "messages[1].role", `field "messages[1].role" must be one of system, user, assistant, tool, developer, got "bot"`},
		{"content missing", `{"messages":[{"role":"user"}]}`, "messages[0].content", `field "messages[0].content" is required for role "user"`},
		{"content type", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", `field "messages[0].content" must be a string, an array of content parts or null, got number`},
		{"part type", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].type", `field "messages[0].content[0].type" must be "text"`},
		{"part text", `{"messages":[{"role":"user","content":[{"type":"text","text":3}]}]}`, "messages[0].content[0].text", `field "messages[0].content[0].text" must be a string, got number`},
		{"part not object", `{"messages":[{"role":"user","content":["x"]}]}`, "messages[0].content[0]", `field "messages[0].content[0]" must be an object, got string`},
		{"tool_calls type", `{"messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", `field "messages[0].tool_calls" must be an array, got object`},
		{"tool_calls name", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name", `field "messages[0].tool_calls[0].function.name" must be a non-empty string`},
		{"tool_calls args", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":1}}]}]}`, "messages[0].tool_calls[0].function.arguments", `field "messages[0].tool_calls[0].function.arguments" must be a string or an object, got number`},
		{"reasoning type", `{"messages":[{"role":"assistant","content":"a","reasoning_content":1}]}`, "messages[0].reasoning_content", `field "messages[0].reasoning_content" must be a string, got number`},
		{"tools type", `{` + msg + `,"tools":{}}`, "tools", `field "tools" must be an array, got object`},
		{"tools kind", `{` + msg + `,"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, "tools[0].type", `field "tools[0].type" must be "function", got "retrieval"`},
		{"tools function", `{` + msg + `,"tools":[{"type":"function"}]}`, "tools[0].function", `field "tools[0].function" is required`},
		{"kwargs type", `{` + msg + `,"chat_template_kwargs":[]}`, "chat_template_kwargs", `field "chat_template_kwargs" must be an object, got array`},
		{"enable_thinking type", `{` + msg + `,"enable_thinking":"yes"}`, "enable_thinking", `field "enable_thinking" must be a boolean, got string`},
		{"enable_thinking disagrees", `{` + msg + `,"enable_thinking":true,"chat_template_kwargs":{"enable_thinking":false}}`, "enable_thinking", `field "enable_thinking" disagrees with "chat_template_kwargs.enable_thinking"`},

		{"prompt type", `{"prompt":{}}`, "prompt", `field "prompt" must be a string, an array of token ids, or an array of either, got object`},
		{"prompt empty", `{"prompt":""}`, "prompt", `field "prompt" must not be empty`},
		{"prompt empty array", `{"prompt":[]}`, "prompt", `field "prompt" must not be empty`},
		{"prompt mixed", `{"prompt":[1,"a"]}`, "prompt", `got string at index 1`},
		{"prompt negative id", `{"prompt":[1,-2]}`, "prompt", `token id -2 out of range at index 1`},
		{"prompt huge id", `{"prompt":[4294967296]}`, "prompt", `token id 4294967296 out of range`},
		{"prompt fractional id", `{"prompt":[1.5]}`, "prompt", `field "prompt" must be an integer, got 1.5`},

		{"max_tokens type", `{` + msg + `,"max_tokens":"5"}`, "max_tokens", `field "max_tokens" must be an integer, got string`},
		{"max_tokens fraction", `{` + msg + `,"max_tokens":2.5}`, "max_tokens", `field "max_tokens" must be an integer, got 2.5`},
		{"max_tokens zero", `{` + msg + `,"max_tokens":0}`, "max_tokens", `field "max_tokens" must be at least 1, got 0`},
		{"max_completion_tokens zero", `{` + msg + `,"max_completion_tokens":-3}`, "max_completion_tokens", `field "max_completion_tokens" must be at least 1, got -3`},
		{"max tokens disagree", `{` + msg + `,"max_tokens":5,"max_completion_tokens":6}`, "max_completion_tokens", `fields "max_tokens" and "max_completion_tokens" disagree (5 and 6)`},
		{"temperature type", `{` + msg + `,"temperature":"hot"}`, "temperature", `field "temperature" must be a number, got string`},
		{"temperature high", `{` + msg + `,"temperature":2.5}`, "temperature", `field "temperature" must be between 0 and 2, got 2.5`},
		{"temperature negative", `{` + msg + `,"temperature":-0.1}`, "temperature", `field "temperature" must be between 0 and 2, got -0.1`},
		{"temperature overflow", `{` + msg + `,"temperature":1e999}`, "temperature", `field "temperature" is out of range`},
		{"top_p zero", `{` + msg + `,"top_p":0}`, "top_p", `field "top_p" must be greater than 0 and at most 1, got 0`},
		{"top_p high", `{` + msg + `,"top_p":1.01}`, "top_p", `field "top_p" must be greater than 0 and at most 1, got 1.01`},
		{"top_k low", `{` + msg + `,"top_k":-2}`, "top_k", `field "top_k" must be -1 (off) or greater, got -2`},
		{"top_k type", `{` + msg + `,"top_k":true}`, "top_k", `field "top_k" must be an integer, got boolean`},
		{"min_p high", `{` + msg + `,"min_p":1.5}`, "min_p", `field "min_p" must be between 0 and 1, got 1.5`},
		{"presence high", `{` + msg + `,"presence_penalty":2.1}`, "presence_penalty", `field "presence_penalty" must be between -2 and 2, got 2.1`},
		{"frequency low", `{` + msg + `,"frequency_penalty":-3}`, "frequency_penalty", `field "frequency_penalty" must be between -2 and 2, got -3`},
		{"repetition zero", `{` + msg + `,"repetition_penalty":0}`, "repetition_penalty", `field "repetition_penalty" must be greater than 0, got 0`},
		{"seed type", `{` + msg + `,"seed":"42"}`, "seed", `field "seed" must be an integer, got string`},
		{"seed overflow", `{` + msg + `,"seed":1e30}`, "seed", `field "seed" is out of range`},
		{"stop type", `{` + msg + `,"stop":5}`, "stop", `field "stop" must be a string or an array of strings, got number`},
		{"stop element", `{` + msg + `,"stop":["a",1]}`, "stop", `got number at index 1`},
		{"stop empty", `{` + msg + `,"stop":""}`, "stop", `field "stop" must not be an empty string`},
		{"stop empty element", `{` + msg + `,"stop":["a",""]}`, "stop", `field "stop" must not contain an empty string (index 1)`},
		{"n", `{` + msg + `,"n":2}`, "n", `field "n" must be 1 (one choice per request), got 2`},
		{"stream", `{` + msg + `,"stream":true}`, "stream", `field "stream" must be false: streaming is not supported in batch`},
		{"stream type", `{` + msg + `,"stream":"no"}`, "stream", `field "stream" must be a boolean, got string`},
		{"chat logprobs type", `{` + msg + `,"logprobs":5}`, "logprobs", `field "logprobs" must be a boolean, got number`},
		{"top_logprobs range", `{` + msg + `,"logprobs":true,"top_logprobs":21}`, "top_logprobs", `field "top_logprobs" must be between 0 and 20, got 21`},
		{"top_logprobs without logprobs", `{` + msg + `,"top_logprobs":2}`, "top_logprobs", `field "top_logprobs" needs "logprobs": true`},
		{"completion logprobs type", `{"prompt":"p","logprobs":true}`, "logprobs", `field "logprobs" must be an integer between 0 and 20 for /v1/completions, got boolean`},
		{"completion logprobs range", `{"prompt":"p","logprobs":21}`, "logprobs", `field "logprobs" must be between 0 and 20, got 21`},
		{"echo type", `{"prompt":"p","echo":1}`, "echo", `field "echo" must be a boolean, got number`},
		{"session type", `{` + msg + `,"session":1}`, "session", `field "session" must be a string, got number`},
		{"session empty", `{` + msg + `,"session":""}`, "session", `field "session" must not be empty`},
		{"fork_from type", `{` + msg + `,"fork_from":[]}`, "fork_from", `field "fork_from" must be a string, got array`},
		{"envelope body field", env(`{` + msg + `,"temperature":9}`), "temperature", `field "temperature" must be between 0 and 2, got 9`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job, lerr := ParseLine([]byte(c.line), 4)
			if lerr == nil {
				t.Fatalf("accepted: %+v", job)
			}
			if job != nil {
				t.Errorf("got both a job and an error")
			}
			if lerr.Line != 4 || lerr.Param != c.param || !strings.Contains(lerr.Message, c.want) || lerr.Code == "" {
				t.Errorf("got line %d param %q code %q message %q\nwant param %q message containing %q",
					lerr.Line, lerr.Param, lerr.Code, lerr.Message, c.param, c.want)
			}
			if c.param != "" && !strings.Contains(lerr.Message, c.param) {
				t.Errorf("message %q does not name field %q", lerr.Message, c.param)
			}
		})
	}
}

func TestLineErrorIdentity(t *testing.T) {
	_, lerr := ParseLine([]byte(`{"custom_id":"x","method":"POST","url":"/v1/chat/completions","body":{"messages":[],"n":3}}`), 8)
	if lerr == nil || lerr.CustomID != "x" || !lerr.Envelope || lerr.Line != 8 {
		t.Fatalf("lerr = %+v", lerr)
	}
	if got := lerr.Error(); got != `jobs: line 8: field "messages" must not be empty` {
		t.Errorf("Error() = %q", got)
	}
	_, lerr = ParseLine([]byte(`{"custom_id":"y","prompt":5}`), 2)
	if lerr == nil || lerr.CustomID != "y" || lerr.Envelope {
		t.Fatalf("lerr = %+v", lerr)
	}
	_, lerr = ParseLine([]byte(`{"custom_id":"y","prompt":`), 2)
	if lerr == nil || lerr.CustomID != "" || lerr.Code != codeInvalidJSON || !strings.Contains(lerr.Message, "at byte") {
		t.Fatalf("lerr = %+v", lerr)
	}
}
