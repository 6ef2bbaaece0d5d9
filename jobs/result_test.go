package jobs

import (
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
)

// asMap round-trips v through JSON into generic maps.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("unmarshal %s: %v", raw, err)
	}
	return m
}

func wantKeys(t *testing.T, what string, v any, want ...string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", what, v)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s keys = %v, want %v", what, got, want)
	}
	return m
}

var timingKeys = []string{"prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
	"predicted_per_second", "cache_n", "load_ms", "restore_ms", "save_ms", "ttft_ms", "total_ms"}

func fullChat() *ChatCompletion {
	return &ChatCompletion{
		ID: "chatcmpl-1", Created: 1700000000, Model: "qwen",
		Choices: []ChatChoice{{
			Message: ChatMessage{
				Content:          new("4"),
				ReasoningContent: "2+2",
				ToolCalls:        []ToolCall{{ID: "call_1", Function: FunctionCall{Name: "add", Arguments: `{"a":2}`}}},
			},
			Logprobs: &ChatLogprobs{Content: []TokenLogprob{{
				Token: "4", Logprob: -0.25, Bytes: TokenBytes("4"),
				TopLogprobs: []TopLogprob{{Token: "4", Logprob: -0.25, Bytes: TokenBytes("4")}, {Token: "é", Logprob: Logprob(math.Inf(-1)), Bytes: TokenBytes("é")}},
			}}},
			FinishReason: FinishToolCalls,
		}},
		Usage:   NewUsage(10, 5, 3, 2),
		Timings: Timings{PromptN: 7, PromptMS: 3.5, CacheN: 3},
	}
}

func TestChatCompletionFieldNames(t *testing.T) {
	m := asMap(t, fullChat())
	wantKeys(t, "chat.completion", m, "id", "object", "created", "model", "choices", "usage", "timings")
	if m["object"] != "chat.completion" {
		t.Errorf("object = %v", m["object"])
	}
	choice := wantKeys(t, "choice", m["choices"].([]any)[0], "index", "message", "logprobs", "finish_reason")
	if choice["finish_reason"] != "tool_calls" {
		t.Errorf("finish_reason = %v", choice["finish_reason"])
	}
	msg := wantKeys(t, "message", choice["message"], "role", "content", "reasoning_content", "tool_calls")
	if msg["role"] != "assistant" || msg["content"] != "4" || msg["reasoning_content"] != "2+2" {
		t.Errorf("message = %v", msg)
	}
	call := wantKeys(t, "tool call", msg["tool_calls"].([]any)[0], "id", "type", "function")
	if call["type"] != "function" {
		t.Errorf("tool call type = %v", call["type"])
	}
	fn := wantKeys(t, "function", call["function"], "name", "arguments")
	if fn["arguments"] != `{"a":2}` {
		t.Errorf("arguments = %#v, want a string", fn["arguments"])
	}
	lp := wantKeys(t, "logprobs", choice["logprobs"], "content")
	tok := wantKeys(t, "token logprob", lp["content"].([]any)[0], "token", "logprob", "bytes", "top_logprobs")
	if tok["logprob"] != -0.25 || !slices.Equal(tok["bytes"].([]any), []any{52.0}) {
		t.Errorf("token logprob = %v", tok)
	}
	tops := tok["top_logprobs"].([]any)
	top := wantKeys(t, "top logprob", tops[1], "token", "logprob", "bytes")
	if top["logprob"] != -9999.0 || !slices.Equal(top["bytes"].([]any), []any{195.0, 169.0}) {
		t.Errorf("top logprob = %v (want -9999 for -Inf and the UTF-8 bytes of é)", top)
	}
	usage := wantKeys(t, "usage", m["usage"], "prompt_tokens", "completion_tokens", "total_tokens",
		"prompt_tokens_details", "completion_tokens_details")
	if usage["total_tokens"] != 15.0 {
		t.Errorf("total_tokens = %v", usage["total_tokens"])
	}
	if d := wantKeys(t, "prompt_tokens_details", usage["prompt_tokens_details"], "cached_tokens"); d["cached_tokens"] != 3.0 {
		t.Errorf("cached_tokens = %v", d["cached_tokens"])
	}
	if d := wantKeys(t, "completion_tokens_details", usage["completion_tokens_details"], "reasoning_tokens"); d["reasoning_tokens"] != 2.0 {
		t.Errorf("reasoning_tokens = %v", d["reasoning_tokens"])
	}
	wantKeys(t, "timings", m["timings"], timingKeys...)
}

func TestChatCompletionMinimal(t *testing.T) {
	m := asMap(t, &ChatCompletion{Choices: []ChatChoice{{FinishReason: FinishLength}}})
	choice := m["choices"].([]any)[0].(map[string]any)
	msg := wantKeys(t, "message", choice["message"], "role", "content")
	if msg["content"] != nil || msg["role"] != "assistant" {
		t.Errorf("message = %v", msg)
	}
	if v, ok := choice["logprobs"]; !ok || v != nil {
		t.Errorf("logprobs = %v (present %v), want null", v, ok)
	}
	empty := asMap(t, ChatCompletion{})
	if c, ok := empty["choices"].([]any); !ok || len(c) != 0 {
		t.Errorf("choices of an empty completion = %#v, want []", empty["choices"])
	}
	// No alternatives asked for: top_logprobs is [] as OpenAI writes it.
	lp := asMap(t, ChatLogprobs{Content: []TokenLogprob{{Token: "a"}}})
	item := lp["content"].([]any)[0].(map[string]any)
	if tl, ok := item["top_logprobs"].([]any); !ok || len(tl) != 0 || item["bytes"] != nil {
		t.Errorf("item = %#v", item)
	}
}

