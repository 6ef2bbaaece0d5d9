package main

// End-to-end tests: build the petal binary and run it as a user would, on
// the embedded default model (the oracle model). They need nothing else:
// only the checks against the reference data in ../shared/oracle (greedy
// continuations, NLLs, the oracle command) skip when it is absent, each
// saying what is missing.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var petalBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "petal-e2e-")
	if err != nil {
		panic(err)
	}
	petalBin = filepath.Join(dir, "petal")
	build := exec.Command("go", "build", "-o", petalBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building petal: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// petal runs the binary with its own cache folder and no PETAL_MODEL.
func petal(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(petalBin, args...)
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PETAL_") {
			env = append(env, kv)
		}
	}
	return env
}

var sharedCache string

func cacheDir(t *testing.T) string {
	if sharedCache == "" {
		sharedCache = filepath.Join(filepath.Dir(petalBin), "cache")
	}
	return sharedCache
}

type referenceGreedy struct {
	Name          string `json:"name"`
	PromptText    string `json:"prompt_text"`
	GeneratedText string `json:"generated_text"`
}

// oracleDir is the reference data (../shared/oracle beside the repository);
// PETAL_TEST_ORACLE points elsewhere, or at nothing to see which tests need it.
func oracleDir() string {
	if dir := os.Getenv("PETAL_TEST_ORACLE"); dir != "" {
		return dir
	}
	return "../shared/oracle"
}

type referenceSequence struct {
	Name string  `json:"name"`
	IDs  []int   `json:"ids"`
	NLL  float64 `json:"nll"`
}

// referenceDoc reads reference.json, or skips the calling test (only a test
// that compares with the reference may call it), naming the missing file.
func referenceDoc(t *testing.T) (greedy []referenceGreedy, sequences []referenceSequence) {
	t.Helper()
	path := filepath.Join(oracleDir(), "reference", "reference.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("this test compares with the reference data, and %s is missing (%v): it comes with the oracle folder, ../shared/oracle", path, err)
	}
	var doc struct {
		Greedy    []referenceGreedy   `json:"greedy"`
		Sequences []referenceSequence `json:"sequences"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return doc.Greedy, doc.Sequences
}

// greedyCases are the reference greedy continuations; a test that calls it
// skips where the reference data is absent.
func greedyCases(t *testing.T) []referenceGreedy {
	t.Helper()
	greedy, _ := referenceDoc(t)
	return greedy
}

// TestRunOneShot: a chat prompt and a raw completion stream to stdout,
// timing on stderr; with the reference data, they are its greedy
// continuations.
func TestRunOneShot(t *testing.T) {
	// rendered with enable_thinking false; the answer ends at <|im_end|>
	chat := petal(t, "", "run", "--temperature", "0", "--no-think", "What does the function `dumps` in the `json` module do?")
	if chat.code != 0 || strings.TrimSpace(chat.stdout) == "" {
		t.Fatalf("chat run: exit %d, stdout %q\nstderr: %s", chat.code, chat.stdout, chat.stderr)
	}
	if !strings.Contains(chat.stderr, "prompt") || !strings.Contains(chat.stderr, "tok/s") {
		t.Errorf("no timing line on stderr: %q", chat.stderr)
	}
	// plain completion, 32 tokens, flags after the argument
	const fibonacci = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
	raw := petal(t, "", "run", "--raw", fibonacci, "--temperature", "0", "--max-tokens", "32", "--quiet")
	if raw.code != 0 || raw.stdout == "" || raw.stderr != "" {
		t.Fatalf("raw run: exit %d, stdout %q, stderr %q", raw.code, raw.stdout, raw.stderr)
	}
	// stdin is the context, the argument the instruction
	r := petal(t, "some notes", "run", "--temperature", "0", "--max-tokens", "4", "--json", "Summarise this")
	var body map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &body) != nil || body["object"] != "chat.completion" {
		t.Fatalf("--json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := petal(t, "", "run"); r.code != 2 || !strings.Contains(r.stderr, "no prompt") {
		t.Errorf("run without a prompt: exit %d, stderr %q", r.code, r.stderr)
	}

	t.Run("reference", func(t *testing.T) {
		cases := greedyCases(t)
		// chat_json_dumps: the answer ends at <|im_end|>
		if want := strings.SplitN(cases[2].GeneratedText, "<|im_end|>", 2)[0]; strings.TrimSpace(chat.stdout) != want {
			t.Errorf("chat run: stdout %q, want %q", chat.stdout, want)
		}
		// code_fibonacci
		if cases[0].PromptText != fibonacci {
			t.Fatalf("reference case 0 is %q, not %q", cases[0].PromptText, fibonacci)
		}
		if raw.stdout != cases[0].GeneratedText+"\n" {
			t.Errorf("raw run: stdout %q, want %q", raw.stdout, cases[0].GeneratedText)
		}
	})
}

const mixedBatch = `{"custom_id": "c1", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "What does the function ` + "`dumps`" + ` in the ` + "`json`" + ` module do?"}], "temperature": 0, "max_tokens": 20, "chat_template_kwargs": {"enable_thinking": false}}}
{"custom_id": "c2", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}
this is not json

