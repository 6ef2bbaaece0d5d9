package session

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"petal/engine/model"
)

// withTokens is a synthetic state holding exactly the given tokens.
func withTokens(tokens []int32, seed uint64) model.StateData {
	d := synthState(len(tokens), seed)
	d.Tokens = slices.Clone(tokens)
	return d
}

func TestValidateName(t *testing.T) {
	for _, good := range []string{"s1", "agent-7.run_2", strings.Repeat("a", 128), "A", "0"} {
		if err := ValidateName(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "a/b", `a\b`, "../x", "a b", "é", strings.Repeat("a", 129), "x\x00"} {
		err := ValidateName(bad)
		if err == nil || !strings.Contains(err.Error(), "invalid session name") {
			t.Errorf("%q: got %v", bad, err)
		}
	}
	st := openTestStore(t, testFP(1), StoreOptions{})
	if _, err := st.SaveTurn("../escape", synthState(1, 1)); err == nil || !strings.Contains(err.Error(), `"../escape"`) {
		t.Errorf("saving to ../escape: %v", err)
	}
}

func TestRetentionAndLatest(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{Retention: 3})
	var last model.StateData
	for i := 1; i <= 5; i++ {
		last = synthState(i, uint64(i))
		info, err := st.SaveTurn("s", last)
		if err != nil {
			t.Fatal(err)
		}
		if info.Turn != i || info.Tokens != i || info.Bytes <= 0 {
			t.Fatalf("save %d: %+v", i, info)
		}
	}
	d, err := st.Show("s")
	if err != nil {
		t.Fatal(err)
	}
	var turns []int
	for _, s := range d.Snapshots {
		turns = append(turns, s.Turn)
	}
	if !slices.Equal(turns, []int{3, 4, 5}) || d.Turns != 3 || d.Tokens != 5 || d.Fingerprint != testFP(1) {
		t.Fatalf("after 5 saves with retention 3: turns %v, %+v", turns, d.Info)
	}
	r, err := st.Latest("s")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Data, last) || r.Snapshot.Turn != 5 {
		t.Fatalf("Latest gave turn %d", r.Snapshot.Turn)
	}
}

func TestMissingSession(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	_, err := st.Latest("nobody")
	if !errors.Is(err, ErrNoSession) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("Latest: %v", err)
	}
	if _, _, err := st.LongestPrefixOf("nobody", []int32{1, 2}); !errors.Is(err, ErrNoSession) {
		t.Fatalf("LongestPrefixOf: %v", err)
	}
	if _, err := st.Show("nobody"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Show: %v", err)
	}
	if err := st.Remove("nobody"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := st.Fork("nobody", "copy"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Fork: %v", err)
	}
}

// corruptFile flips one byte in the middle of a file.
func corruptFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedLatestIsAnError: a named session never falls back silently to
// an older turn; the error names the file.
func TestDamagedLatestIsAnError(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	st.SaveTurn("s", synthState(2, 1))
	info, _ := st.SaveTurn("s", synthState(3, 2))
	corruptFile(t, info.File)
	_, err := st.Latest("s")
	var se *SnapshotError
	if !errors.As(err, &se) || se.File != info.File || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), info.File) {
		t.Fatalf("got %v, want a corrupt-snapshot error naming %s", err, info.File)
	}
	other := openTestStore(t, testFP(2), StoreOptions{})
	other.Dir = st.Dir
	if _, err := other.Latest("s"); err == nil {
		t.Fatal("another model read the session")
	}
}

