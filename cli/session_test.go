package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// batchLines runs a batch of job lines with the given extra arguments and
// returns the exit code and the result lines.
func batchLines(t *testing.T, jobs string, args ...string) (int, []map[string]any, string) {
	t.Helper()
	code, out, errs := runMain(t, Streams{In: strings.NewReader(jobs)}, append([]string{"batch", "-"}, args...)...)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("result line %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	return code, lines, errs
}

// TestPrefixCacheWriteFailureIsAWarning: a job without a session whose
// state cannot be written to the on-disk prefix cache keeps its answer;
// the failure is a warning.
func TestPrefixCacheWriteFailureIsAWarning(t *testing.T) {
	store := t.TempDir()
	os.WriteFile(filepath.Join(store, ".prefix"), []byte("not a folder"), 0o644) // every prefix write fails
	job := `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}` + "\n"
	code, lines, errs := batchLines(t, job, "--sessions", store)
	if code != 0 || len(lines) != 1 || lines[0]["choices"] == nil {
		t.Fatalf("exit %d, %v, %s", code, lines, errs)
	}
	if w := lines[0]["warnings"]; !strings.Contains(strings.ToLower(jsonText(w)), "prefix cache") {
		t.Errorf("warnings %v: want one about the prefix cache", w)
	}
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

// TestResumedTurnNotRecordedTwice: a kill after a turn is saved but before
// its result line is written, then --resume, runs the job again without
// appending its turn a second time; the result it writes is the turn
// recorded.
func TestResumedTurnNotRecordedTwice(t *testing.T) {
	dir := t.TempDir()
	store, in, out := filepath.Join(dir, "store"), filepath.Join(dir, "jobs.jsonl"), filepath.Join(dir, "out.jsonl")
	os.WriteFile(in, []byte(
		`{"custom_id": "t1", "session": "s", "messages": [{"role": "user", "content": "What does json.dumps do?"}], "max_tokens": 8, "temperature": 0}`+"\n"+
			`{"custom_id": "t2", "session": "s", "messages": [{"role": "user", "content": "And json.loads?"}], "max_tokens": 8, "temperature": 0}`+"\n"), 0o644)
	if code, _, errs := runMain(t, Streams{}, "batch", in, "-o", out, "--sessions", store); code != 0 {
		t.Fatalf("batch: exit %d %s", code, errs)
	}
	want := conversationMessages(t, store, "s")
	if len(want) != 4 {
		t.Fatalf("two turns saved %d messages, want 4", len(want))
	}
	data, _ := os.ReadFile(out)
	lines := strings.SplitAfter(strings.TrimSpace(string(data)), "\n")
	var lost map[string]any
	json.Unmarshal([]byte(lines[1]), &lost)
	os.WriteFile(out, []byte(lines[0]), 0o644) // as if killed before the second result was written

	if code, _, errs := runMain(t, Streams{}, "batch", in, "-o", out, "--sessions", store, "--resume"); code != 0 {
		t.Fatalf("resume: exit %d %s", code, errs)
	}
	got := conversationMessages(t, store, "s")
	if len(got) != 4 || jsonText(got) != jsonText(want) {
		t.Fatalf("after resume the conversation has %d messages, want the same 4:\n%s", len(got), jsonText(got))
	}
	data, _ = os.ReadFile(out)
	lines = strings.Split(strings.TrimSpace(string(data)), "\n")
	var again map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &again) != nil {
		t.Fatalf("output after resume: %q", data)
	}
	answer := func(l map[string]any) any {
		return l["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
	}
	if answer(again) != answer(lost) || answer(again) != want[3]["content"] {
		t.Errorf("resumed answer %q, first run %q, recorded %q", answer(again), answer(lost), want[3]["content"])
	}
	if !strings.Contains(jsonText(again["warnings"]), "already recorded") {
		t.Errorf("warnings %v: want one saying the turn was already recorded", again["warnings"])
	}
}

// TestDamagedSessionSnapshot: a job whose session's best snapshot is
// damaged fails naming the file, though an older intact one exists;
// sessions show, list and verify say which file is damaged and why, and
// show --json uses snake_case keys and hex fingerprints.
func TestDamagedSessionSnapshot(t *testing.T) {
	store := t.TempDir()
	turn := func(content string) (int, []map[string]any) {
		job := `{"session": "s", "messages": [{"role": "user", "content": "` + content + `"}], "max_tokens": 4, "temperature": 0}` + "\n"
		code, lines, _ := batchLines(t, job, "--sessions", store)
		return code, lines
	}
	for _, c := range []string{"hi", "and then?"} {
		if code, lines := turn(c); code != 0 {
			t.Fatalf("turn %q: exit %d %v", c, code, lines)
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
	code, lines := turn("more")
	if code != 1 || len(lines) != 1 || !strings.Contains(jsonText(lines[0]["error"]), filepath.Join(store, "s", "turn-")) || !strings.Contains(jsonText(lines[0]["error"]), "corrupt") {
		t.Fatalf("a damaged snapshot to restore: exit %d %v, want an error naming the file", code, lines)
	}

	code, out, _ := runMain(t, Streams{}, "sessions", "show", "s", "--sessions", store)
	if code != 1 || strings.Count(out, ": DAMAGED,") != len(snaps)-1 || !strings.Contains(out, "checksum") || strings.Contains(out, "model 000000000000") {
		t.Errorf("show: exit %d\n%s", code, out)
	}
	code, out, _ = runMain(t, Streams{}, "sessions", "show", "s", "--sessions", store, "--json")
	var shown map[string]any
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("show --json: %v %s", err, out)
	}
	first := shown["snapshots"].([]any)[0].(map[string]any)
	if fp, ok := first["fingerprint"].(string); !ok || len(fp) != 64 || first["tokens"] == nil {
		t.Errorf("show --json snapshot: %v, want snake_case keys and a hex fingerprint", first)
	}
	if strings.Contains(out, "HiddenSize") || strings.Contains(out, `"File"`) || shown["snapshots"].([]any)[1].(map[string]any)["error"] == nil {
		t.Errorf("show --json: %s", out)
	}
	// list reads the headers only: it sees a damaged header
	code, out, _ = runMain(t, Streams{}, "sessions", "list", "--sessions", store)
	if code != 0 || !strings.Contains(out, "STATUS") || !strings.Contains(out, " ok") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	last := snaps[len(snaps)-1]
	b, _ := os.ReadFile(last)
	b[20] ^= 1
	os.WriteFile(last, b, 0o600)
	code, out, errs := runMain(t, Streams{}, "sessions", "list", "--sessions", store)
	if code != 0 || !strings.Contains(out, "1 damaged") || strings.Contains(out, "000000000000") || !strings.Contains(errs, "sessions verify") {
		t.Errorf("list with a damaged header: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runMain(t, Streams{}, "sessions", "verify", "--sessions", store)
	if code != 1 || strings.Count(out, "\n") != len(snaps)-1 || !strings.Contains(out, snaps[1]+": corrupt: checksum") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
	if code, _, _ := runMain(t, Streams{}, "sessions", "verify", "nobody", "--sessions", store); code != 2 {
		t.Errorf("verify of an unknown session: exit %d, want 2", code)
	}
	for _, f := range snaps[1:] {
		os.Remove(f)
	}
	if code, out, errs := runMain(t, Streams{}, "sessions", "verify", "s", "--sessions", store); code != 0 || out != "" {
		t.Errorf("verify after removing the damaged files: exit %d %q %q", code, out, errs)
	}
	if code, lines := turn("more"); code != 0 || lines[0]["choices"] == nil {
		t.Errorf("after removing the damaged files the session goes on from the older one: exit %d %v", code, lines)
	}
}

// TestSharedSystemPromptReused: two jobs that share a system prompt and
// differ in their user message: the second restores the state at the end
// of the system message from the prefix cache and answers exactly as a
// fresh run does.
func TestSharedSystemPromptReused(t *testing.T) {
	system := "You are a careful Python assistant. Answer in one short sentence, name the module you use, and never invent functions that the standard library does not have."
	job := func(id, user string) string {
		return `{"custom_id": "` + id + `", "messages": [{"role": "system", "content": "` + system + `"}, {"role": "user", "content": "` + user + `"}], "max_tokens": 12, "temperature": 0}` + "\n"
	}
	a, b := job("a", "What does json.dumps do?"), job("b", "How do I read a file line by line?")
	code, lines, errs := batchLines(t, a+b)
	if code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d %v %s", code, lines, errs)
	}
	cached := func(l map[string]any) float64 {
		return l["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64)
	}
	if cached(lines[1]) < 30 {
		t.Errorf("the second job restored %v tokens, want the system prompt's (about 40)", cached(lines[1]))
	}
	_, fresh, _ := batchLines(t, b, "--prefix-cache", "0")
	if cached(fresh[0]) != 0 || jsonText(fresh[0]["choices"]) != jsonText(lines[1]["choices"]) {
		t.Errorf("from the cached system prompt %s, fresh %s", jsonText(lines[1]["choices"]), jsonText(fresh[0]["choices"]))
	}
	// a new session's first turn starts from it too
	c := strings.Replace(b, `"custom_id": "b"`, `"custom_id": "c", "session": "n"`, 1)
	_, withSession, _ := batchLines(t, a+c, "--sessions", t.TempDir())
	if len(withSession) != 2 || cached(withSession[1]) < 30 || jsonText(withSession[1]["choices"]) != jsonText(fresh[0]["choices"]) {
		t.Errorf("a new session after the shared system prompt: %v", withSession)
	}
}
