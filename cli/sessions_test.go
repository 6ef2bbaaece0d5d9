package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionsCommandsNameDamagedSnapshots: sessions show, list and
// verify say which snapshot file is damaged and why, and show --json uses
// snake_case keys and hex fingerprints. (What a job does with a damaged
// snapshot is the executor's test.)
func TestSessionsCommandsNameDamagedSnapshots(t *testing.T) {
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
}
