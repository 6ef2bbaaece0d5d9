package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"petal/engine/chat"
	"petal/jobs"
)

// scripted is an executor that answers every job with a fixed generated
// text, streamed in pieces and parsed as the engine's executor parses it;
// tests of the HTTP layer use it to control timing and output.
type scripted struct {
	prompt  string   // the "rendered prompt" reported for chat jobs
	pieces  []string // the generated text, as streamed
	fail    *Failure // returned before any text
	failMid *Failure // returned after the text
	panics  bool
	hold    chan struct{} // when set, each job waits for a value (or its context) before finishing
	started chan struct{} // when set, receives a value as each job starts
	runs    atomic.Int32
	jobs    []*jobs.Job
	mu      sync.Mutex
}

func (x *scripted) Execute(ctx context.Context, job *jobs.Job, out Stream) (*Outcome, *Failure) {
	x.runs.Add(1)
	x.mu.Lock()
	x.jobs = append(x.jobs, job)
	x.mu.Unlock()
	if x.started != nil {
		x.started <- struct{}{}
	}
	if x.panics {
		panic("scripted panic")
	}
	if x.fail != nil {
		return nil, x.fail
	}
	if job.Kind == jobs.Chat && out.Prompt != nil {
		out.Prompt(x.prompt)
	}
	finish := jobs.FinishStop
	var text strings.Builder
	for _, p := range x.pieces {
		if out.Text != nil {
			out.Text(p)
		}
		text.WriteString(p)
	}
	if x.hold != nil {
		select {
		case <-x.hold:
		case <-ctx.Done():
			finish = jobs.FinishCancelled
		}
	}
	if x.failMid != nil {
		return nil, x.failMid
	}
	usage := jobs.NewUsage(7, len(x.pieces), 3, 0)
	tm := jobs.Timings{PromptN: 4, PromptMS: 2, PredictedN: len(x.pieces), PredictedMS: 5, CacheN: 3, TTFTMS: 2.5}
	tm.Finish()
	if job.Kind == jobs.Completion {
		t := text.String()
		if job.Params.Echo {
			t = job.Prompt + t
		}
		return &Outcome{Body: &jobs.TextCompletion{Model: "m", Choices: []jobs.TextChoice{{Text: t, FinishReason: finish}}, Usage: usage, Timings: tm}}, nil
	}
	parsed := chat.ParseOutput(text.String(), chat.ParseOptions{InThinking: chat.PromptOpensThink(x.prompt)})
	msg := jobs.ChatMessage{ReasoningContent: parsed.Reasoning}
	if parsed.Content != "" || len(parsed.ToolCalls) == 0 {
		msg.Content = &parsed.Content
	}
	for _, tc := range parsed.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, jobs.ToolCall{ID: tc.ID, Function: jobs.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	if len(msg.ToolCalls) > 0 && finish == jobs.FinishStop {
		finish = jobs.FinishToolCalls
	}
	return &Outcome{Body: &jobs.ChatCompletion{Model: "m", Choices: []jobs.ChatChoice{{Message: msg, FinishReason: finish}}, Usage: usage, Timings: tm},
		Warnings: []string{"a warning"}}, nil
}

// textModel is a Model over a byte-per-token alphabet.
type textModel struct{}

func (textModel) Name() string    { return "test-model" }
func (textModel) MaxContext() int { return 4096 }
func (textModel) VocabSize() int  { return 256 }
func (textModel) Encode(text string) []int32 {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids
}
func (textModel) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}
func (textModel) Token(id int32) string { return string(rune(id)) }
func (textModel) RenderChat(job *jobs.Job, gen bool) (string, error) {
	s := "<chat>" + string(job.Messages)
	if gen {
		s += "<assistant>"
	}
	return s, nil
}

// client gives up on a request that hangs, so that a broken queue fails
// the test instead of stalling it.
var client = &http.Client{Timeout: 20 * time.Second}

