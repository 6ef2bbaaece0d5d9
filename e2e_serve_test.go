package main

// End-to-end tests of petal serve: the binary on the embedded model, called
// by curl, by the official openai npm package, and by many clients at once.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"petal/engine/chat"
	"petal/httpapi"
	"petal/jobs"
)

// openaiNodePackage is the version of the openai npm package the tests
// drive the server with (6.x runs on Node 18 and 20; 7.x needs Node 22).
const openaiNodePackage = "openai@6.49.0"

type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedText
	exited chan error
}

// lockedText is text a process writes while a test reads it.
type lockedText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *lockedText) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedText) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listenLine = regexp.MustCompile(`on (http://[0-9.:\[\]]+) `)

// startServe runs petal serve on a free loopback port and waits until it
// listens.
func startServe(t *testing.T, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(petalBin, append([]string{"serve", "--port", "0"}, args...)...)
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	pr, pw := io.Pipe()
	p := &serveProcess{cmd: cmd, stderr: &lockedText{}, exited: make(chan error, 1)}
	cmd.Stderr = io.MultiWriter(p.stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait(); pw.Close() }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case p.url = <-found:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("petal serve did not start listening: %s", p.stderr.String())
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	return p
}

func httpPost(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// metric reads one sample from /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestServeSSEWithCurl: curl -N sees the stream as OpenAI frames it.
func TestServeSSEWithCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	p := startServe(t, "--quiet")
	out, err := exec.Command(curl, "-sS", "-N", "-i", p.url+"/v1/chat/completions", "-H", "Content-Type: application/json",
		"-d", `{"messages": [{"role": "user", "content": "What does json.dumps do?"}], "max_tokens": 12, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}`).Output()
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	head, body, ok := strings.Cut(string(out), "\r\n\r\n")
	if !ok || !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "Content-Type: text/event-stream") {
		t.Fatalf("response head %q", head)
	}
	lines := strings.Split(body, "\n")
	if len(lines) < 8 || lines[len(lines)-1] != "" || lines[len(lines)-2] != "" || lines[len(lines)-3] != "data: [DONE]" {
		t.Fatalf("stream does not end with data: [DONE] and a blank line: %q", body)
	}
	var ids = map[string]bool{}
	for i := 0; i < len(lines)-3; i += 2 {
		data, ok := strings.CutPrefix(lines[i], "data: ")
		if !ok || lines[i+1] != "" {
			t.Fatalf("line %d: %q then %q: want a data: line and a blank line", i, lines[i], lines[i+1])
		}
		var chunk struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("line %d: %q is not a chunk (%v)", i, data, err)
		}
		ids[chunk.ID] = true
	}
	if len(ids) != 1 {
		t.Errorf("chunk ids %v: one answer has one id", ids)
	}
	if !strings.Contains(body, `"choices":[],"usage":{"prompt_tokens":`) {
		t.Errorf("no usage chunk with include_usage: %q", body)
	}
}

var (
	npmOnce sync.Once
	npmDir  string
	npmErr  error
)

// openaiNode is the node_modules folder holding the openai package:
// $PETAL_OPENAI_NODE_MODULES (CI installs it there), else a temporary
// install; the test skips when node or npm is missing or the install fails.
func openaiNode(t *testing.T) (node, modules string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the openai npm package cannot be run")
	}
	if dir := os.Getenv("PETAL_OPENAI_NODE_MODULES"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "openai", "package.json")); err != nil {
			t.Fatalf("PETAL_OPENAI_NODE_MODULES=%s has no openai package: %v", dir, err)
		}
		return node, dir
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: cannot install " + openaiNodePackage + " (or set PETAL_OPENAI_NODE_MODULES)")
	}
	npmOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(petalBin), "npm")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--no-save", "--loglevel=error", openaiNodePackage).CombinedOutput()
		if err != nil {
			npmErr = fmt.Errorf("%v: %s", err, out)
		}
		npmDir = filepath.Join(dir, "node_modules")
	})
	if npmErr != nil {
		t.Skipf("npm could not install %s (offline?): %v; set PETAL_OPENAI_NODE_MODULES to a folder that has it", openaiNodePackage, npmErr)
	}
	return node, npmDir
}

// runNode runs a script with the openai package against base.
func runNode(t *testing.T, node, modules, base, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.js")
	os.WriteFile(path, []byte(script), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, path)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "PETAL_URL="+base+"/v1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, out)
	}
	return string(out)
}