func TestTextCompletionFieldNames(t *testing.T) {
	first, second := Logprob(-1.5), Logprob(-0.5)
	c := &TextCompletion{
		ID: "cmpl-1", Model: "qwen",
		Choices: []TextChoice{{
			Text: "Hello world",
			Logprobs: &TextLogprobs{
				Tokens:        []string{"Hello", " world"},
				TokenLogprobs: []*Logprob{nil, &second},
				TopLogprobs:   []TopTokens{nil, {{" world", second}, {" there", first}}},
				TextOffset:    []int{0, 5},
			},
			FinishReason: FinishStop,
		}},
	}
	m := asMap(t, c)
	wantKeys(t, "text_completion", m, "id", "object", "created", "model", "choices", "usage", "timings")
	if m["object"] != "text_completion" {
		t.Errorf("object = %v", m["object"])
	}
	choice := wantKeys(t, "choice", m["choices"].([]any)[0], "index", "text", "logprobs", "finish_reason")
	lp := wantKeys(t, "logprobs", choice["logprobs"], "tokens", "token_logprobs", "top_logprobs", "text_offset")
	tl := lp["token_logprobs"].([]any)
	if tl[0] != nil || tl[1] != -0.5 {
		t.Errorf("token_logprobs = %v, want [null -0.5]", tl)
	}
	tops := lp["top_logprobs"].([]any)
	if tops[0] != nil || tops[1].(map[string]any)[" there"] != -1.5 {
		t.Errorf("top_logprobs = %v", tops)
	}
	if !slices.Equal(lp["text_offset"].([]any), []any{0.0, 5.0}) {
		t.Errorf("text_offset = %v", lp["text_offset"])
	}
	empty := asMap(t, TextLogprobs{})
	for _, k := range []string{"tokens", "token_logprobs", "top_logprobs", "text_offset"} {
		if a, ok := empty[k].([]any); !ok || len(a) != 0 {
			t.Errorf("empty %s = %#v, want []", k, empty[k])
		}
	}
}

func TestTokenBytesRoundTrip(t *testing.T) {
	for _, b := range []TokenBytes{nil, {}, TokenBytes("a\xff")} {
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back TokenBytes
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if (b == nil) != (back == nil) || string(b) != string(back) {
			t.Errorf("%q -> %s -> %q", b, raw, back)
		}
	}
	var bad TokenBytes
	if err := json.Unmarshal([]byte("[256]"), &bad); err == nil {
		t.Error("byte 256 accepted")
	}
}

func TestTimingsFinish(t *testing.T) {
	cases := []struct {
		t                      Timings
		promptRate, decodeRate float64
	}{
		{Timings{PromptN: 100, PromptMS: 50, PredictedN: 11, PredictedMS: 200}, 2000, 50},
		{Timings{PromptN: 3, PromptMS: 1.5, PredictedN: 2, PredictedMS: 0.5}, 2000, 2000},
		{Timings{PromptN: 0, PromptMS: 10, PredictedN: 1, PredictedMS: 0}, 0, 0}, // one token: no decode step
		{Timings{PromptN: 10, PromptMS: 0, PredictedN: 5, PredictedMS: 0}, 0, 0}, // no time measured
		{Timings{PromptN: 10, PromptMS: -1, PredictedN: 0, PredictedMS: 5}, 0, 0},
	}
	for _, c := range cases {
		got := c.t
		got.PromptPerSecond, got.PredictedPerSecond = 123, 456 // stale values must be replaced
		got.Finish()
		if math.Abs(got.PromptPerSecond-c.promptRate) > 1e-9 || math.Abs(got.PredictedPerSecond-c.decodeRate) > 1e-9 {
			t.Errorf("%+v: rates %v, %v; want %v, %v", c.t, got.PromptPerSecond, got.PredictedPerSecond, c.promptRate, c.decodeRate)
		}
	}
}

