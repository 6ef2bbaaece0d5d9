package main

// End-to-end tests of the requests users send: prompt scoring, prompt
// lists, log-probability order, the developer role, template switches that
// would replace request fields, oversized input, and the error object of
// every refusal. They need only the embedded model.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// batchLines runs a batch over the lines on stdin and parses the results.
func batchLines(t *testing.T, lines []string, args ...string) (result, []map[string]any) {
	t.Helper()
	r := petal(t, strings.Join(lines, "\n")+"\n", append([]string{"batch", "-"}, args...)...)
	if strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("no results: exit %d, stderr %s", r.code, r.stderr)
	}
	return r, parseLines(t, r.stdout)
}

func errorOf(line map[string]any) map[string]any {
	if resp, ok := line["response"].(map[string]any); ok {
		e, _ := resp["body"].(map[string]any)["error"].(map[string]any)
		return e
	}
	e, _ := line["error"].(map[string]any)
	return e
}

func choicesOf(t *testing.T, line map[string]any) []map[string]any {
	t.Helper()
	if e := errorOf(line); e != nil {
		t.Fatalf("line %v failed: %v", line["line"], e)
	}
	var out []map[string]any
	for _, c := range line["choices"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func usageOf(line map[string]any, key string) float64 {
	return line["usage"].(map[string]any)[key].(float64)
}

// Item: {"max_tokens": 0, "echo": true, "logprobs": 1} scores the prompt and
// generates nothing, as evaluation harnesses expect.
func TestRequestEchoScoring(t *testing.T) {
	prompt := `import os\nimport sys\n\n\ndef main(argv):\n`
	_, lines := batchLines(t, []string{
		`{"prompt": "` + prompt + `", "max_tokens": 0, "echo": true, "logprobs": 1}`,
		`{"prompt": "` + prompt + `", "max_tokens": 1, "echo": true, "logprobs": 1, "temperature": 0}`,
		`{"prompt": "` + prompt + `", "max_tokens": 0, "logprobs": 1}`,
		`{"prompt": [792, 1201, 198], "max_tokens": 0, "echo": true}`,
	})
	score := choicesOf(t, lines[0])[0]
	var wantText string
	json.Unmarshal([]byte(`"`+prompt+`"`), &wantText)
	if score["text"] != wantText || score["finish_reason"] != "length" {
		t.Errorf("scoring choice: text %q finish %v", score["text"], score["finish_reason"])
	}
	if usageOf(lines[0], "completion_tokens") != 0 || usageOf(lines[0], "prompt_tokens") < 5 {
		t.Errorf("usage %v", lines[0]["usage"])
	}
	lp := score["logprobs"].(map[string]any)
	tl, tops := lp["token_logprobs"].([]any), lp["top_logprobs"].([]any)
	if float64(len(tl)) != usageOf(lines[0], "prompt_tokens") || tl[0] != nil || tops[0] != nil {
		t.Fatalf("%d token logprobs for %v prompt tokens, first %v", len(tl), usageOf(lines[0], "prompt_tokens"), tl[0])
	}
	for i := 1; i < len(tl); i++ {
		if _, ok := tl[i].(float64); !ok || len(tops[i].(map[string]any)) != 1 {
			t.Errorf("position %d: logprob %v top %v", i, tl[i], tops[i])
		}
	}
	// the prompt's scores are those a generating request reports for it
	gen := choicesOf(t, lines[1])[0]["logprobs"].(map[string]any)["token_logprobs"].([]any)
	if len(gen) != len(tl)+1 || fmt.Sprint(gen[:len(tl)]) != fmt.Sprint(tl) {
		t.Errorf("scores differ from a generating request's:\n%v\n%v", tl, gen)
	}
	if e := errorOf(lines[2]); e == nil || e["param"] != "max_tokens" || !strings.Contains(fmt.Sprint(e["message"]), "echo") {
		t.Errorf("max_tokens 0 without echo: %v", lines[2])
	}
	if c := choicesOf(t, lines[3])[0]; c["finish_reason"] != "length" || usageOf(lines[3], "prompt_tokens") != 3 || usageOf(lines[3], "completion_tokens") != 0 {
		t.Errorf("token-id prompt scoring: %v", lines[3])
	}
}

// Item: a list of prompts gives one choice per prompt, each as the prompt
// alone would give it, with usage and timings summed.
func TestRequestPromptList(t *testing.T) {
	_, lines := batchLines(t, []string{
		`{"prompt": ["def add(a, b):", "import os\n", "class Stack:"], "max_tokens": 5, "temperature": 0}`,
		`{"prompt": "def add(a, b):", "max_tokens": 5, "temperature": 0}`,
		`{"prompt": "import os\n", "max_tokens": 5, "temperature": 0}`,
		`{"prompt": "class Stack:", "max_tokens": 5, "temperature": 0}`,
		`{"prompt": [[792, 1201, 198], [792]], "max_tokens": 2, "temperature": 0, "echo": true}`,
		`{"prompt": ["a", ""]}`,
	})
	list := choicesOf(t, lines[0])
	if len(list) != 3 {
		t.Fatalf("%d choices for 3 prompts", len(list))
	}
	var promptTokens, completionTokens float64
	for i, c := range list {
		alone := choicesOf(t, lines[1+i])[0]
		if c["index"].(float64) != float64(i) || c["text"] != alone["text"] || c["finish_reason"] != alone["finish_reason"] {
			t.Errorf("choice %d: %v, alone %v", i, c, alone)
		}
		promptTokens += usageOf(lines[1+i], "prompt_tokens")
		completionTokens += usageOf(lines[1+i], "completion_tokens")
	}
	tm := lines[0]["timings"].(map[string]any)
	if usageOf(lines[0], "prompt_tokens") != promptTokens || usageOf(lines[0], "completion_tokens") != completionTokens ||
		usageOf(lines[0], "total_tokens") != promptTokens+completionTokens ||
		tm["prompt_n"].(float64) != promptTokens || tm["predicted_n"].(float64) != completionTokens {
		t.Errorf("usage %v timings %v, want prompt %v completion %v", lines[0]["usage"], tm, promptTokens, completionTokens)
	}
	ids := choicesOf(t, lines[4])
	if len(ids) != 2 || ids[1]["index"].(float64) != 1 || usageOf(lines[4], "prompt_tokens") != 4 {
		t.Errorf("token-id lists: %v", lines[4])
	}
	if e := errorOf(lines[5]); e == nil || e["param"] != "prompt[1]" {
		t.Errorf("empty second prompt: %v", lines[5])
	}
}

// orderedKeys reads a JSON object's keys in document order.
func orderedKeys(t *testing.T, raw json.RawMessage) ([]string, map[string]float64) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	vals := map[string]float64{}
	for dec.More() {
		k, _ := dec.Token()
		var v float64
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		vals[k.(string)] = v
	}
	return keys, vals
}

// Item: top_logprobs come in order of probability, highest first, for the
// completions form (an object per position) and the chat form (a list).
func TestRequestTopLogprobsOrder(t *testing.T) {
	r := petal(t, `{"prompt": "def fibonacci(n):\n", "max_tokens": 6, "logprobs": 5, "echo": true, "temperature": 0}`+"\n"+
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "logprobs": true, "top_logprobs": 5, "temperature": 0}`+"\n", "batch", "-")
	out := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(out) != 2 {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	var text struct {
		Choices []struct {
			Logprobs struct {
				TopLogprobs []json.RawMessage `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(out[0]), &text); err != nil || len(text.Choices) != 1 {
		t.Fatalf("%v: %s", err, out[0])
	}
	checked := 0
	for i, raw := range text.Choices[0].Logprobs.TopLogprobs {
		if string(raw) == "null" {
			continue
		}
		keys, vals := orderedKeys(t, raw)
		if len(keys) < 2 {
			t.Errorf("position %d: %s", i, raw)
		}
		for j := 1; j < len(keys); j++ {
			if vals[keys[j]] > vals[keys[j-1]] {
				t.Errorf("position %d: %q (%v) after %q (%v): %s", i, keys[j], vals[keys[j]], keys[j-1], vals[keys[j-1]], raw)
			}
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("only %d positions with alternatives", checked)
	}
	var chat struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					TopLogprobs []struct {
						Logprob float64 `json:"logprob"`
					} `json:"top_logprobs"`
				} `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(out[1]), &chat); err != nil || len(chat.Choices) != 1 || len(chat.Choices[0].Logprobs.Content) == 0 {
		t.Fatalf("%v: %s", err, out[1])
	}
	for i, pos := range chat.Choices[0].Logprobs.Content {
		if len(pos.TopLogprobs) != 5 {
			t.Errorf("chat position %d: %d alternatives", i, len(pos.TopLogprobs))
		}
		for j := 1; j < len(pos.TopLogprobs); j++ {
			if pos.TopLogprobs[j].Logprob > pos.TopLogprobs[j-1].Logprob {
				t.Errorf("chat position %d out of order: %v", i, pos.TopLogprobs)
			}
		}
	}
}

// Item: the developer role is rendered as system, and the result says so.
func TestRequestDeveloperRole(t *testing.T) {
	msgs := func(role string) string {
		return `{"messages": [{"role": "` + role + `", "content": "Answer in one word."}, {"role": "user", "content": "What does json.dumps do?"}], "max_tokens": 8, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}`
	}
	_, lines := batchLines(t, []string{msgs("developer"), msgs("system")})
	dev, sys := choicesOf(t, lines[0])[0], choicesOf(t, lines[1])[0]
	if fmt.Sprint(dev["message"]) != fmt.Sprint(sys["message"]) || usageOf(lines[0], "prompt_tokens") != usageOf(lines[1], "prompt_tokens") {
		t.Errorf("developer %v (%v tokens) against system %v (%v tokens)", dev["message"], usageOf(lines[0], "prompt_tokens"), sys["message"], usageOf(lines[1], "prompt_tokens"))
	}
	if !strings.Contains(fmt.Sprint(lines[0]["warnings"]), `"developer"`) || lines[1]["warnings"] != nil {
		t.Errorf("warnings %v / %v", lines[0]["warnings"], lines[1]["warnings"])
	}
}

// Item: a template switch may not replace what the request's own fields set.
func TestRequestKwargsCannotReplaceFields(t *testing.T) {
	_, lines := batchLines(t, []string{
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "chat_template_kwargs": {"messages": [{"role": "user", "content": "something else"}]}}`,
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "chat_template_kwargs": {"add_generation_prompt": false}}`,
	})
	for i, key := range []string{"messages", "add_generation_prompt"} {
		e := errorOf(lines[i])
		if e == nil || e["param"] != "chat_template_kwargs" || !strings.Contains(fmt.Sprint(e["message"]), `"`+key+`"`) {
			t.Errorf("kwargs.%s: %v", key, lines[i])
		}
	}
}

// petalMeasured is petal with the run's peak resident memory (bytes; 0
// where the system does not say).
func petalMeasured(t *testing.T, args ...string) (result, int64) {
	t.Helper()
	cmd := exec.Command(petalBin, args...)
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{out.String(), errb.String(), 0}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = int64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	return r, rss
}

// Item: a 20 MB message (or prompt) is refused quickly, from a lower bound
// on its token count, with the context error; a prompt just under the
// context is not refused by the bound.
func TestRequestHugeInputRefusedFast(t *testing.T) {
	huge := strings.Repeat("All work and no play makes Jack a dull boy. ", 20<<20/44)
	dir := t.TempDir()
	in := filepath.Join(dir, "huge.jsonl")
	chatLine, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": huge}}, "max_tokens": 2})
	promptLine, _ := json.Marshal(map[string]any{"prompt": huge, "max_tokens": 2})
	if err := os.WriteFile(in, append(append(append(chatLine, '\n'), promptLine...), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	petal(t, "", "tokenize", "--raw") // unpack the embedded model first, outside the timing
	start := time.Now()
	r, rss := petalMeasured(t, "batch", in)
	took := time.Since(start)
	lines := parseLines(t, r.stdout)
	if len(lines) != 2 {
		t.Fatalf("exit %d: %d results; stderr %s", r.code, len(lines), r.stderr)
	}
	for i, param := range []string{"messages", "prompt"} {
		e := errorOf(lines[i])
		if e == nil || e["code"] != "context_length_exceeded" || e["param"] != param || !strings.Contains(fmt.Sprint(e["message"]), "32768") {
			t.Errorf("result %d: %v", i, lines[i])
		}
	}
	t.Logf("two 20 MB requests refused in %v, %d MB peak", took, rss>>20)
	if took > 4*time.Second {
		t.Errorf("refusing two 20 MB requests took %v", took)
	}
	if rss > 512<<20 {
		t.Errorf("refusing two 20 MB requests took %d MB of memory", rss>>20)
	}

	// a prompt of the vocabulary's longest tokens: the bound is at its tightest
	text := strings.Repeat("--------------------------------", 40)
	tok := petal(t, text, "tokenize", "--raw")
	var ids struct {
		IDs []int `json:"ids"`
	}
	if err := json.Unmarshal([]byte(tok.stdout), &ids); err != nil || len(ids.IDs) == 0 {
		t.Fatalf("tokenize: %v %q %s", err, tok.stdout, tok.stderr)
	}
	n := len(ids.IDs)
	line := `{"prompt": "` + text + `", "max_tokens": 1, "temperature": 0}`
	_, fits := batchLines(t, []string{line}, "--max-context", fmt.Sprint(n+1))
	if c := choicesOf(t, fits[0]); usageOf(fits[0], "prompt_tokens") != float64(n) || len(c) != 1 {
		t.Errorf("%d-token prompt with a %d-token context: %v", n, n+1, fits[0])
	}
	_, over := batchLines(t, []string{line}, "--max-context", fmt.Sprint(n))
	if e := errorOf(over[0]); e == nil || e["code"] != "context_length_exceeded" || e["param"] != "prompt" {
		t.Errorf("%d-token prompt with a %d-token context: %v", n, n, over[0])
	}
}

// Item: every error result has a code (and the field at fault), whatever
// path refused it.
func TestRequestEveryErrorHasACode(t *testing.T) {
	long := strings.Repeat("word ", 200)
	cases := []struct{ line, param, code string }{
		{`this is not json`, "", "invalid_json"},
		{`[1, 2]`, "", "invalid_json"},
		{`{"custom_id": "e1", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}`, "url", "unsupported_value"},
		{`{"custom_id": "e2", "method": "GET", "url": "/v1/completions", "body": {"prompt": "x"}}`, "method", "unsupported_value"},
		{`{"model": "m"}`, "messages", "missing_required_parameter"},
		{`{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}`, "temperature", "invalid_type"},
		{`{"messages": [{"role": "user", "content": "hi"}], "temperature": 7}`, "temperature", "invalid_value"},
		{`{"custom_id": "dup", "prompt": "a", "max_tokens": 1}`, "", ""},
		{`{"custom_id": "dup", "prompt": "b", "max_tokens": 1}`, "custom_id", "duplicate_custom_id"},
		{`{"prompt": "` + long + `", "max_tokens": 1}`, "prompt", "context_length_exceeded"},
		{`{"messages": [{"role": "user", "content": "` + long + `"}], "max_tokens": 1}`, "messages", "context_length_exceeded"},
		{`{"prompt": [999999], "max_tokens": 1}`, "prompt", "invalid_value"},
		{`{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"tools": []}}`, "chat_template_kwargs", "invalid_value"},
		{`{"messages": [{"role": "user", "content": "hi", "x": ` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}]}`, "messages[0]", "invalid_value"},
		{`{"prompt": "x", "session": "s"}`, "session", "invalid_value"},
		{`{"messages": [{"role": "user", "content": "hi"}], "fork_from": "s"}`, "fork_from", "invalid_value"},
		{`{"session": "new", "fork_from": "nobody", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}`, "fork_from", ""},
		{`{"prompt": "x", "max_tokens": 0}`, "max_tokens", "invalid_value"},
		{`{"prompt": "x", "stream": true}`, "stream", "unsupported_value"},
	}
	var in []string
	for _, c := range cases {
		in = append(in, c.line)
	}
	_, lines := batchLines(t, in, "--max-context", "128", "--sessions", t.TempDir())
	if len(lines) != len(cases) {
		t.Fatalf("%d results for %d lines", len(lines), len(cases))
	}
	for i, c := range cases {
		e := errorOf(lines[i])
		if c.code == "" && c.param == "" {
			continue // the line that succeeds
		}
		if e == nil {
			t.Errorf("line %d succeeded: %v", i+1, lines[i])
			continue
		}
		if code, _ := e["code"].(string); code == "" || c.code != "" && code != c.code {
			t.Errorf("line %d: code %v, want %q: %v", i+1, e["code"], c.code, e)
		}
		if c.param != "" && e["param"] != c.param {
			t.Errorf("line %d: param %v, want %q: %v", i+1, e["param"], c.param, e)
		}
	}
	// the chat template refuses the conversation
	tmpl := filepath.Join(t.TempDir(), "strict.jinja")
	os.WriteFile(tmpl, []byte(`{{ raise_exception("this template takes no conversations") }}`), 0o644)
	_, lines = batchLines(t, []string{`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}`}, "--chat-template", tmpl)
	if e := errorOf(lines[0]); e == nil || e["code"] != "invalid_value" || e["param"] != "messages" || !strings.Contains(fmt.Sprint(e["message"]), "takes no conversations") {
		t.Errorf("template error: %v", lines[0])
	}
	// (a failure of petal itself, status 500, gets internal_error: cli's TestJobErrorsHaveCodes)
}