const openaiClientScript = `
const assert = require('assert');
const OpenAI = require('openai');
const client = new OpenAI({ baseURL: process.env.PETAL_URL, apiKey: 'test-key', maxRetries: 0 });

(async () => {
  // the model list
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  assert.strictEqual(models.length, 1);
  const model = models[0].id;
  assert.strictEqual(models[0].object, 'model');

  // a streamed chat, with usage
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'What does json.dumps do?' }],
    max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = '', chunks = 0, finish = null, usage = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      content += c.delta.content || '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 2 && content.length > 0 && finish, 'streamed chat: ' + chunks + ' chunks, ' + JSON.stringify(content));
  assert.ok(usage && usage.completion_tokens > 0 && usage.prompt_tokens > 0, 'usage ' + JSON.stringify(usage));
  const whole = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'What does json.dumps do?' }], max_tokens: 16, temperature: 0,
  });
  assert.strictEqual(whole.choices[0].message.content, content, 'streamed and whole answers differ');

  // a completion with logprobs
  const cmpl = await client.completions.create({ model, prompt: 'def fibonacci(n):', max_tokens: 8, temperature: 0, logprobs: 2 });
  const lp = cmpl.choices[0].logprobs;
  assert.strictEqual(cmpl.object, 'text_completion');
  assert.strictEqual(lp.tokens.length, cmpl.usage.completion_tokens);
  assert.strictEqual(lp.tokens.join(''), cmpl.choices[0].text);
  assert.ok(lp.token_logprobs.every(x => x <= 0) && lp.top_logprobs.every(m => Object.keys(m).length >= 1));

  // a tool-call round trip: the tools go in, the model's call (or, as the
  // small model rarely calls one, the call an agent would have received)
  // and the tool's result go back, and the model answers
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const first = await client.chat.completions.create({ model, messages, tools, max_tokens: 24, temperature: 0 });
  const msg = first.choices[0].message;
  let call = (msg.tool_calls || [])[0];
  if (call) assert.strictEqual(first.choices[0].finish_reason, 'tool_calls');
  call = call || { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
  messages.push({ role: 'assistant', content: null, tool_calls: [call] });
  messages.push({ role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 21, "sky": "clear"}' });
  const runner = client.chat.completions.stream({ model, messages, tools, max_tokens: 24, temperature: 0 });
  const final = await runner.finalChatCompletion();
  assert.strictEqual(typeof final.choices[0].message.content, 'string', 'answer after the tool result: ' + JSON.stringify(final.choices[0].message));
  assert.ok(['stop', 'length', 'tool_calls'].includes(final.choices[0].finish_reason), 'finish ' + final.choices[0].finish_reason);

  // errors come back as the SDK's typed errors
  try {
    await client.chat.completions.create({ model, messages: [], max_tokens: 4 });
    assert.fail('an empty messages list was accepted');
  } catch (e) {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.strictEqual(e.param, 'messages');
  }
  console.log(JSON.stringify({ model, chunks, content, completion: cmpl.choices[0].text, called: !!(msg.tool_calls || []).length }));
})().catch(e => { console.error(e); process.exit(1); });
`

// TestServeOpenAINodeClient: the official openai npm package runs a
// streamed chat, a completion with logprobs, a tool-call round trip, the
// model list and an error against petal serve on the embedded model.
func TestServeOpenAINodeClient(t *testing.T) {
	node, modules := openaiNode(t)
	p := startServe(t, "--quiet", "--api-key", "test-key")
	out := runNode(t, node, modules, p.url, openaiClientScript)
	t.Logf("node client: %s", strings.TrimSpace(out))
	if !strings.Contains(out, `"model":"tiny-qwen36-moe-4bit (embedded)"`) {
		t.Errorf("node client output %q", out)
	}
}

const openaiToolStreamScript = `
const assert = require('assert');
const OpenAI = require('openai');
const client = new OpenAI({ baseURL: process.env.PETAL_URL, apiKey: 'x', maxRetries: 0 });
(async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const req = { model: 'm', messages: [{ role: 'user', content: 'weather in Paris?' }], tools };
  // streamed, through the SDK's accumulating helper
  const runner = client.chat.completions.stream(req);
  let reasoning = '';
  runner.on('chunk', c => { for (const ch of c.choices) reasoning += ch.delta.reasoning_content || ''; });
  const final = await runner.finalChatCompletion();
  const m = final.choices[0].message;
  assert.strictEqual(final.choices[0].finish_reason, 'tool_calls');
  assert.strictEqual(m.tool_calls.length, 1);
  assert.strictEqual(m.tool_calls[0].type, 'function');
  assert.strictEqual(m.tool_calls[0].function.name, 'get_weather');
  assert.deepStrictEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.ok(m.tool_calls[0].id.startsWith('call_'));
  assert.strictEqual(m.content, 'Let me check.');
  assert.strictEqual(reasoning, 'The user wants the weather.');
  // and whole
  const whole = await client.chat.completions.create(req);
  assert.strictEqual(whole.choices[0].message.tool_calls[0].function.name, 'get_weather');
  console.log('ok');
})().catch(e => { console.error(e); process.exit(1); });
`