{"prompt": "import os\nimport sys\n\n\ndef main(argv):\n", "temperature": 0, "max_tokens": 8, "logprobs": 2, "echo": true}
{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}
{"custom_id": "c1", "messages": [{"role": "user", "content": "duplicate id"}]}
{"custom_id": "c3", "method": "POST", "url": "/v1/completions", "body": {"prompt": [792, 1201, 198], "max_tokens": 3, "temperature": 0}}
`

// TestBatchMixedLines: one result per non-blank input line, in order; bad
// lines get error results naming the problem; exit code 1.
func TestBatchMixedLines(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.jsonl")
	in := filepath.Join(t.TempDir(), "jobs.jsonl")
	os.WriteFile(in, []byte(mixedBatch), 0o644)
	r := petal(t, "", "batch", in, "-o", out)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (some jobs failed); stderr %s", r.code, r.stderr)
	}
	lines := readLines(t, out)
	wantLines := []int{1, 2, 3, 5, 6, 7, 8}
	if len(lines) != len(wantLines) {
		t.Fatalf("%d result lines, want %d:\n%s", len(lines), len(wantLines), strings.Join(rawLines(t, out), "\n"))
	}
	for i, l := range lines {
		if int(l["line"].(float64)) != wantLines[i] {
			t.Errorf("result %d answers line %v, want %d", i, l["line"], wantLines[i])
		}
	}
	// envelope success: a Batch output line with a chat.completion body
	chat := lines[0]["response"].(map[string]any)
	if chat["status_code"].(float64) != 200 || lines[0]["custom_id"] != "c1" {
		t.Errorf("line 1: %v", lines[0])
	}
	body := chat["body"].(map[string]any)
	checkCompletion(t, body, "chat.completion")
	msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if msg["content"] != "Return the current json file object." {
		t.Errorf("chat content %q", msg["content"])
	}
	// envelope error: status 400 with the message naming the url
	errResp := lines[1]["response"].(map[string]any)
	if errResp["status_code"].(float64) != 400 || !strings.Contains(fmt.Sprint(errResp["body"]), "/v1/embeddings") {
		t.Errorf("line 2: %v", lines[1])
	}
	// bare errors: not JSON, a wrong type, a duplicate custom_id
	for i, want := range map[int]string{2: "JSON", 4: "temperature", 5: "custom_id"} {
		e, ok := lines[i]["error"].(map[string]any)
		if resp, isEnvelope := lines[i]["response"].(map[string]any); isEnvelope {
			// a line that is not JSON is answered in the form of the lines before it
			e, ok = resp["body"].(map[string]any)["error"].(map[string]any)
		}
		if !ok || !strings.Contains(fmt.Sprint(e["message"]), want) {
			t.Errorf("result %d: %v, want an error about %s", i, lines[i], want)
		}
	}
	// bare completion with echo + logprobs: prompt logprobs, first null
	checkCompletion(t, lines[3], "text_completion")
	lp := lines[3]["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
	tl := lp["token_logprobs"].([]any)
	if tl[0] != nil || len(tl) != 11+8 {
		t.Errorf("echo logprobs: %d entries (want 19), first %v", len(tl), tl[0])
	}
	// token-id prompt in an envelope
	checkCompletion(t, lines[6]["response"].(map[string]any)["body"].(map[string]any), "text_completion")
}

// checkCompletion checks the OpenAI object and the usage/timings invariants.
func checkCompletion(t *testing.T, body map[string]any, object string) {
	t.Helper()
	if body["object"] != object || body["id"] == "" || len(body["choices"].([]any)) != 1 {
		t.Errorf("not a %s: %v", object, body)
		return
	}
	u := body["usage"].(map[string]any)
	tm := body["timings"].(map[string]any)
	num := func(m map[string]any, k string) float64 { return m[k].(float64) }
	if num(tm, "prompt_n")+num(tm, "cache_n") != num(u, "prompt_tokens") {
		t.Errorf("prompt_n %v + cache_n %v != prompt_tokens %v", tm["prompt_n"], tm["cache_n"], u["prompt_tokens"])
	}
	if num(u, "total_tokens") != num(u, "prompt_tokens")+num(u, "completion_tokens") || num(tm, "predicted_n") != num(u, "completion_tokens") {
		t.Errorf("usage %v and timings %v disagree", u, tm)
	}
	if want := num(tm, "prompt_n") / num(tm, "prompt_ms") * 1000; math.Abs(num(tm, "prompt_per_second")-want) > 1e-6*want {
		t.Errorf("prompt_per_second %v, want %v", tm["prompt_per_second"], want)
	}
	if n := num(tm, "predicted_n"); n > 1 {
		if want := (n - 1) / num(tm, "predicted_ms") * 1000; math.Abs(num(tm, "predicted_per_second")-want) > 1e-6*want {
			t.Errorf("predicted_per_second %v, want %v", tm["predicted_per_second"], want)
		}
	}
	for _, k := range []string{"load_ms", "restore_ms", "save_ms", "ttft_ms", "total_ms"} {
		if _, ok := tm[k]; !ok {
			t.Errorf("timings lack %s", k)
		}
	}
}

// TestBatchPipeline: stdin to stdout, nothing but results on stdout and
// nothing on stderr when it is not a terminal.
func TestBatchPipeline(t *testing.T) {
	jobs := `{"prompt": "def f(x):", "max_tokens": 4, "temperature": 0}` + "\n" +
		`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}` + "\n"
	r := petal(t, jobs, "batch", "-")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	n := 0
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("stdout line %q is not JSON", sc.Text())
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d result lines on stdout, want 2: %q", n, r.stdout)
	}
}

// TestBatchInterruptAndResume: Ctrl-C finishes the current line and exits
// 130; --resume then completes the batch with every job written once.
func TestBatchInterruptAndResume(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "jobs.jsonl"), filepath.Join(dir, "out.jsonl")
	var jobs strings.Builder
	const n = 40
	for i := range n {
		fmt.Fprintf(&jobs, `{"custom_id": "j%d", "prompt": "def f%d(x):", "max_tokens": 48, "temperature": 0}`+"\n", i, i)
	}
	os.WriteFile(in, []byte(jobs.String()), 0o644)

	cmd := exec.Command(petalBin, "batch", in, "-o", out)
	cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(out); bytes.Count(data, []byte("\n")) >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("after SIGINT: %v, want exit code 130", err)
	}
	first := readLines(t, out)
	if len(first) == 0 || len(first) >= n {
		t.Fatalf("interrupted run wrote %d of %d results", len(first), n)
	}
	r := petal(t, "", "batch", in, "-o", out, "--resume")
	if r.code != 0 {
		t.Fatalf("resume: exit %d, stderr %s", r.code, r.stderr)
	}
	seen := map[string]int{}
	for _, l := range readLines(t, out) {
		seen[l["custom_id"].(string)]++
		if reason := l["choices"].([]any)[0].(map[string]any)["finish_reason"]; reason == "cancelled" {
			t.Errorf("job %v finished with %v after resume", l["custom_id"], reason)
		}
	}
	for i := range n {
		if c := seen[fmt.Sprintf("j%d", i)]; c != 1 {
			t.Errorf("job j%d has %d results, want 1", i, c)
		}
	}
}

// TestShardAndMerge: two shards merged equal one whole run.
func TestShardAndMerge(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "jobs.jsonl")
	var jobs strings.Builder
	for i := range 5 {
		fmt.Fprintf(&jobs, `{"custom_id": "s%d", "prompt": "x = %d", "max_tokens": 3, "temperature": 0}`+"\n", i, i)
	}
	os.WriteFile(in, []byte(jobs.String()), 0o644)
	for _, s := range []string{"0/2", "1/2"} {
		if r := petal(t, "", "batch", in, "--shard", s, "-o", filepath.Join(dir, "part"+s[:1]+".jsonl")); r.code != 0 {
			t.Fatalf("shard %s: exit %d %s", s, r.code, r.stderr)
		}
	}
	r := petal(t, "", "merge", filepath.Join(dir, "part1.jsonl"), filepath.Join(dir, "part0.jsonl"), "--jobs", in)
	if r.code != 0 {
		t.Fatalf("merge: exit %d %s", r.code, r.stderr)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var v map[string]any
		json.Unmarshal([]byte(line), &v)
		got = append(got, v["custom_id"].(string))
	}
	if strings.Join(got, ",") != "s0,s1,s2,s3,s4" {
		t.Errorf("merged order %v", got)
	}
}

// TestPerplexityJSON: the stable --json format, and the reference NLL.
func TestPerplexityJSON(t *testing.T) {
	in := `{"tokens": [792, 1201, 198, 792, 1473, 650, 324, 3688, 2438, 85, 323]}` + "\n" + `{"text": "import os\n"}` + "\n" + `{"tokens": [1]}` + "\n"
	r := petal(t, in, "perplexity", "--json", "-")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 1 || len(lines) != 3 {
		t.Fatalf("exit %d (want 1: one line is too short), %d lines: %s %s", r.code, len(lines), r.stdout, r.stderr)
	}
	var first struct {
		N              int       `json:"n"`
		NLL            float64   `json:"nll"`
		PPL            float64   `json:"ppl"`
		TargetLogprobs []float64 `json:"target_logprobs"`
		Argmax         []int     `json:"argmax"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.N != 11 || len(first.TargetLogprobs) != 10 || len(first.Argmax) != 10 || math.Abs(first.PPL-math.Exp(first.NLL)) > 1e-9 {
		t.Errorf("perplexity line: %+v", first)
	}
	if !strings.Contains(lines[2], "error") {
		t.Errorf("a 1-token line should be an error: %s", lines[2])
	}

	t.Run("reference", func(t *testing.T) {
		_, sequences := referenceDoc(t)
		var in strings.Builder
		for _, s := range sequences {
			b, _ := json.Marshal(map[string]any{"tokens": s.IDs})
			in.Write(append(b, '\n'))
		}
		r := petal(t, in.String(), "perplexity", "--json", "-")
		got := parseLines(t, r.stdout)
		if r.code != 0 || len(got) != len(sequences) {
			t.Fatalf("exit %d, %d lines for %d sequences: %s", r.code, len(got), len(sequences), r.stderr)
		}
		for i, s := range sequences {
			if nll := got[i]["nll"].(float64); math.Abs(nll-s.NLL) > 1e-4*s.NLL {
				t.Errorf("%s: nll %v, reference %v", s.Name, nll, s.NLL)
			}
		}
	})
}