func TestLongestPrefixOf(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	base := tokenIDs(30, 9, 4096)
	// turns along one conversation, then a branch saved after a divergence
	for i, n := range []int{10, 20, 30} {
		if _, err := st.SaveTurn("s", withTokens(base[:n], uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	branch := append(slices.Clone(base[:15]), 7, 7, 7)
	st.SaveTurn("s", withTokens(branch, 9))

	check := func(prompt []int32, want int) {
		t.Helper()
		r, ok, err := st.LongestPrefixOf("s", prompt)
		if err != nil {
			t.Fatal(err)
		}
		if want == 0 {
			if ok {
				t.Fatalf("matched %d tokens, want no match", len(r.Data.Tokens))
			}
			return
		}
		if !ok || len(r.Data.Tokens) != want || !isProperPrefix(r.Data.Tokens, prompt) {
			t.Fatalf("ok=%v tokens=%d, want %d", ok, len(r.Data.Tokens), want)
		}
	}
	check(append(slices.Clone(base), 1, 2), 30)   // continues the last turn of the main line
	check(append(slices.Clone(base[:25]), 5), 20) // diverges inside turn 3
	check(slices.Clone(base[:30]), 20)            // equal to turn 3: one token must be left to run
	check(append(slices.Clone(branch), 1), 18)    // continues the branch
	check(append(slices.Clone(base[:12]), 1), 10) // diverges inside turn 2
	check([]int32{base[0] + 1, 1, 2}, 0)          // shares nothing

	// a damaged snapshot that would be restored is an error naming it; the
	// job never silently continues from an older one
	d, _ := st.Show("s")
	byTokens := map[int]string{}
	for _, s := range d.Snapshots {
		byTokens[s.Tokens] = s.File
	}
	corruptFile(t, byTokens[30])
	_, _, err := st.LongestPrefixOf("s", append(slices.Clone(base), 1))
	var se *SnapshotError
	if !errors.As(err, &se) || se.File != byTokens[30] || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restoring a damaged snapshot: %v, want a corrupt-snapshot error naming %s", err, byTokens[30])
	}
	// damage to a snapshot this prompt does not need is a warning
	r, ok, err := st.LongestPrefixOf("s", append(slices.Clone(branch), 1))
	if err != nil || !ok || len(r.Data.Tokens) != 18 || len(r.Skipped) != 0 {
		t.Fatalf("the branch: ok=%v err=%v tokens=%d skipped %v", ok, err, len(r.Data.Tokens), r.Skipped)
	}
	b, _ := os.ReadFile(byTokens[10])
	b[20] ^= 1 // the header: its tokens are unknown now
	os.WriteFile(byTokens[10], b, 0o600)
	r, ok, err = st.LongestPrefixOf("s", append(slices.Clone(branch), 1))
	if err != nil || !ok || len(r.Data.Tokens) != 18 || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Error(), byTokens[10]) {
		t.Fatalf("an older damaged header: ok=%v err=%v tokens=%d skipped %v, want a warning naming %s", ok, err, len(r.Data.Tokens), r.Skipped, byTokens[10])
	}
	// a damaged header newer than the best fit may hide the state needed
	b, _ = os.ReadFile(branchFile(t, st))
	b[20] ^= 1
	os.WriteFile(branchFile(t, st), b, 0o600)
	if _, _, err := st.LongestPrefixOf("s", append(slices.Clone(base[:25]), 5)); !errors.As(err, &se) || se.File != branchFile(t, st) {
		t.Fatalf("a newer damaged header: %v, want an error naming %s", err, branchFile(t, st))
	}
}

// branchFile is the newest turn of session s.
func branchFile(t *testing.T, st *Store) string {
	t.Helper()
	turns, err := st.turns("s")
	if err != nil || len(turns) == 0 {
		t.Fatal(err)
	}
	return turns[len(turns)-1].path
}

// TestVerifyAndShowDamage: Verify reads every byte of every snapshot and
// names each damaged file and why; Show and List say a snapshot is
// damaged rather than listing it as empty.
func TestVerifyAndShowDamage(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	st.SaveTurn("a", synthState(4, 1))
	bad, _ := st.SaveTurn("a", synthState(6, 2))
	st.SaveTurn("b", synthState(3, 3))
	prefix, _ := st.SavePrefix(synthState(5, 4))
	st.Lock("a") // a busy session is verified too (snapshots are never changed in place)
	if probs, err := st.Verify(); err != nil || len(probs) != 0 {
		t.Fatalf("intact store: %v %v", probs, err)
	}
	corruptFile(t, bad.File) // the payload: the header still reads
	corruptFile(t, prefix.File)
	probs, err := st.Verify()
	if err != nil || len(probs) != 2 {
		t.Fatalf("Verify: %v %v, want the two damaged files", probs, err)
	}
	for i, want := range []string{bad.File, prefix.File} {
		if probs[i].File != want || !errors.Is(probs[i].Err, ErrCorrupt) || !strings.Contains(probs[i].Err.Error(), want) {
			t.Errorf("problem %d: %+v, want %s corrupt", i, probs[i], want)
		}
	}
	if probs, err := st.Verify("b"); err != nil || len(probs) != 0 {
		t.Errorf("Verify(b): %v %v", probs, err)
	}
	if _, err := st.Verify("nobody"); !errors.Is(err, ErrNoSession) {
		t.Errorf("Verify(nobody): %v", err)
	}
	d, err := st.Show("a")
	if err != nil || d.Damaged != 1 || d.Snapshots[1].Err == nil || !errors.Is(d.Snapshots[1].Err, ErrCorrupt) {
		t.Fatalf("Show: %v %+v, want the second snapshot damaged", err, d)
	}
	os.WriteFile(filepath.Join(st.Dir, "b", conversationFile), []byte("{not json"), 0o600)
	if probs, _ := st.Verify("b"); len(probs) != 1 || !strings.Contains(probs[0].Err.Error(), conversationFile) {
		t.Errorf("damaged conversation: %v", probs)
	}
}

// TestLockContentionGoroutines: a second writer waits for the first; with
// a short timeout it fails with a message naming session and lock file.
func TestLockContentionGoroutines(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	a, _ := OpenStore(dir, testFP(1), StoreOptions{})
	impatient, _ := OpenStore(dir, testFP(1), StoreOptions{LockTimeout: 50 * time.Millisecond})
	ss, err := a.Lock("busy")
	if err != nil {
		t.Fatal(err)
	}
	_, err = impatient.SaveTurn("busy", synthState(1, 1))
	var le *LockError
	if !errors.As(err, &le) {
		t.Fatalf("got %v, want a lock error", err)
	}
	for _, want := range []string{`"busy"`, filepath.Join(dir, ".locks", "busy.lock"), "pid"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if le.Waited < 50*time.Millisecond {
		t.Errorf("gave up after %v, before the 50ms timeout", le.Waited)
	}

	released, done := make(chan struct{}), make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(released)
		ss.Unlock()
		close(done)
	}()
	if _, err := a.SaveTurn("busy", synthState(1, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	default:
		t.Fatal("the second writer saved while the first still held the session")
	}
	<-done
	if _, err := ss.SaveTurn(synthState(1, 1)); err == nil {
		t.Error("saved through an unlocked session")
	}
}

func TestFork(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	src := synthState(6, 1)
	st.SaveTurn("a", synthState(3, 0))
	st.SaveTurn("a", src)
	info, err := st.Fork("a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if info.Turn != 2 || info.Tokens != 6 {
		t.Fatalf("fork: %+v", info)
	}
	if d, err := st.Show("b"); err != nil || d.Turns != 2 {
		t.Fatalf("the fork should keep both turns of its source: %+v %v", d, err)
	}
	r, err := st.Latest("b")
	if err != nil || !reflect.DeepEqual(r.Data, src) {
		t.Fatalf("forked session: %v", err)
	}
	// the sessions go on independently
	st.SaveTurn("a", synthState(9, 2))
	if r, _ := st.Latest("b"); len(r.Data.Tokens) != 6 {
		t.Fatalf("forked session changed with its source: %d tokens", len(r.Data.Tokens))
	}
	if err := st.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Latest("b"); err != nil || !reflect.DeepEqual(r.Data, src) {
		t.Fatalf("forked session after removing its source: %v", err)
	}
	if _, err := st.Fork("b", "b"); err == nil {
		t.Error("forked a session into itself")
	}
	st.SaveTurn("c", synthState(1, 1))
	if _, err := st.Fork("b", "c"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("fork over an existing session: %v", err)
	}
	foreign := openTestStore(t, testFP(2), StoreOptions{})
	foreign.Dir = st.Dir
	if _, err := foreign.Fork("b", "d"); !errors.Is(err, ErrOtherModel) {
		t.Errorf("fork of another model's session: %v", err)
	}
}

// TestTempFilesIgnoredAndCleaned: leftovers of a killed writer are never
// taken for snapshots and are removed by the next save or by GC.
func TestTempFilesIgnoredAndCleaned(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	st.SaveTurn("s", synthState(2, 1))
	dir := filepath.Join(st.Dir, "s")
	leftover := filepath.Join(dir, tempPrefix+"turn-00000002.snap-123")
	os.WriteFile(leftover, []byte("PETALSNP partial"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600)
	if d, err := st.Show("s"); err != nil || d.Turns != 1 {
		t.Fatalf("Show: %v, %d turns", err, d.Turns)
	}
	if r, err := st.Latest("s"); err != nil || r.Snapshot.Turn != 1 {
		t.Fatalf("Latest: %v", err)
	}
	st.SaveTurn("s", synthState(2, 1))
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the next save left %s", leftover)
	}
	os.WriteFile(leftover, nil, 0o600)
	rep, err := st.GC(0, 0)
	if err != nil || rep.TempFiles != 1 || len(rep.Sessions) != 0 {
		t.Fatalf("GC: %v %+v", err, rep)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("GC left %s", leftover)
	}
}

func TestListRemoveGC(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	now := time.Now()
	ages := map[string]time.Duration{"old": 48 * time.Hour, "mid": 2 * time.Hour, "new": 0}
	for name, age := range ages {
		info, err := st.SaveTurn(name, synthState(50, 1))
		if err != nil {
			t.Fatal(err)
		}
		os.Chtimes(info.File, now.Add(-age), now.Add(-age))
	}
	list, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var total int64
	for _, in := range list {
		names = append(names, in.Name)
		total += in.Bytes
		if in.Turns != 1 || in.Tokens != 50 || in.Fingerprint != testFP(1) || in.Err != nil {
			t.Errorf("%+v", in)
		}
	}
	if !slices.Equal(names, []string{"mid", "new", "old"}) {
		t.Fatalf("List: %v", names)
	}

	rep, err := st.GC(24*time.Hour, 0)
	if err != nil || !slices.Equal(rep.Sessions, []string{"old"}) {
		t.Fatalf("GC by age: %v %+v", err, rep)
	}
	// a session held by a writer is never collected
	ss, _ := st.Lock("mid")
	rep, err = st.GC(0, 1)
	if err != nil || !slices.Equal(rep.Sessions, []string{"new"}) || !slices.Equal(rep.Busy, []string{"mid"}) {
		t.Fatalf("GC by size with mid held: %v %+v", err, rep)
	}
	ss.Unlock()
	rep, err = st.GC(0, total) // under the limit: nothing to do
	if err != nil || len(rep.Sessions) != 0 || rep.Kept != total/3 {
		t.Fatalf("GC under the limit: %v %+v", err, rep)
	}
	if err := st.Remove("mid"); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.List(); len(list) != 0 {
		t.Fatalf("after removing all: %v", list)
	}
	if locks, _ := os.ReadDir(filepath.Join(st.Dir, locksDir)); len(locks) != 0 {
		t.Errorf("lock files left: %v", locks)
	}
}

func TestPrefixCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, _ := OpenStore(dir, testFP(1), StoreOptions{PrefixRetention: 3})
	base := tokenIDs(40, 3, 4096)
	c := NewPrefixCache(st, 1<<30)
	for _, n := range []int{10, 20, 30} {
		if err := c.Add(withTokens(base[:n], uint64(n))); err != nil {
			t.Fatal(err)
		}
	}
	r, ok, err := c.LongestPrefix(append(slices.Clone(base[:25]), 1))
	if err != nil || !ok || len(r.Data.Tokens) != 20 || r.Snapshot.File != "" {
		t.Fatalf("memory: ok=%v err=%v tokens=%d file=%q", ok, err, len(r.Data.Tokens), r.Snapshot.File)
	}
	if _, ok, _ := c.LongestPrefix(base[:10]); ok {
		t.Fatal("a prompt equal to a cached prefix matched it")
	}

	// a later run: an empty memory, the same folder
	st2, _ := OpenStore(dir, testFP(1), StoreOptions{PrefixRetention: 3})
	c2 := NewPrefixCache(st2, 1<<30)
	r, ok, err = c2.LongestPrefix(append(slices.Clone(base[:35]), 1))
	if err != nil || !ok || !reflect.DeepEqual(r.Data, withTokens(base[:30], 30)) || r.Snapshot.File == "" {
		t.Fatalf("disk: ok=%v err=%v tokens=%d", ok, err, len(r.Data.Tokens))
	}
	if r, ok, _ = c2.LongestPrefix(append(slices.Clone(base[:35]), 2)); !ok || r.Snapshot.File != "" {
		t.Fatal("a disk hit was not kept in memory")
	}
	// retention: a fourth prefix pushes out the least recently used (10)
	c2.Add(withTokens(base[:5], 5))
	if files, _ := st2.Prefixes(); len(files) != 3 {
		t.Fatalf("%d prefix files kept, want 3", len(files))
	}
	if r, ok, _ := st2.LongestPrefix(append(slices.Clone(base[:12]), 1)); !ok || len(r.Data.Tokens) != 5 {
		t.Fatalf("after eviction: ok=%v tokens=%d, want the 5-token prefix", ok, len(r.Data.Tokens))
	}
	// another model sees none of them
	foreign, _ := OpenStore(dir, testFP(2), StoreOptions{})
	if _, ok, err := foreign.LongestPrefix(append(slices.Clone(base), 1)); ok || err != nil {
		t.Fatalf("another model: ok=%v err=%v", ok, err)
	}

	// memory only, bounded in bytes: the least recently used goes first
	one := stateBytes(ptr(withTokens(base[:10], 1)))
	m := NewPrefixCache(nil, 2*one)
	m.Add(withTokens(base[:10], 1))
	m.Add(withTokens(append(slices.Clone(base[:9]), 1), 2))
	m.LongestPrefix(append(slices.Clone(base[:10]), 3)) // use the first
	m.Add(withTokens(append(slices.Clone(base[:9]), 2), 3))
	if _, ok, _ := m.LongestPrefix(append(slices.Clone(base[:10]), 3)); !ok {
		t.Error("the recently used entry was evicted")
	}
	if _, ok, _ := m.LongestPrefix(append(append(slices.Clone(base[:9]), 1), 3)); ok {
		t.Error("the least recently used entry was kept beyond the byte limit")
	}
}

func ptr[T any](v T) *T { return &v }

// TestConversationSavedAndForked: the message history is kept per session,
// replaced atomically, and copied by a fork, which records its source.
func TestConversationSavedAndForked(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	if conv, err := st.Conversation("a"); err != nil || conv != nil {
		t.Fatalf("new session: %v %v", conv, err)
	}
	saveOneTurn(t, st, "a")
	if _, err := st.Fork("a", "b"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		conv, err := st.Conversation(name)
		if err != nil || len(conv.Messages) != 2 || string(conv.Messages[1]) != `{"role":"assistant","content":"hello"}` || len(conv.Turns) != 1 {
			t.Errorf("session %s: conversation %+v %v", name, conv, err)
		}
	}
	if conv, _ := st.Conversation("b"); conv.ForkedFrom != "a" || conv.ForkedAt != 1 {
		t.Errorf("the fork does not record its source: %+v", conv)
	}
	// an older store's bare array of messages still reads
	os.WriteFile(filepath.Join(st.Dir, "a", conversationFile), []byte(`[{"role":"user","content":"hi"}]`), 0o600)
	if conv, err := st.Conversation("a"); err != nil || len(conv.Messages) != 1 || len(conv.Turns) != 0 {
		t.Errorf("bare array: %+v %v", conv, err)
	}
	for _, bad := range []string{`not json`, `{}`, `{"messages": null}`} {
		os.WriteFile(filepath.Join(st.Dir, "a", conversationFile), []byte(bad), 0o600)
		if _, err := st.Conversation("a"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("conversation %s: %v, want it refused as corrupt", bad, err)
		}
	}
}

// TestTurnCommitIdempotent: a request committed again on top of the same
// history is found, and replacing its turn leaves it once; the same
// request on a longer history (a later, identical message) is a new turn.
func TestTurnCommitIdempotent(t *testing.T) {
	u := json.RawMessage(`{"role":"user","content":"again"}`)
	a1, a2 := json.RawMessage(`{"role":"assistant","content":"one"}`), json.RawMessage(`{"role":"assistant","content":"two"}`)
	c := &Conversation{}
	if _, _, ok := c.FindTurn("r"); ok {
		t.Fatal("found a turn in an empty conversation")
	}
	c.Append("r", u, a1)
	rec, last, ok := c.FindTurn("r")
	if !ok || !last || rec.Start != 0 || rec.End != 2 {
		t.Fatalf("FindTurn after commit: %+v last=%v ok=%v", rec, last, ok)
	}
	if err := c.ReplaceLast("r", u, a2); err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 2 || string(c.Messages[1]) != string(a2) || len(c.Turns) != 1 {
		t.Fatalf("after replacing: %+v", c)
	}
	c.Append("s", u, a1)
	if rec, last, ok := c.FindTurn("r"); !ok || last || rec.End != 2 {
		t.Fatalf("FindTurn with a later turn: %+v last=%v ok=%v", rec, last, ok)
	}
	if err := c.ReplaceLast("r", u, a1); err == nil {
		t.Error("replaced a turn that later turns follow")
	}
	// the history before a turn must still be the one it was appended to
	c2 := &Conversation{Messages: []json.RawMessage{u, a1}, Turns: []TurnRecord{{Request: "r", History: HashMessages([]json.RawMessage{a2}), Start: 1, End: 2}}}
	if _, _, ok := c2.FindTurn("r"); ok {
		t.Error("found a turn whose history changed")
	}
}

// TestGCRemovesAbandonedTemps: GC removes and counts the temporary files of
// writers that are gone, whatever its limits, in prefix folders as in
// session folders; a temporary file still being written (locked) stays.
func TestGCRemovesAbandonedTemps(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	if _, err := st.SavePrefix(synthState(4, 1)); err != nil {
		t.Fatal(err)
	}
	st.SaveTurn("s", synthState(2, 1))
	a := time.Now().Add(-time.Minute)
	abandoned := []string{
		filepath.Join(st.prefixFolder(), tempPrefix+"prefix-0123.snap-99"),
		filepath.Join(st.Dir, "s", tempPrefix+"turn-00000002.snap-98"),
	}
	for _, f := range abandoned {
		os.WriteFile(f, make([]byte, 1000), 0o600)
		os.Chtimes(f, a, a)
	}
	live := filepath.Join(st.prefixFolder(), tempPrefix+"prefix-4567.snap-97")
	os.WriteFile(live, make([]byte, 500), 0o600)
	os.Chtimes(live, a, a)
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if busy, err := tryLock(f); err != nil || busy {
		t.Fatal(busy, err)
	}
	rep, err := st.GC(1000*time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.TempFiles != 2 || rep.TempBytes != 2000 || len(rep.Sessions) != 0 || rep.Prefixes != 0 {
		t.Errorf("GC: %+v, want 2 temporary files of 2000 bytes removed and nothing else", rep)
	}
	for _, f := range abandoned {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("GC left %s", f)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("GC removed a temporary file still being written: %v", err)
	}
}

// TestForkStoppedBeforeItsSnapshots: a fork stopped after it saved the
// history and before it linked a snapshot (a kill there) leaves the new
// session recording where it came from and with no turn of its own, so
// that the request run again (a batch resumed) recognises the fork as done
// or forks again, instead of refusing a session that "already exists".
func TestForkStoppedBeforeItsSnapshots(t *testing.T) {
	st := openTestStore(t, testFP(1), StoreOptions{})
	saveOneTurn(t, st, "a")
	killed := errors.New("killed")
	forkLink = func(src, dst string) error { return killed }
	_, err := st.Fork("a", "b")
	forkLink = linkOrCopy
	if !errors.Is(err, killed) {
		t.Fatalf("fork with its links failing: %v", err)
	}
	conv, err := st.Conversation("b")
	if err != nil || conv == nil || conv.ForkedFrom != "a" || conv.ForkedAt != 1 || len(conv.Messages) != 2 {
		t.Fatalf("the stopped fork's session: conversation %+v %v, want a's history recorded as forked from a", conv, err)
	}
	if turns, err := st.turns("b"); err != nil || len(turns) != 0 {
		t.Fatalf("the stopped fork's session has turns %v (%v)", turns, err)
	}
	info, err := st.Fork("a", "b")
	if err != nil || info.Turn != 1 {
		t.Fatalf("the fork run again: %+v %v", info, err)
	}
}

// saveOneTurn gives session name one turn: a snapshot and a conversation
// of one exchange, request r1.
func saveOneTurn(t *testing.T, st *Store, name string) {
	t.Helper()
	ss, err := st.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Unlock()
	if _, err := ss.SaveTurn(synthState(3, 1)); err != nil {
		t.Fatal(err)
	}
	c := &Conversation{}
	c.Append("r1", json.RawMessage(`{"role":"user","content":"hi"}`), json.RawMessage(`{"role":"assistant","content":"hello"}`))
	if err := ss.SaveConversation(c); err != nil {
		t.Fatal(err)
	}
}
