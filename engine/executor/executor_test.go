package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/cpu"
	"petal/jobs"
)

// modelDir is the embedded model's folder in the repository.
const modelDir = "../../fixtures/tiny-qwen36-moe-4bit"

// defaultPrefixCache is the commands' --prefix-cache default, in bytes.
const defaultPrefixCache = 1024 << 20

func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.Open(modelDir, engine.Options{Backend: cpu.New(), Chunk: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// newTestExecutor opens the embedded model and an executor over it; each
// call is a fresh one, as a later process would have.
func newTestExecutor(t *testing.T, o Options) *Executor {
	t.Helper()
	if o.SessionDir == "" {
		o.SessionDir = filepath.Join(t.TempDir(), "sessions")
	}
	if o.ModelName == "" {
		o.ModelName = "tiny"
	}
	x, err := New(openEngine(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// parseJob reads one job line as batch reads it.
func parseJob(t *testing.T, line string) *jobs.Job {
	t.Helper()
	job, lerr, err := jobs.NewReader(strings.NewReader(line + "\n")).Next()
	if err != nil || lerr != nil {
		t.Fatalf("job line %s: %v %v", line, err, lerr)
	}
	return job
}

// run runs a job line that must succeed.
func run(t *testing.T, x *Executor, line string) *Outcome {
	t.Helper()
	out, jerr := x.Run(context.Background(), parseJob(t, line), Stream{})
	if jerr != nil {
		t.Fatalf("%s: %v (status %d)", line, jerr, jerr.Status)
	}
	return out
}

func chatOf(t *testing.T, out *Outcome) *jobs.ChatCompletion {
	t.Helper()
	cc, ok := out.Body.(*jobs.ChatCompletion)
	if !ok || len(cc.Choices) != 1 {
		t.Fatalf("not a chat completion with one choice: %#v", out.Body)
	}
	return cc
}

func content(t *testing.T, out *Outcome) string {
	t.Helper()
	c := chatOf(t, out).Choices[0].Message.Content
	if c == nil {
		t.Fatalf("no content: %s", jsonText(out.Body))
	}
	return *c
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
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

// Requests that cannot be served are refused with their status, the field
// at fault and a code, before anything runs.
func TestRunRefuses(t *testing.T) {
	x := newTestExecutor(t, Options{PrefixCacheBytes: defaultPrefixCache})
	long := strings.Repeat("word ", 40000) // more tokens than the context holds
	cases := []struct {
		line, param, code, message string
	}{
		{`{"prompt": "` + long + `"}`, "prompt", jobs.CodeContextLength, "the context holds 32768"},
		{`{"prompt": ["x = 1", "` + long + `"]}`, "prompt[1]", jobs.CodeContextLength, "the context holds 32768"},
		{`{"messages": [{"role": "user", "content": "` + long + `"}]}`, "messages", jobs.CodeContextLength, "the context holds 32768"},
		{`{"prompt": [1, 99999]}`, "prompt", jobs.CodeInvalidValue, "prompt[1] = 99999 is not a token id"},
		{`{"messages": [{"role": "user", "content": "hi"}], "fork_from": "a"}`, "fork_from", jobs.CodeInvalidValue, "fork_from needs session"},
		{`{"prompt": "x", "session": "s"}`, "session", jobs.CodeInvalidValue, "sessions continue chat conversations"},
	}
	for _, c := range cases {
		out, jerr := x.Run(context.Background(), parseJob(t, c.line), Stream{})
		if jerr == nil {
			t.Errorf("%.80s: served %s", c.line, jsonText(out.Body))
			continue
		}
		e := jerr.APIError()
		if jerr.Status != 400 || e.Param != c.param || e.Code != c.code || e.Type != jobs.InvalidRequest || !strings.Contains(e.Message, c.message) {
			t.Errorf("%.80s: status %d %+v; want 400, param %s, code %s, %q", c.line, jerr.Status, e, c.param, c.code, c.message)
		}
	}
}

// TestPrefixCacheWriteFailureIsAWarning: a job without a session whose
// state cannot be written to the on-disk prefix cache keeps its answer;
// the failure is a warning.
func TestPrefixCacheWriteFailureIsAWarning(t *testing.T) {
	store := t.TempDir()
	os.WriteFile(filepath.Join(store, ".prefix"), []byte("not a folder"), 0o644) // every prefix write fails
	x := newTestExecutor(t, Options{SessionDir: store, PersistPrefixes: true, PrefixCacheBytes: defaultPrefixCache})
	out := run(t, x, `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}`)
	content(t, out)
	if !strings.Contains(strings.ToLower(jsonText(out.Warnings)), "prefix cache") {
		t.Errorf("warnings %v: want one about the prefix cache", out.Warnings)
	}
}

// TestReplayedTurnNotRecordedTwice: a job whose turn was saved by an
// earlier run that stopped before writing its result (a kill, then
// --resume) runs again on the same history without appending its turn a
// second time; its answer is the turn recorded, and a warning says so.
func TestReplayedTurnNotRecordedTwice(t *testing.T) {
	store := t.TempDir()
	t1 := `{"custom_id": "t1", "session": "s", "messages": [{"role": "user", "content": "What does json.dumps do?"}], "max_tokens": 8, "temperature": 0}`
	t2 := `{"custom_id": "t2", "session": "s", "messages": [{"role": "user", "content": "And json.loads?"}], "max_tokens": 8, "temperature": 0}`
	x := newTestExecutor(t, Options{SessionDir: store, PersistPrefixes: true, PrefixCacheBytes: defaultPrefixCache})
	run(t, x, t1)
	lost := content(t, run(t, x, t2)) // its result line never written
	want := conversationMessages(t, store, "s")
	if len(want) != 4 {
		t.Fatalf("two turns saved %d messages, want 4", len(want))
	}

	again := run(t, newTestExecutor(t, Options{SessionDir: store, PersistPrefixes: true, PrefixCacheBytes: defaultPrefixCache}), t2)
	got := conversationMessages(t, store, "s")
	if len(got) != 4 || jsonText(got) != jsonText(want) {
		t.Fatalf("after the replay the conversation has %d messages, want the same 4:\n%s", len(got), jsonText(got))
	}
	if a := content(t, again); a != lost || a != want[3]["content"] {
		t.Errorf("replayed answer %q, first run %q, recorded %q", a, lost, want[3]["content"])
	}
	if !strings.Contains(jsonText(again.Warnings), "already recorded") {
		t.Errorf("warnings %v: want one saying the turn was already recorded", again.Warnings)
	}
}

// TestDamagedSessionSnapshot: a job whose session's best snapshot is
// damaged fails naming the file, though an older intact one exists; once
// the damaged files are removed the session goes on from the older one.
func TestDamagedSessionSnapshot(t *testing.T) {
	store := t.TempDir()
	turn := func(content string) (*Outcome, *JobError) {
		x := newTestExecutor(t, Options{SessionDir: store, PersistPrefixes: true, PrefixCacheBytes: defaultPrefixCache})
		job := `{"session": "s", "messages": [{"role": "user", "content": "` + content + `"}], "max_tokens": 4, "temperature": 0}`
		return x.Run(context.Background(), parseJob(t, job), Stream{})
	}
	for _, c := range []string{"hi", "and then?"} {
		if _, jerr := turn(c); jerr != nil {
			t.Fatalf("turn %q: %v", c, jerr)
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(store, "s", "turn-*.snap"))
	if len(snaps) < 2 {
		t.Fatalf("%d snapshots, want at least 2", len(snaps))
	}
	for _, f := range snaps[1:] { // all but the oldest: an intact older one is left
		b, _ := os.ReadFile(f)
		b[len(b)-10] ^= 0x40 // the payload: headers still read
		os.WriteFile(f, b, 0o600)
	}
	_, jerr := turn("more")
	if jerr == nil || jerr.Status != 400 || jerr.Param != "session" || !strings.Contains(jerr.Error(), filepath.Join(store, "s", "turn-")) || !strings.Contains(jerr.Error(), "corrupt") {
		t.Fatalf("a damaged snapshot to restore: %v, want a 400 naming the file", jerr)
	}
	if !strings.Contains(jerr.Error(), "remove that file") {
		t.Errorf("%v: want it to say what to do", jerr)
	}
	for _, f := range snaps[1:] {
		os.Remove(f)
	}
	if out, jerr := turn("more"); jerr != nil {
		t.Errorf("after removing the damaged files the session goes on from the older one: %v", jerr)
	} else {
		content(t, out)
	}
}

func cachedTokens(t *testing.T, out *Outcome) int {
	return chatOf(t, out).Usage.PromptTokensDetails.CachedTokens
}

// TestSharedSystemPromptReused: two jobs that share a system prompt and
// differ in their user message: the second restores the state at the end
// of the system message from the prefix cache and answers exactly as a
// fresh run does.
func TestSharedSystemPromptReused(t *testing.T) {
	system := "You are a careful Python assistant. Answer in one short sentence, name the module you use, and never invent functions that the standard library does not have."
	job := func(id, user string) string {
		return `{"custom_id": "` + id + `", "messages": [{"role": "system", "content": "` + system + `"}, {"role": "user", "content": "` + user + `"}], "max_tokens": 12, "temperature": 0}`
	}
	a, b := job("a", "What does json.dumps do?"), job("b", "How do I read a file line by line?")
	x := newTestExecutor(t, Options{PrefixCacheBytes: defaultPrefixCache})
	run(t, x, a)
	second := run(t, x, b)
	if n := cachedTokens(t, second); n < 30 {
		t.Errorf("the second job restored %d tokens, want the system prompt's (about 40)", n)
	}
	fresh := run(t, newTestExecutor(t, Options{}), b)
	if cachedTokens(t, fresh) != 0 || jsonText(chatOf(t, fresh).Choices) != jsonText(chatOf(t, second).Choices) {
		t.Errorf("from the cached system prompt %s, fresh %s", jsonText(chatOf(t, second).Choices), jsonText(chatOf(t, fresh).Choices))
	}
	// a new session's first turn starts from it too
	c := strings.Replace(b, `"custom_id": "b"`, `"custom_id": "c", "session": "n"`, 1)
	xs := newTestExecutor(t, Options{SessionDir: t.TempDir(), PersistPrefixes: true, PrefixCacheBytes: defaultPrefixCache})
	run(t, xs, a)
	withSession := run(t, xs, c)
	if cachedTokens(t, withSession) < 30 || jsonText(chatOf(t, withSession).Choices) != jsonText(chatOf(t, fresh).Choices) {
		t.Errorf("a new session after the shared system prompt: %s", jsonText(withSession.Body))
	}
}

// An agent loop sends the whole history every turn: from the second turn
// on, the earlier turns come from the prefix cache, not a prefill, and
// the timings say so as the usage does.
func TestAgentLoopRestoresEarlierMessages(t *testing.T) {
	x := newTestExecutor(t, Options{PrefixCacheBytes: 256 << 20})
	msgs := []map[string]any{
		{"role": "system", "content": "You are a careful Python assistant. Answer briefly, with code when it helps, and explain what each standard library function returns."},
	}
	history := 0 // tokens of the previous request's messages, without its generation prompt
	for turn, q := range []string{"What does json.dumps do?", "And json.loads?", "And pickle.dumps?"} {
		msgs = append(msgs, map[string]any{"role": "user", "content": q})
		req, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 16, "temperature": 0})
		cc := chatOf(t, run(t, x, string(req)))
		cached := cc.Usage.PromptTokensDetails.CachedTokens
		if cc.Timings.CacheN != cached || cc.Timings.PromptN != cc.Usage.PromptTokens-cached {
			t.Errorf("turn %d: timings %+v disagree with usage %+v", turn+1, cc.Timings, cc.Usage)
		}
		// turn 1 prefills all; each later turn restores at least everything
		// the previous request sent
		if turn == 0 && cached != 0 || turn > 0 && (cached < history || cached >= cc.Usage.PromptTokens) {
			t.Errorf("turn %d: %d of %d prompt tokens cached; the previous request's messages are %d", turn+1, cached, cc.Usage.PromptTokens, history)
		}
		job := parseJob(t, string(req))
		text, err := x.RenderChat(job, false)
		if err != nil {
			t.Fatal(err)
		}
		history = len(x.e.Encode(text))
		msgs = append(msgs, map[string]any{"role": "assistant", "content": *cc.Choices[0].Message.Content})
	}
}

// A session turn cancelled while it generates leaves nothing in its
// session (no message, no snapshot): the next turn continues from the
// history before it.
func TestCancelledTurnLeavesNothingInTheSession(t *testing.T) {
	store := t.TempDir()
	x := newTestExecutor(t, Options{SessionDir: store, PersistPrefixes: true, PrefixCacheBytes: defaultPrefixCache})
	turn := func(content string, maxTokens int) string {
		b, _ := json.Marshal(map[string]any{"session": "s", "messages": []map[string]any{{"role": "user", "content": content}}, "max_tokens": maxTokens, "temperature": 0})
		return string(b)
	}
	run(t, x, turn("What does json.dumps do?", 8))
	before := conversationMessages(t, store, "s")
	filesBefore := listFiles(t, filepath.Join(store, "s"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, jerr := x.Run(ctx, parseJob(t, turn("Tell me about json.", 64)), Stream{Text: func(string) { cancel() }})
	if jerr != nil || out.Result.FinishReason != jobs.FinishCancelled {
		t.Fatalf("cancelled turn: %v %+v", jerr, out)
	}
	if got := listFiles(t, filepath.Join(store, "s")); got != filesBefore {
		t.Errorf("the cancelled turn changed the session's files:\nbefore %s\nafter  %s", filesBefore, got)
	}
	run(t, x, turn("And json.loads?", 8))
	after := conversationMessages(t, store, "s")
	if len(before) != 2 || len(after) != 4 || after[2]["content"] != "And json.loads?" || jsonText(after[:2]) != jsonText(before) {
		t.Errorf("conversation before %v\nafter %v: the cancelled turn must leave no trace", before, after)
	}
}