// TestInspectAndTokenizers: inspect describes the embedded model; tokenize,
// detokenize and chat-template round-trip.
func TestInspectAndTokenizers(t *testing.T) {
	r := petal(t, "", "inspect", "--json")
	var info struct {
		Parameters int64 `json:"parameters"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil || info.Parameters != 25313376 {
		t.Fatalf("inspect: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	r = petal(t, `{"text": "import os\nimport sys\n"}`+"\n", "tokenize")
	var tok struct {
		IDs []int `json:"ids"`
	}
	if json.Unmarshal([]byte(r.stdout), &tok) != nil || fmt.Sprint(tok.IDs) != "[792 1201 198 792 1473 198]" {
		t.Fatalf("tokenize: %s %s", r.stdout, r.stderr)
	}
	r = petal(t, `{"ids": [792, 1201, 198, 4072]}`+"\n", "detokenize", "--skip-special")
	if strings.TrimSpace(r.stdout) != `{"text":"import os\n"}` {
		t.Errorf("detokenize: %s", r.stdout)
	}
	r = petal(t, `{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}`, "chat-template")
	if r.stdout != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("chat-template: %q %s", r.stdout, r.stderr)
	}
}

func rawLines(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range rawLines(t, path) {
		if l == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("result line %q: %v", l, err)
		}
		out = append(out, v)
	}
	return out
}

// TestOracleCommand: the stage-by-stage comparison passes on the CPU backend,
// names the first stage when the bar is impossible to meet, and holds a
// backend to the bfloat16 bars when asked.
func TestOracleCommand(t *testing.T) {
	dir := oracleDir()
	if _, err := os.Stat(filepath.Join(dir, "reference", "reference.json")); err != nil {
		t.Skipf("petal oracle compares with the reference data, and %s is missing (%v)", dir, err)
	}
	r := petal(t, "", "oracle", "--oracle", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "all stages within") || !strings.Contains(r.stdout, "meets the float32 bars") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = petal(t, "", "oracle", "--oracle", dir, "--bar", "1e-9")
	if r.code != 1 || !strings.Contains(r.stdout, "first divergence (rel-L2 > 1e-09): layer 0") {
		t.Fatalf("with an impossible bar: exit %d\n%s", r.code, r.stdout)
	}
	// a bf16 KV cache misses the float32 bars and meets the bfloat16 ones,
	// which --bars auto (the default) holds it to
	if r = petal(t, "", "oracle", "--oracle", dir, "--backend", "cpu:kv=bf16", "--bars", "float32"); r.code != 1 || !strings.Contains(r.stderr, "misses the float32 bars") {
		t.Errorf("kv=bf16 against the float32 bars: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = petal(t, "", "oracle", "--oracle", dir, "--backend", "cpu:kv=bf16"); r.code != 0 || !strings.Contains(r.stdout, "meets the bfloat16 bars") {
		t.Errorf("kv=bf16 with the default bars: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = petal(t, "", "oracle", "--oracle", dir, "--backend", "cpu:kv=bf16", "--bars", "bfloat16")
	if r.code != 0 || !strings.Contains(r.stdout, "meets the bfloat16 bars") || !strings.Contains(r.stdout, "mean KL") {
		t.Errorf("kv=bf16 against the bfloat16 bars: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = petal(t, "", "oracle", "--oracle", dir, "--bars", "int8"); r.code != 2 {
		t.Errorf("--bars int8: exit %d %s", r.code, r.stderr)
	}
}

type chatResult struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Logprobs struct {
			Content []struct {
				Token string `json:"token"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Warnings []string `json:"warnings"`
}

func parseChat(t *testing.T, s string) chatResult {
	t.Helper()
	var r chatResult
	if err := json.Unmarshal([]byte(s), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("not a chat completion: %q (%v)", s, err)
	}
	return r
}

// TestSessionsAcrossProcesses: turn 1 in one process, turn 2 in another from
// the snapshot, gives exactly the tokens of a process that renders the
// whole history and prefills it; the same after a fork; the prompt is the
// full-history rendering, token for token; thinking on and off.
func TestSessionsAcrossProcesses(t *testing.T) {
	for _, think := range []bool{false, true} {
		t.Run(fmt.Sprint("thinking=", think), func(t *testing.T) {
			store := t.TempDir()
			runTurn := func(session, prompt string, extra ...string) chatResult {
				args := append([]string{"run", "--session", session, "--temperature", "0", "--max-tokens", "24", "--json", "--sessions", store}, extra...)
				if !think {
					args = append(args, "--no-think")
				}
				r := petal(t, "", append(args, prompt)...)
				if r.code != 0 {
					t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
				}
				return parseChat(t, r.stdout)
			}
			u1, u2 := "What does the function `dumps` in the `json` module do?", "And what does `loads` do?"
			a1 := runTurn("s", u1)
			b2 := runTurn("s", u2) // a second process, from the snapshot
			if b2.Usage.PromptTokensDetails.CachedTokens == 0 {
				t.Errorf("turn 2 restored nothing: %+v", b2.Usage)
			}

			// one process, no session: the full history rendered and prefilled
			kwargs := ""
			if !think {
				kwargs = `, "chat_template_kwargs": {"enable_thinking": false}`
			}
			history := fmt.Sprintf(`[{"role": "user", "content": %q}, {"role": "assistant", "content": %q}, {"role": "user", "content": %q}]`,
				u1, a1.Choices[0].Message.Content, u2)
			job := fmt.Sprintf(`{"messages": %s, "temperature": 0, "max_tokens": 24, "logprobs": true%s}`, history, kwargs)
			r := petal(t, job+"\n", "batch", "-")
			full := parseChat(t, r.stdout)
			if got, want := b2.Choices[0].Message.Content, full.Choices[0].Message.Content; got != want || b2.Usage.CompletionTokens != full.Usage.CompletionTokens {
				t.Errorf("turn 2 from the snapshot %q (%d tokens), full prefill %q (%d tokens)", got, b2.Usage.CompletionTokens, want, full.Usage.CompletionTokens)
			}
			// the restored prompt is the full-history rendering, token for token
			render := fmt.Sprintf(`{"messages": %s, "add_generation_prompt": true%s}`, history, strings.Replace(kwargs, `, "chat_template_kwargs": {"enable_thinking": false}`, `, "enable_thinking": false`, 1))
			ids := petal(t, render, "chat-template", "--ids")
			var rendered struct {
				IDs []int `json:"ids"`
			}
			json.Unmarshal([]byte(ids.stdout), &rendered)
			if b2.Usage.PromptTokens != len(rendered.IDs) || full.Usage.PromptTokens != len(rendered.IDs) {
				t.Errorf("prompt tokens: session %d, full %d, rendering %d", b2.Usage.PromptTokens, full.Usage.PromptTokens, len(rendered.IDs))
			}

			// a fork of the session after turn 1 answers turn 2 the same way
			store = t.TempDir()
			_ = runTurn("base", u1)
			f2 := runTurn("fork", u2, "--fork-from", "base")
			if f2.Choices[0].Message.Content != b2.Choices[0].Message.Content || f2.Usage.PromptTokensDetails.CachedTokens == 0 {
				t.Errorf("forked turn 2 %q (cached %d), original %q", f2.Choices[0].Message.Content, f2.Usage.PromptTokensDetails.CachedTokens, b2.Choices[0].Message.Content)
			}
		})
	}
}

// TestSessionErrors: a fork of an unknown session and a corrupt snapshot are
// error lines naming the problem; the batch goes on.
func TestSessionErrors(t *testing.T) {
	store := t.TempDir()
	jobs := `{"custom_id": "a", "session": "x", "fork_from": "nobody", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}` + "\n" +
		`{"custom_id": "b", "session": "y", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}` + "\n"
	r := petal(t, jobs, "batch", "-", "--sessions", store)
	if r.code != 1 || !strings.Contains(r.stdout, `nobody`) {
		t.Fatalf("exit %d, %s", r.code, r.stdout)
	}
	snaps, _ := filepath.Glob(filepath.Join(store, "y", "*.snap"))
	if len(snaps) == 0 {
		t.Fatal("session y saved no snapshot")
	}
	for _, f := range snaps {
		data, _ := os.ReadFile(f)
		data[len(data)/2] ^= 0x40
		os.WriteFile(f, data, 0o600)
	}
	r = petal(t, `{"session": "y", "messages": [{"role": "user", "content": "again"}], "max_tokens": 2}`+"\n", "batch", "-", "--sessions", store)
	if r.code != 1 || !strings.Contains(r.stdout, filepath.Join(store, "y")) || !strings.Contains(r.stdout, "corrupt") {
		t.Fatalf("corrupt snapshot: exit %d, %s", r.code, r.stdout)
	}
}

// TestImplicitPrefixReuse: a request that resends a conversation reuses the
// state an earlier job left, in the same run and, with a store folder,
// across runs; a damaged stored prefix is passed over with a warning.
func TestImplicitPrefixReuse(t *testing.T) {
	store := t.TempDir()
	first := `{"custom_id": "1", "messages": [{"role": "user", "content": "What does the function ` + "`dumps`" + ` in the ` + "`json`" + ` module do?"}], "temperature": 0, "max_tokens": 16, "chat_template_kwargs": {"enable_thinking": false}}`
	second := `{"custom_id": "2", "messages": [{"role": "user", "content": "What does the function ` + "`dumps`" + ` in the ` + "`json`" + ` module do?"}, {"role": "assistant", "content": "Return the current json file object."}, {"role": "user", "content": "And loads?"}], "temperature": 0, "max_tokens": 16, "chat_template_kwargs": {"enable_thinking": false}}`

	cached := func(line map[string]any) float64 {
		return line["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	}
	// one run, no store: the second job starts from the first's state
	r := petal(t, first+"\n"+second+"\n", "batch", "-")
	lines := parseLines(t, r.stdout)
	if r.code != 0 || len(lines) != 2 || cached(lines[0]) != 0 || cached(lines[1]) == 0 {
		t.Fatalf("same run: exit %d, %s", r.code, r.stdout)
	}
	// across runs with a store folder
	if r := petal(t, first+"\n", "batch", "-", "--sessions", store); r.code != 0 {
		t.Fatalf("first run: %s", r.stderr)
	}
	r = petal(t, second+"\n", "batch", "-", "--sessions", store)
	across := parseLines(t, r.stdout)
	if r.code != 0 || cached(across[0]) == 0 || fmt.Sprint(across[0]["choices"]) != fmt.Sprint(lines[1]["choices"]) {
		t.Fatalf("across runs: %s", r.stdout)
	}
	// damage every stored prefix: the job prefills from scratch and says so
	prefixes, _ := filepath.Glob(filepath.Join(store, ".prefix", "*", "*.snap"))
	if len(prefixes) == 0 {
		t.Fatal("no prefix snapshot was stored")
	}
	for _, f := range prefixes {
		data, _ := os.ReadFile(f)
		data[len(data)-3] ^= 1
		os.WriteFile(f, data, 0o600)
	}
	r = petal(t, second+"\n", "batch", "-", "--sessions", store)
	damaged := parseLines(t, r.stdout)
	if r.code != 0 || cached(damaged[0]) != 0 || !strings.Contains(fmt.Sprint(damaged[0]["warnings"]), "corrupt") ||
		fmt.Sprint(damaged[0]["choices"]) != fmt.Sprint(lines[1]["choices"]) {
		t.Fatalf("damaged prefix: %s", r.stdout)
	}
}

// TestSessionsCommand: list, show, rm and gc manage the store.
func TestSessionsCommand(t *testing.T) {
	store := t.TempDir()
	for _, s := range []string{"alpha", "beta"} {
		if r := petal(t, "", "run", "--session", s, "--sessions", store, "--temperature", "0", "--max-tokens", "4", "--quiet", "hi"); r.code != 0 {
			t.Fatalf("run: %s", r.stderr)
		}
	}
	r := petal(t, "", "sessions", "list", "--sessions", store, "--json")
	var list []map[string]any
	if json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 2 || list[0]["name"] != "alpha" {
		t.Fatalf("list: %s %s", r.stdout, r.stderr)
	}
	if r := petal(t, "", "sessions", "show", "alpha", "--sessions", store); r.code != 0 || !strings.Contains(r.stdout, "conversation: 2 messages") {
		t.Fatalf("show: %s %s", r.stdout, r.stderr)
	}
	if r := petal(t, "", "sessions", "rm", "alpha", "--sessions", store); r.code != 0 {
		t.Fatalf("rm: %s", r.stderr)
	}
	if r := petal(t, "", "sessions", "show", "alpha", "--sessions", store); r.code != 2 {
		t.Fatalf("show of a removed session: exit %d", r.code)
	}
	if r := petal(t, "", "sessions", "gc", "--max-size", "1KB", "--sessions", store); r.code != 0 || !strings.Contains(r.stdout, "removed 1 sessions") {
		t.Fatalf("gc: %s %s", r.stdout, r.stderr)
	}
}

func parseLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	return lines
}

// TestWithoutReferenceData: in a copy of the repository with no
// ../shared beside it, every end-to-end test that needs only the embedded
// model runs and passes; only the comparisons with the reference skip, each
// naming what is missing.
func TestWithoutReferenceData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the end-to-end tests again in a copy of the repository")
	}
	root := filepath.Join(t.TempDir(), "alone", "petal")
	if err := copyTree(".", root); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "test", "-count=1", "-json", "-skip", "^TestWithoutReferenceData$", ".")
	cmd.Dir = root
	cmd.Env = append(filteredEnv(), "CGO_ENABLED=0")
	out, runErr := cmd.Output()
	mayskip := func(name string) bool { return name == "TestOracleCommand" || strings.HasSuffix(name, "/reference") }
	output := map[string]string{}
	passed := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var ev struct{ Action, Test, Output string }
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("go test -json: %v", err)
		}
		output[ev.Test] += ev.Output
		switch {
		case ev.Test == "":
		case ev.Action == "pass":
			passed++
		case ev.Action == "fail":
			t.Errorf("%s fails without ../shared:\n%s", ev.Test, output[ev.Test])
		case ev.Action == "skip" && !mayskip(ev.Test):
			t.Errorf("%s skips without ../shared, though it needs only the embedded model:\n%s", ev.Test, output[ev.Test])
		case ev.Action == "skip" && (!strings.Contains(output[ev.Test], "shared/oracle") || !strings.Contains(output[ev.Test], "missing")):
			t.Errorf("%s skips without saying what is missing:\n%s", ev.Test, output[ev.Test])
		}
	}
	if runErr != nil && !t.Failed() {
		t.Fatalf("go test in %s: %v\n%s", root, runErr, out)
	}
	if passed < 10 {
		t.Errorf("only %d tests passed without ../shared:\n%s", passed, out)
	}
}

// copyTree copies the regular files under src (but .git) to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, path)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}