func newTestServer(t *testing.T, x Executor, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	cfg.Executor, cfg.Model = x, textModel{}
	s := New(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

func post(t *testing.T, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// readEvents checks the server-sent event framing (each event one "data: "
// line and a blank line, the last one [DONE]) and returns the JSON events.
func readEvents(t *testing.T, body string) []map[string]any {
	t.Helper()
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with data: [DONE]: %q", body[max(0, len(body)-80):])
	}
	var out []map[string]any
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(block, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("event %q is not one data: line", block)
		}
		if data == "[DONE]" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		out = append(out, v)
	}
	return out
}

func errorOf(t *testing.T, body string) map[string]any {
	t.Helper()
	var v struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Error == nil {
		t.Fatalf("not an error object: %q", body)
	}
	return v.Error
}

const chatBody = `{"messages": [{"role": "user", "content": "weather?"}]`

func TestChatWhole(t *testing.T) {
	x := &scripted{prompt: "<think>\n", pieces: []string{"I should", " look.\n</think>\n\n", "Here."}}
	_, ts := newTestServer(t, x, Config{})
	resp, body := post(t, ts.URL+"/v1/chat/completions", chatBody+`, "user": "u", "model": "gpt-x"}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var cc struct {
		ID       string
		Object   string
		Choices  []jobs.ChatChoice
		Usage    jobs.Usage
		Timings  jobs.Timings
		Warnings []string
	}
	if err := json.Unmarshal([]byte(body), &cc); err != nil {
		t.Fatal(err)
	}
	m := cc.Choices[0].Message
	if !strings.HasPrefix(cc.ID, "chatcmpl-") || cc.Object != "chat.completion" || *m.Content != "Here." || m.ReasoningContent != "I should look." ||
		cc.Usage.PromptTokensDetails.CachedTokens != 3 || cc.Timings.PromptN != 4 || len(cc.Warnings) != 1 {
		t.Errorf("body %s", body)
	}
	// the request went through batch's decoding: "user" is an ignored field
	if j := x.jobs[0]; j.Kind != jobs.Chat || len(j.Ignored) != 1 || j.Ignored[0] != "user" || j.Model != "gpt-x" {
		t.Errorf("job %+v", j)
	}
	// every answer has its own id
	_, body2 := post(t, ts.URL+"/v1/chat/completions", chatBody+`}`)
	if strings.Contains(body2, cc.ID) {
		t.Errorf("two answers share the id %s", cc.ID)
	}
}

// A streamed chat: a role chunk, reasoning and content deltas, the tool
// calls whole with index, id, type and function, a finishing chunk with
// timings, and with include_usage a last chunk with usage and no choices
// (usage null on the others); all chunks share one id.
func TestChatStreamed(t *testing.T) {
	call := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
	x := &scripted{prompt: "<think>\n", pieces: []string{"The user", " wants weather.\n</th", "ink>\n\nLet me check.\n\n<tool", "_call>\n<function=get_weather>", call[len("<tool_call>\n<function=get_weather>"):]}}
	_, ts := newTestServer(t, x, Config{})
	resp, body := post(t, ts.URL+"/v1/chat/completions", chatBody+`, "stream": true, "stream_options": {"include_usage": true}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	evs := readEvents(t, body)
	var reasoning, content strings.Builder
	var calls []any
	var finish any
	for i, ev := range evs {
		if ev["id"] != evs[0]["id"] || ev["object"] != "chat.completion.chunk" || ev["model"] != "test-model" {
			t.Errorf("chunk %d: %v", i, ev)
		}
		u, has := ev["usage"]
		if !has || (i < len(evs)-1) != (u == nil) {
			t.Errorf("chunk %d: usage %v (present %v)", i, u, has)
		}
		choices := ev["choices"].([]any)
		if i == len(evs)-1 {
			if len(choices) != 0 || u.(map[string]any)["prompt_tokens"] != 7.0 {
				t.Errorf("last chunk %v", ev)
			}
			continue
		}
		ch := choices[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		if i == 0 && (d["role"] != "assistant" || d["content"] != "") {
			t.Errorf("first chunk %v", ev)
		}
		if s, ok := d["reasoning_content"].(string); ok {
			reasoning.WriteString(s)
		}
		if s, ok := d["content"].(string); ok {
			content.WriteString(s)
		}
		if tc, ok := d["tool_calls"].([]any); ok {
			calls = append(calls, tc...)
		}
		if ch["finish_reason"] != nil {
			finish = ch["finish_reason"]
			if ev["timings"] == nil {
				t.Errorf("finishing chunk without timings: %v", ev)
			}
		}
	}
	if reasoning.String() != "The user wants weather." || content.String() != "Let me check." || finish != "tool_calls" {
		t.Errorf("reasoning %q, content %q, finish %v", reasoning.String(), content.String(), finish)
	}
	if len(calls) != 1 {
		t.Fatalf("tool calls %v", calls)
	}
	c := calls[0].(map[string]any)
	fn := c["function"].(map[string]any)
	if c["index"] != 0.0 || !strings.HasPrefix(c["id"].(string), "call_") || c["type"] != "function" || fn["name"] != "get_weather" || fn["arguments"] != `{"city": "Paris"}` {
		t.Errorf("tool call %v", c)
	}
}

func TestCompletionStreamedWithEcho(t *testing.T) {
	x := &scripted{pieces: []string{" return", " x"}}
	_, ts := newTestServer(t, x, Config{})
	_, body := post(t, ts.URL+"/v1/completions", `{"prompt": "def f(x):", "echo": true, "stream": true}`)
	var text strings.Builder
	evs := readEvents(t, body)
	for _, ev := range evs {
		if ev["object"] != "text_completion" || !strings.HasPrefix(ev["id"].(string), "cmpl-") {
			t.Errorf("chunk %v", ev)
		}
		if _, has := ev["usage"]; has {
			t.Errorf("usage without include_usage: %v", ev)
		}
		text.WriteString(ev["choices"].([]any)[0].(map[string]any)["text"].(string))
	}
	if text.String() != "def f(x): return x" {
		t.Errorf("streamed text %q", text.String())
	}
	if last := evs[len(evs)-1]["choices"].([]any)[0].(map[string]any); last["finish_reason"] != "stop" {
		t.Errorf("last chunk %v", last)
	}
}

func TestRequestErrors(t *testing.T) {
	x := &scripted{pieces: []string{"x"}}
	_, ts := newTestServer(t, x, Config{MaxBodyBytes: 1000})
	cases := []struct {
		path, body string
		status     int
		param      string
		msg        string
	}{
		{"/v1/chat/completions", `{"messages": [}`, 400, "", "request body is not valid JSON"},
		{"/v1/chat/completions", `{"prompt": "x"}`, 400, "messages", `field "messages" is required for /v1/chat/completions`},
		{"/v1/completions", `{"prompt": "x", "temperature": 5}`, 400, "temperature", "between 0 and 2"},
		{"/v1/completions", `{"prompt": "x", "n": 2}`, 400, "n", "must be 1"},
		{"/v1/completions", `{"prompt": "x", "stream": "yes"}`, 400, "stream", "must be a boolean"},
		{"/v1/completions", `{"prompt": "x", "stream_options": {"include_usage": true}}`, 400, "stream_options", `only allowed with "stream": true`},
		{"/v1/completions", `{"prompt": "` + strings.Repeat("x", 2000) + `"}`, 413, "", "larger than 1000 bytes"},
		{"/v1/embeddings", `{}`, 404, "", "no endpoint POST /v1/embeddings"},
		{"/tokenize", `{"prompt": [1, 2]}`, 400, "prompt", "must be a string"},
		{"/detokenize", `{"tokens": [1, 999]}`, 400, "tokens", "tokens[1] = 999 is not a token id below 256"},
		{"/detokenize", `{}`, 400, "tokens", `field "tokens" is required`},
	}
	for _, c := range cases {
		resp, body := post(t, ts.URL+c.path, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s %.60s: status %d, want %d (%s)", c.path, c.body, resp.StatusCode, c.status, body)
			continue
		}
		e := errorOf(t, body)
		if p, _ := e["param"].(string); p != c.param || !strings.Contains(e["message"].(string), c.msg) {
			t.Errorf("%s %.60s: error %v, want param %q and %q", c.path, c.body, e, c.param, c.msg)
		}
	}
	if x.runs.Load() != 0 {
		t.Errorf("%d bad requests ran", x.runs.Load())
	}
	resp, body := get(t, ts.URL+"/v1/chat/completions")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || !strings.Contains(errorOf(t, body)["message"].(string), "takes POST") {
		t.Errorf("GET on chat: %d %s", resp.StatusCode, body)
	}
}

// A job that fails before producing text gets its status and error object
// even when it streams; one that fails after gets an error event.
func TestExecutorFailures(t *testing.T) {
	x := &scripted{fail: &Failure{Status: 400, Param: "messages", Code: "context_length_exceeded", Err: errors.New("the prompt has 9999 tokens; the context holds 4096")}}
	_, ts := newTestServer(t, x, Config{})
	for _, stream := range []string{"false", "true"} {
		resp, body := post(t, ts.URL+"/v1/chat/completions", chatBody+`, "stream": `+stream+`}`)
		if e := errorOf(t, body); resp.StatusCode != 400 || e["param"] != "messages" || e["type"] != "invalid_request_error" || e["code"] != "context_length_exceeded" {
			t.Errorf("stream %s: %d %s", stream, resp.StatusCode, body)
		}
	}
	x.fail, x.failMid, x.pieces = nil, &Failure{Status: 500, Err: errors.New("disk on fire")}, []string{"partial"}
	resp, body := post(t, ts.URL+"/v1/chat/completions", chatBody+`, "stream": true}`)
	evs := readEvents(t, body)
	last := evs[len(evs)-1]
	if resp.StatusCode != 200 || last["error"] == nil || last["error"].(map[string]any)["type"] != "server_error" {
		t.Errorf("failure after output: %d %s", resp.StatusCode, body)
	}
	x.failMid, x.panics = nil, true
	resp, body = post(t, ts.URL+"/v1/completions", `{"prompt": "x"}`)
	if e := errorOf(t, body); resp.StatusCode != 500 || !strings.Contains(e["message"].(string), "internal error: scripted panic") || e["code"] != "internal_error" {
		t.Errorf("panic: %d %s", resp.StatusCode, body)
	}
	// the server goes on
	x.panics = false
	if resp, body := post(t, ts.URL+"/v1/completions", `{"prompt": "x"}`); resp.StatusCode != 200 {
		t.Errorf("after a panic: %d %s", resp.StatusCode, body)
	}
}

func TestModelsHealthTokenize(t *testing.T) {
	_, ts := newTestServer(t, &scripted{}, Config{})
	_, body := get(t, ts.URL+"/v1/models")
	var list struct {
		Object string
		Data   []modelObject
	}
	json.Unmarshal([]byte(body), &list)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "test-model" || list.Data[0].Object != "model" || list.Data[0].MaxModelLen != 4096 {
		t.Errorf("models %s", body)
	}
	if resp, body := get(t, ts.URL+"/v1/models/test-model"); resp.StatusCode != 200 || !strings.Contains(body, `"id":"test-model"`) {
		t.Errorf("model: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, ts.URL+"/v1/models/other"); resp.StatusCode != 404 || errorOf(t, body)["code"] != "model_not_found" {
		t.Errorf("other model: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, ts.URL+"/health"); resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("health: %d %s", resp.StatusCode, body)
	}
	_, body = post(t, ts.URL+"/tokenize", `{"prompt": "hi", "return_token_strs": true, "add_special_tokens": true}`)
	if body != `{"count":2,"max_model_len":4096,"tokens":[104,105],"token_strs":["h","i"]}`+"\n" {
		t.Errorf("tokenize prompt: %s", body)
	}
	_, body = post(t, ts.URL+"/tokenize", `{"messages": [{"role": "user", "content": "a"}], "add_generation_prompt": false}`)
	var tok struct{ Count int }
	json.Unmarshal([]byte(body), &tok)
	if want := len(`<chat>[{"role": "user", "content": "a"}]`); tok.Count != want || !strings.Contains(body, `"token_strs":null`) {
		t.Errorf("tokenize messages: %s, want %d tokens", body, want)
	}
	_, body = post(t, ts.URL+"/detokenize", `{"tokens": [104, 105]}`)
	if body != `{"prompt":"hi"}`+"\n" {
		t.Errorf("detokenize: %s", body)
	}
}

func TestAPIKeyAndCORS(t *testing.T) {
	_, ts := newTestServer(t, &scripted{pieces: []string{"x"}}, Config{APIKey: "s3cret"})
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}, {"Authorization", "Bearer s3cre"}} {
		resp, body := post(t, ts.URL+"/v1/completions", `{"prompt": "x"}`, h...)
		if resp.StatusCode != 401 || errorOf(t, body)["code"] != "invalid_api_key" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("auth %v: %d %s", h, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/v1/models", "/metrics"} {
		if resp, _ := get(t, ts.URL+path); resp.StatusCode != 401 {
			t.Errorf("%s without the key: %d", path, resp.StatusCode)
		}
	}
	if resp, _ := get(t, ts.URL+"/health"); resp.StatusCode != 200 {
		t.Errorf("health needs no key: %d", resp.StatusCode)
	}
	if resp, body := post(t, ts.URL+"/v1/completions", `{"prompt": "x"}`, "Authorization", "Bearer s3cret"); resp.StatusCode != 200 {
		t.Errorf("with the key: %d %s", resp.StatusCode, body)
	}
	// CORS is off: no header for any origin
	if resp, _ := get(t, ts.URL+"/health", "Origin", "https://app.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS header without --cors-origin")
	}

	_, ts = newTestServer(t, &scripted{}, Config{CORSOrigins: []string{"https://app.example"}})
	req, _ := http.NewRequest(http.MethodOptions, ts.URL+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := get(t, ts.URL+"/health", "Origin", "https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS header for an origin not allowed")
	}
}

// One request runs; --queue more wait; the next gets 429 with Retry-After;
// the waiting ones run in turn once the first is done.
func TestQueueBoundAndOrder(t *testing.T) {
	x := &scripted{pieces: []string{"x"}, hold: make(chan struct{}), started: make(chan struct{}, 10)}
	s, ts := newTestServer(t, x, Config{Queue: 1})
	results := make(chan int, 2)
	go func() { r, _ := post(t, ts.URL+"/v1/completions", `{"prompt": "first"}`); results <- r.StatusCode }()
	<-x.started
	go func() { r, _ := post(t, ts.URL+"/v1/completions", `{"prompt": "second"}`); results <- r.StatusCode }()
	waitFor(t, func() bool { return gauge(t, ts.URL, "petal_queue_depth") == 1 })
	resp, body := post(t, ts.URL+"/v1/completions", `{"prompt": "third"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || errorOf(t, body)["code"] != "queue_full" {
		t.Errorf("third: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	x.hold <- struct{}{}
	<-x.started
	x.hold <- struct{}{}
	if a, b := <-results, <-results; a != 200 || b != 200 {
		t.Errorf("statuses %d %d", a, b)
	}
	if x.runs.Load() != 2 || x.jobs[0].Prompt != "first" || x.jobs[1].Prompt != "second" {
		t.Errorf("ran %d jobs", x.runs.Load())
	}
	_ = s
	if n := gauge(t, ts.URL, `petal_requests_total{endpoint="/v1/completions",status="429"}`); n != 1 {
		t.Errorf("429s counted: %v", n)
	}
}

// A client that disconnects cancels its request: the running one stops
// (its context ends), a waiting one never runs.
func TestClientDisconnectCancels(t *testing.T) {
	x := &scripted{pieces: []string{"x"}, hold: make(chan struct{}), started: make(chan struct{}, 10)}
	_, ts := newTestServer(t, x, Config{Queue: 4})
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	send := func(ctx context.Context, body string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(body))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	go send(ctx1, chatBody+`, "stream": true}`)
	<-x.started
	go send(ctx2, chatBody+`}`)
	waitFor(t, func() bool { return gauge(t, ts.URL, "petal_queue_depth") == 1 })
	cancel2() // the waiting one leaves
	waitFor(t, func() bool { return gauge(t, ts.URL, "petal_queue_depth") == 0 })
	cancel1() // the running one's context ends: the scripted job returns "cancelled"
	waitFor(t, func() bool {
		return gauge(t, ts.URL, `petal_requests_total{endpoint="/v1/chat/completions",status="cancelled"}`) == 2
	})
	if x.runs.Load() != 1 {
		t.Errorf("%d jobs ran; the one that left the queue must not run", x.runs.Load())
	}
}

// Serve, once its context ends, refuses the waiting requests (503), lets
// the running one finish its stream, and returns.
func TestGracefulStop(t *testing.T) {
	x := &scripted{pieces: []string{"a", "b"}, hold: make(chan struct{}), started: make(chan struct{}, 10)}
	s := New(Config{Executor: x, Model: textModel{}, Queue: 4})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, DefaultTimeouts) }()
	url := "http://" + ln.Addr().String()
	running := make(chan string, 1)
	go func() { _, body := post(t, url+"/v1/chat/completions", chatBody+`, "stream": true}`); running <- body }()
	<-x.started
	waiting := make(chan int, 1)
	go func() { r, _ := post(t, url+"/v1/completions", `{"prompt": "x"}`); waiting <- r.StatusCode }()
	waitFor(t, func() bool { return gauge(t, url, "petal_queue_depth") == 1 })
	stop()
	if code := <-waiting; code != 503 {
		t.Errorf("waiting request: %d, want 503", code)
	}
	select {
	case <-served:
		t.Fatal("Serve returned before the running request finished")
	case <-time.After(100 * time.Millisecond):
	}
	x.hold <- struct{}{}
	if body := <-running; !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Errorf("running request cut short: %q", body)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Errorf("still accepting connections after Serve returned")
	}
}

// The read timeout bounds how long a body may take to arrive, not how
// long the answer takes.
func TestReadTimeoutDoesNotCutLongAnswers(t *testing.T) {
	x := &scripted{pieces: []string{"a"}, hold: make(chan struct{})}
	s := New(Config{Executor: x, Model: textModel{}})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go s.Serve(ctx, ln, Timeouts{ReadHeader: 200 * time.Millisecond, Read: 200 * time.Millisecond, Idle: time.Second})
	url := "http://" + ln.Addr().String()
	go func() { time.Sleep(600 * time.Millisecond); x.hold <- struct{}{} }()
	if resp, body := post(t, url+"/v1/chat/completions", chatBody+`, "stream": true}`); resp.StatusCode != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("answer longer than the read timeout: %d %q", resp.StatusCode, body)
	}
	// a body that does not come in time is cut off
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if time.Since(start) > 2*time.Second || strings.Contains(line, "200") {
		t.Errorf("slow body: %q after %v", line, time.Since(start))
	}
	if x.runs.Load() != 1 {
		t.Errorf("%d jobs ran", x.runs.Load())
	}
}

func TestMetrics(t *testing.T) {
	_, ts := newTestServer(t, &scripted{pieces: []string{"a", "b"}}, Config{})
	post(t, ts.URL+"/v1/completions", `{"prompt": "x"}`)
	_, body := get(t, ts.URL+"/metrics")
	for _, name := range []string{
		`petal_requests_total{endpoint="/v1/completions",status="200"} 1`,
		"petal_prompt_tokens_total 7", "petal_prompt_cached_tokens_total 3", "petal_generation_tokens_total 2",
		"petal_time_to_first_token_seconds_count 1", "petal_prefill_tokens_per_second_count 1", "petal_decode_tokens_per_second_count 1",
		"petal_queue_depth 0", "petal_prefix_cache_hits_total 1", "petal_prefix_cache_misses_total 0", "process_resident_memory_bytes", "go_goroutines",
	} {
		if !strings.Contains(body, name) {
			t.Errorf("metrics lack %q", name)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("timed out waiting")
}

// gauge reads one sample of /metrics (-1 when absent).
func gauge(t *testing.T, url, name string) float64 {
	t.Helper()
	_, body := get(t, url+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}