// toolCaller answers every chat job with a reasoning block, a sentence and
// a tool call, as a Qwen model writes them (the embedded model is too small
// to call tools), parsed as the engine's executor parses them.
type toolCaller struct{}

func (toolCaller) Execute(ctx context.Context, job *jobs.Job, out httpapi.Stream) (*httpapi.Outcome, *httpapi.Failure) {
	text := "The user wants the weather.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
	if out.Prompt != nil {
		out.Prompt("<|im_start|>assistant\n<think>\n")
	}
	for i := 0; i < len(text); i += 5 {
		if out.Text != nil {
			out.Text(text[i:min(i+5, len(text))])
		}
	}
	p := chat.ParseOutput(text, chat.ParseOptions{InThinking: true, Tools: job.Tools})
	msg := jobs.ChatMessage{ReasoningContent: p.Reasoning, Content: &p.Content}
	for _, tc := range p.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, jobs.ToolCall{ID: tc.ID, Function: jobs.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
	}
	return &httpapi.Outcome{Body: &jobs.ChatCompletion{Model: "m", Choices: []jobs.ChatChoice{{Message: msg, FinishReason: jobs.FinishToolCalls}}, Usage: jobs.NewUsage(5, 30, 0, 6)}}, nil
}

type toolCallerModel struct{}

func (toolCallerModel) Name() string                               { return "m" }
func (toolCallerModel) MaxContext() int                            { return 1024 }
func (toolCallerModel) VocabSize() int                             { return 1 }
func (toolCallerModel) Encode(string) []int32                      { return nil }
func (toolCallerModel) Decode([]int32) string                      { return "" }
func (toolCallerModel) Token(int32) string                         { return "" }
func (toolCallerModel) RenderChat(*jobs.Job, bool) (string, error) { return "", nil }

// TestServeToolCallStreamWithOpenAINode: the SDK's stream helper rebuilds
// petal's streamed tool call (delta.tool_calls), reasoning and content.
func TestServeToolCallStreamWithOpenAINode(t *testing.T) {
	node, modules := openaiNode(t)
	ts := httptest.NewServer(httpapi.New(httpapi.Config{Executor: toolCaller{}, Model: toolCallerModel{}}).Handler())
	defer ts.Close()
	if out := runNode(t, node, modules, ts.URL, openaiToolStreamScript); strings.TrimSpace(out) != "ok" {
		t.Errorf("node client: %s", out)
	}
}

