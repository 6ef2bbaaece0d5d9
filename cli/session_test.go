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
