package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenizeReadsTheFile: tokenize FILE and detokenize FILE read the
// file, - reads standard input, and the JSON keeps < and > as they are.
func TestTokenizeReadsTheFile(t *testing.T) {
	dir := t.TempDir()
	texts := filepath.Join(dir, "texts.jsonl")
	os.WriteFile(texts, []byte(`{"text": "<|im_start|>user"}`+"\n"), 0o644)
	stdin := Streams{In: strings.NewReader(`{"text": "from stdin"}` + "\n")}

	code, out, errs := runMain(t, stdin, "tokenize", texts)
	if code != 0 || !strings.Contains(out, `"tokens":["<|im_start|>"`) || strings.Contains(out, `\u003c`) {
		t.Fatalf("tokenize FILE: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	stdin.In = strings.NewReader(`{"text": "<b>"}` + "\n")
	if code, out, _ := runMain(t, stdin, "tokenize", "-"); code != 0 || !strings.Contains(out, `"<`) {
		t.Errorf("tokenize -: exit %d, stdout %q", code, out)
	}
	raw := filepath.Join(dir, "raw.txt")
	os.WriteFile(raw, []byte("x<y"), 0o644)
	if code, out, _ := runMain(t, Streams{In: strings.NewReader("stdin text")}, "tokenize", "--raw", raw); code != 0 || !strings.Contains(out, "<") {
		t.Errorf("tokenize --raw FILE: exit %d, stdout %q", code, out)
	}

	ids := filepath.Join(dir, "ids.jsonl")
	os.WriteFile(ids, []byte(`{"ids": [4071]}`+"\n"), 0o644)
	code, out, errs = runMain(t, Streams{In: strings.NewReader(`{"ids": [1]}`)}, "detokenize", ids)
	if code != 0 || strings.TrimSpace(out) != `{"text":"<|im_start|>"}` {
		t.Errorf("detokenize FILE: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	if code, _, errs := runMain(t, Streams{}, "tokenize", filepath.Join(dir, "missing.jsonl")); code != ExitUsage || !strings.Contains(errs, "missing.jsonl") {
		t.Errorf("a missing file: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runMain(t, Streams{}, "detokenize", ids, ids); code != ExitUsage || !strings.Contains(errs, "one FILE") {
		t.Errorf("two files: exit %d, stderr %q", code, errs)
	}

	req := `{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}`
	code, out, _ = runMain(t, Streams{In: strings.NewReader(req)}, "chat-template", "--ids")
	if code != 0 || !strings.Contains(out, `"text":"<|im_start|>user`) {
		t.Errorf("chat-template --ids: exit %d, stdout %q", code, out)
	}
}
