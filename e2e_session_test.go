package main

// End-to-end tests of sessions under faults: a batch killed at random
// moments and resumed answers every line once, records no turn twice, and
// gives the answers of an uninterrupted run.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mixedSessionJobs is a batch of three sessions (one forked from another)
// interleaved with chat and completion jobs without a session, all greedy.
// turns counts the turns each session gets.
func mixedSessionJobs() (jobs string, turns map[string]int) {
	turns = map[string]int{}
	system := `{"role": "system", "content": "You are a careful Python assistant. Answer in one short sentence and name the module you use."}`
	questions := []string{"What does json.dumps do?", "And json.loads?", "How do I read a file?", "What is a list?", "How do I sort a dict?", "What is pathlib for?"}
	var b strings.Builder
	line := 0
	add := func(format string, args ...any) {
		line++
		fmt.Fprintf(&b, format+"\n", args...)
	}
	for i := range 4 {
		for _, s := range []string{"a", "b"} {
			q := questions[(i+len(s)+int(s[0]))%len(questions)]
			add(`{"custom_id": "%s%d", "session": "%s", "messages": [{"role": "user", "content": %q}], "max_tokens": 10, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}`, s, i, s, q)
			turns[s]++
		}
		add(`{"custom_id": "p%d", "prompt": "def f%d(x):", "max_tokens": 12, "temperature": 0}`, i, i)
		add(`{"custom_id": "q%d", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [%s, {"role": "user", "content": %q}], "max_tokens": 10, "temperature": 0}}`, i, system, questions[i])
		if i == 1 {
			add(`{"custom_id": "c0", "session": "c", "fork_from": "a", "messages": [{"role": "user", "content": "And pickle?"}], "max_tokens": 10, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}`)
			turns["c"]++
		}
		if i >= 2 {
			add(`{"custom_id": "c%d", "session": "c", "messages": [{"role": "user", "content": %q}], "max_tokens": 10, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}`, i, questions[5-i])
			turns["c"]++
		}
	}
	return b.String(), turns
}

// answerText is a result line's completion text (chat content and
// reasoning, or completion text), or its error.
func answerText(t *testing.T, l map[string]any) string {
	t.Helper()
	body := l
	if resp, ok := l["response"].(map[string]any); ok {
		body, _ = resp["body"].(map[string]any)
	}
	choices, ok := body["choices"].([]any)
	if !ok || len(choices) != 1 {
		return fmt.Sprintf("error %v", l["error"])
	}
	c := choices[0].(map[string]any)
	if msg, ok := c["message"].(map[string]any); ok {
		return fmt.Sprintf("%v|%v", msg["reasoning_content"], msg["content"])
	}
	return fmt.Sprint(c["text"])
}

// storedConversation is the messages of a session's conversation file.
func storedConversation(t *testing.T, store, name string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, name, "conversation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any // a bare array, or the "messages" of an object
	if json.Unmarshal(data, &msgs) == nil {
		return msgs
	}
	var c struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c.Messages
}

// TestKillAndResumeMixedSessions: a mixed batch with sessions, killed with
// SIGKILL at seeded random moments and resumed each time until it
// completes, answers every line exactly once with the text of an
// uninterrupted run, and its sessions hold each turn once.
func TestKillAndResumeMixedSessions(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "jobs.jsonl")
	jobs, turns := mixedSessionJobs()
	os.WriteFile(in, []byte(jobs), 0o644)
	nLines := strings.Count(jobs, "\n")

	refStore, refOut := filepath.Join(dir, "ref-store"), filepath.Join(dir, "ref.jsonl")
	if r := petal(t, "", "batch", in, "-o", refOut, "--sessions", refStore); r.code != 0 {
		t.Fatalf("uninterrupted run: exit %d %s", r.code, r.stderr)
	}
	want := map[int]string{}
	for _, l := range readLines(t, refOut) {
		want[int(l["line"].(float64))] = answerText(t, l)
	}
	if len(want) != nLines {
		t.Fatalf("uninterrupted run answered %d of %d lines", len(want), nLines)
	}

	store, out := filepath.Join(dir, "store"), filepath.Join(dir, "out.jsonl")
	rng := rand.New(rand.NewPCG(8, 3))
	deadline := time.Now().Add(45 * time.Second)
	kills := 0
	for run := 0; ; run++ {
		if time.Now().After(deadline) {
			t.Fatalf("not finished after %d runs and %d kills", run, kills)
		}
		cmd := exec.Command(petalBin, "batch", in, "-o", out, "--sessions", store, "--resume")
		cmd.Env = append(filteredEnv(), "PETAL_CACHE="+cacheDir(t))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		if kills < 10 {
			select {
			case err = <-done:
			case <-time.After(time.Duration(30+rng.IntN(500)) * time.Millisecond):
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				kills++
				continue
			}
		} else {
			err = <-done
		}
		if err != nil {
			var failed []string
			if b, rerr := os.ReadFile(out); rerr == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, `"error":{`) || strings.Contains(l, `"error": {`) {
						failed = append(failed, l)
					}
				}
			}
			t.Fatalf("run %d after %d kills: %v %s\nfailed lines:\n%s", run, kills, err, stderr.String(), strings.Join(failed, "\n"))
		}
		break
	}
	t.Logf("%d kills", kills)

	seen := map[int]int{}
	for _, l := range readLines(t, out) {
		n := int(l["line"].(float64))
		seen[n]++
		if got := answerText(t, l); got != want[n] {
			t.Errorf("line %d (%v): %q, uninterrupted %q", n, l["custom_id"], got, want[n])
		}
	}
	for n := 1; n <= nLines; n++ {
		if seen[n] != 1 {
			t.Errorf("line %d answered %d times, want once", n, seen[n])
		}
	}
	for name, n := range turns {
		got, ref := storedConversation(t, store, name), storedConversation(t, refStore, name)
		wantMsgs := 2 * n
		if name == "c" {
			wantMsgs += 2 * 2 // the two turns of a it was forked after
		}
		if len(got) != wantMsgs || fmt.Sprint(got) != fmt.Sprint(ref) {
			t.Errorf("session %s: %d messages, want %d as in the uninterrupted run:\n%v\n%v", name, len(got), wantMsgs, got, ref)
		}
	}
}