func TestOutputEnvelopeSuccess(t *testing.T) {
	o := Origin{Line: 4, CustomID: "req-4", Envelope: true}
	body := fullChat()
	body.ID = ""
	m := asMap(t, Success(o, body, []string{"ignored field \"user\""}))
	wantKeys(t, "batch line", m, "id", "custom_id", "response", "error", "line", "warnings")
	if !strings.HasPrefix(m["id"].(string), "batch_req_") || m["custom_id"] != "req-4" || m["line"] != 4.0 || m["error"] != nil {
		t.Errorf("batch line = %v", m)
	}
	resp := wantKeys(t, "response", m["response"], "status_code", "request_id", "body")
	if resp["status_code"] != 200.0 || len(resp["request_id"].(string)) != 32 {
		t.Errorf("response = %v", resp)
	}
	b := resp["body"].(map[string]any)
	if id, _ := b["id"].(string); id != o.ChatCompletionID() || !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("body id = %v", b["id"])
	}
	if body.ID != "" {
		t.Error("Success changed the caller's completion")
	}
	// Deterministic ids, distinct per line and per kind.
	again := asMap(t, Success(o, body, nil))
	other := asMap(t, Success(Origin{Line: 5, CustomID: "req-4", Envelope: true}, body, nil))
	if again["id"] != m["id"] || other["id"] == m["id"] || o.RequestID() == o.ChatCompletionID()[9:] {
		t.Errorf("ids: %v %v %v", m["id"], again["id"], other["id"])
	}
	if _, ok := again["warnings"]; ok {
		t.Error("warnings written although there are none")
	}
}

func TestOutputEnvelopeError(t *testing.T) {
	_, lerr := ParseLine([]byte(`{"custom_id":"r","method":"POST","url":"/v1/completions","body":{"prompt":"p","top_p":7}}`), 9)
	if lerr == nil {
		t.Fatal("line accepted")
	}
	m := asMap(t, lerr.Output())
	wantKeys(t, "batch line", m, "id", "custom_id", "response", "error", "line")
	if m["error"] != nil || m["custom_id"] != "r" || m["line"] != 9.0 {
		t.Errorf("batch line = %v", m)
	}
	resp := wantKeys(t, "response", m["response"], "status_code", "request_id", "body")
	if resp["status_code"] != 400.0 {
		t.Errorf("status_code = %v", resp["status_code"])
	}
	body := wantKeys(t, "body", resp["body"], "error")
	e := wantKeys(t, "error", body["error"], "message", "type", "param", "code")
	if e["type"] != "invalid_request_error" || e["param"] != "top_p" || e["code"] != "invalid_value" ||
		!strings.Contains(e["message"].(string), `field "top_p"`) {
		t.Errorf("error = %v", e)
	}
	// A line that is not JSON: no param, and the error says so with null.
	_, lerr = ParseLine([]byte(`{"custom_id":`), 2)
	e = asMap(t, lerr.Output())["error"].(map[string]any)
	if v, ok := e["param"]; !ok || v != nil {
		t.Errorf("param = %v (present %v), want null", v, ok)
	}
}

func TestOutputBare(t *testing.T) {
	o := Origin{Line: 2, CustomID: "b"}
	text := &TextCompletion{Choices: []TextChoice{{Text: "x", FinishReason: FinishStop}}}
	m := asMap(t, Success(o, text, []string{"w"}))
	wantKeys(t, "bare result", m, "id", "object", "created", "model", "choices", "usage", "timings", "line", "custom_id", "warnings")
	if m["line"] != 2.0 || m["custom_id"] != "b" || m["id"] != o.TextCompletionID() || m["object"] != "text_completion" {
		t.Errorf("bare result = %v", m)
	}
	// A completion given by value gets its id too.
	m = asMap(t, Success(o, TextCompletion{}, nil))
	if m["id"] != o.TextCompletionID() {
		t.Errorf("id of a value completion = %v", m["id"])
	}
	m = asMap(t, Success(o, ChatCompletion{}, nil))
	if m["id"] != o.ChatCompletionID() || o.ChatCompletionID() == "chatcmpl-"+o.TextCompletionID()[5:] {
		t.Errorf("id of a value chat completion = %v", m["id"])
	}
	// No custom_id on the line: none in the result.
	m = asMap(t, Success(Origin{Line: 3}, text, nil))
	wantKeys(t, "bare result", m, "id", "object", "created", "model", "choices", "usage", "timings", "line")

	fail := Failure(Origin{Line: 6, CustomID: "c"}, APIError{Message: "context too long", Type: InvalidRequest, Param: "messages", Code: "context_length_exceeded"})
	m = asMap(t, fail)
	wantKeys(t, "bare error", m, "error", "status_code", "line", "custom_id")
	if m["status_code"] != 400.0 {
		t.Errorf("bare error status_code = %v", m["status_code"])
	}
	e := wantKeys(t, "error", m["error"], "message", "type", "param", "code")
	if e["code"] != "context_length_exceeded" || e["param"] != "messages" {
		t.Errorf("error = %v", e)
	}
}

func TestOutputStatusOverride(t *testing.T) {
	out := Failure(Origin{Line: 1, CustomID: "x", Envelope: true}, APIError{Message: "kernel failed", Type: ServerError})
	out.StatusCode = 500
	m := asMap(t, out)
	resp := m["response"].(map[string]any)
	e := resp["body"].(map[string]any)["error"].(map[string]any)
	if resp["status_code"] != 500.0 || e["type"] != "server_error" || e["code"] != nil {
		t.Errorf("response = %v", resp)
	}
}

func TestOutputNeedsObjectBody(t *testing.T) {
	if _, err := marshal(Success(Origin{Line: 1}, "text", nil)); err == nil {
		t.Error("a bare result whose body is not an object was encoded")
	}
}
