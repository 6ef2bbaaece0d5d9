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
