package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"petal/jobs"
)

// serveAPI serves the embedded model through the HTTP API over httptest,
// as petal serve does; store is the session folder ("" for none).
func serveAPI(t *testing.T, store string) *httptest.Server {
	t.Helper()
	cache := t.TempDir()
	st := &Streams{Out: io.Discard, Err: io.Discard, Getenv: func(k string) string {
		if k == "PETAL_CACHE" {
			return cache
		}
		return ""
	}}
	o := serveOptions{
		modelOptions:   modelOptions{Backend: "cpu", Chunk: 512},
		sessionOptions: sessionOptions{Dir: store, PrefixCacheMB: 256},
		Queue:          4, MaxRequestMB: 1, Quiet: true,
	}
	api, e, _, err := newServeAPI(st, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(func() { ts.Close(); e.Close() })
	return ts
}

func postJSON(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage   jobs.Usage   `json:"usage"`
	Timings jobs.Timings `json:"timings"`
}

func decodeChat(t *testing.T, body string) chatAnswer {
	t.Helper()
	var a chatAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil || len(a.Choices) != 1 || a.Choices[0].Message.Content == nil {
		t.Fatalf("not a chat completion: %s (%v)", body, err)
	}
	return a
}

// streamedChat joins a streamed chat's deltas and returns its usage chunk.
func streamedChat(t *testing.T, body string) (content, reasoning, finish string, usage jobs.Usage) {
	t.Helper()
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream does not end with [DONE]: %q", body)
	}
	for _, block := range strings.Split(strings.TrimSpace(body), "\n\n") {
		data := strings.TrimPrefix(block, "data: ")
		if data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *jobs.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, c := range ch.Choices {
			content += c.Delta.Content
			reasoning += c.Delta.ReasoningContent
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = *ch.Usage
		}
	}
	return
}

// The server answers a request as batch answers the same line: same text,
// usage and logprobs; and a streamed answer adds up to the whole one.
func TestServeAnswersAsBatch(t *testing.T) {
	ts := serveAPI(t, "")
	chat := `{"messages": [{"role": "user", "content": "What does the function dumps in the json module do?"}], "max_tokens": 24, "temperature": 0}`
	status, body := postJSON(t, ts.URL+"/v1/chat/completions", chat)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	served := decodeChat(t, body)
	code, lines, errs := batchLines(t, chat+"\n", "--prefix-cache", "0")
	if code != 0 || len(lines) != 1 {
		t.Fatalf("batch: exit %d %s", code, errs)
	}
	batched := decodeChat(t, jsonText(lines[0]))
	if *served.Choices[0].Message.Content != *batched.Choices[0].Message.Content || served.Usage.PromptTokens != batched.Usage.PromptTokens ||
		served.Usage.CompletionTokens != batched.Usage.CompletionTokens || served.Choices[0].Message.ReasoningContent != batched.Choices[0].Message.ReasoningContent {
		t.Errorf("served %s\nbatch %s", body, jsonText(lines[0]))
	}

	status, body = postJSON(t, ts.URL+"/v1/chat/completions", strings.TrimSuffix(chat, "}")+`, "stream": true, "stream_options": {"include_usage": true}}`)
	content, reasoning, finish, usage := streamedChat(t, body)
	if status != 200 || content != *served.Choices[0].Message.Content || reasoning != served.Choices[0].Message.ReasoningContent ||
		finish != served.Choices[0].FinishReason || usage.CompletionTokens != served.Usage.CompletionTokens || usage.PromptTokens != served.Usage.PromptTokens {
		t.Errorf("streamed content %q reasoning %q finish %q usage %+v; whole %s", content, reasoning, finish, usage, body)
	}

	completion := `{"prompt": "def fibonacci(n):", "max_tokens": 8, "temperature": 0, "logprobs": 2, "echo": true}`
	_, body = postJSON(t, ts.URL+"/v1/completions", completion)
	code, lines, _ = batchLines(t, completion+"\n")
	var a, b struct {
		Choices []struct {
			Text     string
			Logprobs jobs.TextLogprobs
		}
	}
	json.Unmarshal([]byte(body), &a)
	json.Unmarshal([]byte(jsonText(lines[0])), &b)
	if code != 0 || len(a.Choices) != 1 || len(b.Choices) != 1 || a.Choices[0].Text != b.Choices[0].Text ||
		jsonText(a.Choices[0].Logprobs) != jsonText(b.Choices[0].Logprobs) || !strings.HasPrefix(a.Choices[0].Text, "def fibonacci(n):") {
		t.Errorf("completion served %s\nbatch %s", body, jsonText(lines[0]))
	}
	_, body = postJSON(t, ts.URL+"/v1/completions", strings.TrimSuffix(completion, "}")+`, "stream": true}`)
	var text strings.Builder
	for _, block := range strings.Split(strings.TrimSpace(body), "\n\n") {
		var ch struct{ Choices []struct{ Text string } }
		if json.Unmarshal([]byte(strings.TrimPrefix(block, "data: ")), &ch) == nil && len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Text)
		}
	}
	if text.String() != a.Choices[0].Text {
		t.Errorf("streamed completion %q, whole %q", text.String(), a.Choices[0].Text)
	}
}