// TestServeBoundedLoad: 16 clients send 200 requests to a server with a
// queue of 8: every request is answered once, served whole or refused
// with 429 and Retry-After, none lost (the server's counts agree), and the
// server's memory and goroutines stay flat from one quarter of the load to
// the next.
func TestServeBoundedLoad(t *testing.T) {
	// a 2K context keeps each request's state at a few MB, so that a leak
	// of anything per request stands out from the garbage collector's swing
	p := startServe(t, "--quiet", "--queue", "8", "--prefix-cache", "64", "--max-context", "2048")
	const clients, total, phases = 16, 200, 4
	body := func(i int) string {
		return fmt.Sprintf(`{"messages": [{"role": "user", "content": "Question %d: what does json.dumps do?"}], "max_tokens": 8, "temperature": 0, "stream": %t}`, i%10, i%2 == 0)
	}
	// warm up: every distinct prompt, so the caches are full before measuring
	const warmup = 20
	for i := range warmup {
		if resp, b := httpPost(t, p.url+"/v1/chat/completions", body(i)); resp.StatusCode != 200 {
			t.Fatalf("warm-up: %d %s", resp.StatusCode, b)
		}
	}
	type sample struct{ rss, heap, goroutines float64 }
	measure := func() sample {
		time.Sleep(100 * time.Millisecond) // the last answers' connections settle
		return sample{metric(t, p.url, "process_resident_memory_bytes"), metric(t, p.url, "go_memstats_heap_inuse_bytes"), metric(t, p.url, "go_goroutines")}
	}
	samples := []sample{measure()}

	type answer struct {
		status int
		ok     bool
	}
	answers := make([]answer, total)
	httpClient := &http.Client{Timeout: 60 * time.Second}
	one := func(i int) {
		resp, err := httpClient.Post(p.url+"/v1/chat/completions", "application/json", strings.NewReader(body(i)))
		if err != nil {
			return // status 0: lost
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{status: resp.StatusCode}
		switch resp.StatusCode {
		case 200:
			a.ok = strings.Contains(string(b), `"finish_reason":"stop"`) || strings.Contains(string(b), `"finish_reason":"length"`)
			if i%2 == 0 {
				a.ok = a.ok && strings.HasSuffix(string(b), "data: [DONE]\n\n")
			}
		case 429:
			a.ok = resp.Header.Get("Retry-After") != "" && strings.Contains(string(b), "queue_full")
			time.Sleep(30 * time.Millisecond) // a client's pause before its next request
		}
		answers[i] = a
	}
	start := time.Now()
	for phase := range phases {
		var mu sync.Mutex
		next, end := phase*total/phases, (phase+1)*total/phases
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= end {
						return
					}
					one(i)
				}
			}()
		}
		wg.Wait()
		samples = append(samples, measure())
	}
	elapsed := time.Since(start)

	served, refused := 0, 0
	for i, a := range answers {
		switch {
		case !a.ok:
			t.Errorf("request %d: status %d, not a whole answer or a proper 429", i, a.status)
		case a.status == 200:
			served++
		case a.status == 429:
			refused++
		}
	}
	countedServed := metric(t, p.url, `petal_requests_total{endpoint="/v1/chat/completions",status="200"}`) - warmup
	counted429 := metric(t, p.url, `petal_requests_total{endpoint="/v1/chat/completions",status="429"}`)
	var trace []string
	for _, s := range samples {
		trace = append(trace, fmt.Sprintf("%.0f/%.0f MB, %.0f goroutines", s.rss/1e6, s.heap/1e6, s.goroutines))
	}
	t.Logf("%d requests from %d clients in %.1f s: %d served, %d refused with 429 (the server counted %v and %v); RSS/heap in use after the warm-up and each quarter: %s",
		total, clients, elapsed.Seconds(), served, refused, countedServed, counted429, strings.Join(trace, "; "))
	if served+refused != total || float64(served) != countedServed || float64(refused) != counted429 {
		t.Errorf("answers do not add up: %d served + %d refused of %d; the server counted %v and %v", served, refused, total, countedServed, counted429)
	}
	if served < 20 || refused == 0 {
		t.Errorf("%d served, %d refused: the load should both fill the queue and be served", served, refused)
	}
	// flat: the last quarter ends no higher than the highest before it,
	// give or take the collector's swing (the heap in use is sampled
	// between collections: it was seen 35 % above the earlier peak with
	// nothing leaking, on a loaded 2-core machine); a leak of each
	// request's state (several MB) would add hundreds of MB per quarter
	var peak sample
	for _, s := range samples[:len(samples)-1] {
		peak = sample{max(peak.rss, s.rss), max(peak.heap, s.heap), max(peak.goroutines, s.goroutines)}
	}
	last := samples[len(samples)-1]
	if last.rss > peak.rss*1.2+32e6 || last.heap > peak.heap*1.5+32e6 || last.goroutines > peak.goroutines+4 {
		t.Errorf("memory or goroutines grew over the load: %s", strings.Join(trace, "; "))
	}
	if d := metric(t, p.url, "petal_queue_depth"); d != 0 {
		t.Errorf("queue depth %v after the load", d)
	}
}

// TestServeSIGTERMFinishesTheRunningRequest: SIGTERM stops accepting, the
// running stream finishes, and petal exits 0.
func TestServeSIGTERMFinishesTheRunningRequest(t *testing.T) {
	p := startServe(t, "--quiet")
	resp, err := http.Post(p.url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": "import os\nimport sys\n", "max_tokens": 300, "temperature": 0, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := io.ReadAll(r)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || strings.Contains(string(rest), `"cancelled"`) {
		t.Errorf("the running stream was cut short: ...%q", string(rest)[max(0, len(rest)-200):])
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit: %v; stderr %s", err, p.stderr.String())
		}
		p.exited <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("petal serve did not exit after SIGTERM")
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(p.url, "http://"), time.Second); err == nil {
		t.Errorf("still accepting connections after exit")
	}
	if !strings.Contains(p.stderr.String(), "stopped") {
		t.Errorf("stderr %q", p.stderr.String())
	}
}