// Errors the executor finds (a prompt longer than the context) come back
// with batch's status and error object, code included, streamed or not.
func TestServeExecutorErrors(t *testing.T) {
	ts := serveAPI(t, "")
	long := strings.Repeat("word ", 40000) // more tokens than the context holds
	for _, stream := range []string{"false", "true"} {
		status, body := postJSON(t, ts.URL+"/v1/completions", `{"prompt": "`+long+`", "stream": `+stream+`}`)
		if status != 400 || !strings.Contains(body, "the context holds 32768") || !strings.Contains(body, `"type":"invalid_request_error"`) ||
			!strings.Contains(body, `"param":"prompt","code":"context_length_exceeded"`) {
			t.Errorf("prompt over the context, stream %s: %d %.300s", stream, status, body)
		}
	}
	if status, body := postJSON(t, ts.URL+"/v1/completions", `{"prompt": "`+strings.Repeat(long, 6)+`"}`); status != 413 {
		t.Errorf("a body over --max-request-mb: %d %.300s", status, body)
	}
	status, body := postJSON(t, ts.URL+"/v1/completions", `{"prompt": [1, 99999]}`)
	if status != 400 || !strings.Contains(body, `prompt[1] = 99999 is not a token id`) || !strings.Contains(body, `"param":"prompt","code":"invalid_value"`) {
		t.Errorf("bad token id: %d %s", status, body)
	}
	status, body = postJSON(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "fork_from": "a", "stream": true}`)
	if status != 400 || !strings.Contains(body, "fork_from needs session") {
		t.Errorf("fork_from without session, streamed: %d %s", status, body)
	}
	status, body = postJSON(t, ts.URL+"/tokenize", `{"messages": [{"role": "user", "content": "hi"}], "return_token_strs": true}`)
	var tok struct {
		Count     int
		Tokens    []int
		TokenStrs []string `json:"token_strs"`
	}
	json.Unmarshal([]byte(body), &tok)
	if status != 200 || tok.Count == 0 || tok.Count != len(tok.Tokens) || len(tok.TokenStrs) != tok.Count {
		t.Fatalf("tokenize: %d %s", status, body)
	}
	ids, _ := json.Marshal(tok.Tokens)
	_, body = postJSON(t, ts.URL+"/detokenize", `{"tokens": `+string(ids)+`}`)
	if !strings.Contains(body, `<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n`) {
		t.Errorf("detokenize of the rendered chat: %s", body)
	}
}

// The server keeps one executor for its whole life: a request that
// resends the previous one's conversation (as an agent loop does)
// continues from the prefix cache, and says how much it restored.
func TestServeKeepsItsPrefixCache(t *testing.T) {
	ts := serveAPI(t, "")
	msgs := []map[string]any{
		{"role": "system", "content": "You are a careful Python assistant. Answer briefly, with code when it helps, and explain what each standard library function returns."},
		{"role": "user", "content": "What does json.dumps do?"},
	}
	ask := func() chatAnswer {
		req, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0})
		status, body := postJSON(t, ts.URL+"/v1/chat/completions", string(req))
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		return decodeChat(t, body)
	}
	first := ask()
	tr, _ := json.Marshal(map[string]any{"messages": msgs, "add_generation_prompt": false})
	_, tb := postJSON(t, ts.URL+"/tokenize", string(tr))
	var tok struct{ Count int }
	if json.Unmarshal([]byte(tb), &tok); tok.Count == 0 {
		t.Fatalf("tokenize: %s", tb)
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": *first.Choices[0].Message.Content},
		map[string]any{"role": "user", "content": "And json.loads?"})
	second := ask()
	if cached := second.Usage.PromptTokensDetails.CachedTokens; first.Usage.PromptTokensDetails.CachedTokens != 0 || cached < tok.Count || second.Timings.CacheN != cached {
		t.Errorf("first request %+v; the second restored %d tokens (timings %+v), want at least the first's %d messages' tokens", first.Usage, cached, second.Timings, tok.Count)
	}
}

// A client that disconnects while its session turn runs cancels it, and
// the session's conversation does not record it: the next turn continues
// from the history before it.
func TestServeCancelledTurnIsNotRecorded(t *testing.T) {
	store := t.TempDir()
	ts := serveAPI(t, store)
	turn := func(content string, maxTokens int) string {
		b, _ := json.Marshal(map[string]any{"session": "s", "messages": []map[string]any{{"role": "user", "content": content}}, "max_tokens": maxTokens, "temperature": 0})
		return string(b)
	}
	if status, body := postJSON(t, ts.URL+"/v1/chat/completions", turn("What does json.dumps do?", 8)); status != 200 {
		t.Fatalf("turn 1: %d %s", status, body)
	}
	before := conversationMessages(t, store, "s")
	snapshotsBefore := listFiles(t, filepath.Join(store, "s"))

	// a long message: the client goes away while it is prefilled
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(turn(strings.Repeat("Tell me about json. ", 400), 4000)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-done
	// the next request waits for the cancelled one to end, then runs on the
	// history of turn 1; until then the session holds what it held
	waitUnlocked(t, ts)
	if got := listFiles(t, filepath.Join(store, "s")); got != snapshotsBefore {
		t.Errorf("the cancelled turn changed the session's files:\nbefore %s\nafter  %s", snapshotsBefore, got)
	}
	status, body := postJSON(t, ts.URL+"/v1/chat/completions", turn("And json.loads?", 8))
	if status != 200 {
		t.Fatalf("turn after the cancelled one: %d %s", status, body)
	}
	after := conversationMessages(t, store, "s")
	if len(before) != 2 || len(after) != 4 || after[2]["content"] != "And json.loads?" || jsonText(after[:2]) != jsonText(before) {
		t.Errorf("conversation before %v\nafter %v: the cancelled turn must leave no trace", before, after)
	}
	if _, err := os.Stat(filepath.Join(store, "s")); err != nil {
		t.Fatal(err)
	}
}

// listFiles names the files of dir (sorted), one line each.
func listFiles(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, "\n")
}

// waitUnlocked waits until the server has no request running or queued.
func waitUnlocked(t *testing.T, ts *httptest.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body := string(b); strings.Contains(body, "petal_queue_depth 0") && strings.Contains(body, "petal_requests_running 0") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the server stayed busy")
}

// conversationMessages reads a session's saved history straight from the
// store: the messages, as a JSON array or the "messages" of an object.
func conversationMessages(t *testing.T, store, name string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, name, "conversation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any
	if json.Unmarshal(data, &msgs) != nil {
		var obj struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			t.Fatal(err)
		}
		msgs = obj.Messages
	}
	return msgs
}
