package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll drains a Reader, returning the jobs and line errors in order.
func readAll(t *testing.T, r *Reader) ([]*Job, []*LineError) {
	t.Helper()
	var jobs []*Job
	var lerrs []*LineError
	for {
		job, lerr, err := r.Next()
		if errors.Is(err, io.EOF) {
			return jobs, lerrs
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if (job == nil) == (lerr == nil) {
			t.Fatalf("Next returned job %v and line error %v", job, lerr)
		}
		if job != nil {
			jobs = append(jobs, job)
		} else {
			lerrs = append(lerrs, lerr)
		}
	}
}

func TestReaderBlankLinesAndNumbering(t *testing.T) {
	input := "\xef\xbb\xbf{\"prompt\":\"a\"}\n\n   \t\n{\"prompt\":\"b\"}\r\nnot json\n\n{\"prompt\":\"c\"}"
	r := NewReader(strings.NewReader(input))
	jobs, lerrs := readAll(t, r)
	if len(jobs) != 3 || jobs[0].Line != 1 || jobs[1].Line != 4 || jobs[2].Line != 7 {
		t.Fatalf("jobs at lines %v", jobLines(jobs))
	}
	if jobs[0].Prompt != "a" || jobs[1].Prompt != "b" || jobs[2].Prompt != "c" {
		t.Errorf("prompts %q %q %q", jobs[0].Prompt, jobs[1].Prompt, jobs[2].Prompt)
	}
	if len(lerrs) != 1 || lerrs[0].Line != 5 || lerrs[0].Code != codeInvalidJSON {
		t.Errorf("line errors %+v", lerrs)
	}
	if r.Line() != 7 {
		t.Errorf("Line() = %d, want 7", r.Line())
	}
}

func jobLines(jobs []*Job) []int {
	var out []int
	for _, j := range jobs {
		out = append(out, j.Line)
	}
	return out
}

func TestReaderVeryLongLine(t *testing.T) {
	long := strings.Repeat("x", 10<<20)
	input := `{"prompt":"short"}` + "\n" + `{"messages":[{"role":"user","content":"` + long + `"}],"custom_id":"big"}` + "\n" + `{"prompt":"after"}` + "\n"
	jobs, lerrs := readAll(t, NewReader(strings.NewReader(input)))
	if len(lerrs) != 0 || len(jobs) != 3 {
		t.Fatalf("%d jobs, %d errors", len(jobs), len(lerrs))
	}
	if jobs[1].Line != 2 || jobs[1].CustomID != "big" || len(jobs[1].Messages) < 10<<20 {
		t.Errorf("long job: line %d id %q messages %d bytes", jobs[1].Line, jobs[1].CustomID, len(jobs[1].Messages))
	}
	if jobs[2].Prompt != "after" || jobs[2].Line != 3 {
		t.Errorf("job after the long line = %+v", jobs[2])
	}
}

func TestReaderDuplicateCustomID(t *testing.T) {
	input := strings.Join([]string{
		`{"custom_id":"a","prompt":"1"}`,
		`{"custom_id":"b","prompt":5}`, // bad, but its custom_id is taken
		`{"custom_id":"a","prompt":"2"}`,
		`{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"3"}}`,
		`{"prompt":"no id"}`,
		`{"prompt":"no id"}`,
	}, "\n")
	jobs, lerrs := readAll(t, NewReader(strings.NewReader(input)))
	if len(jobs) != 3 || len(lerrs) != 3 {
		t.Fatalf("%d jobs, %d errors", len(jobs), len(lerrs))
	}
	dupA, dupB := lerrs[1], lerrs[2]
	if dupA.Line != 3 || dupA.CustomID != "a" || dupA.Param != "custom_id" || dupA.Code != codeDuplicateID ||
		!strings.Contains(dupA.Message, `"a", already used on line 1`) {
		t.Errorf("duplicate a: %+v", dupA)
	}
	if dupB.Line != 4 || !dupB.Envelope || !strings.Contains(dupB.Message, "already used on line 2") {
		t.Errorf("duplicate b: %+v", dupB)
	}
}

func TestReaderTake(t *testing.T) {
	input := "{\"prompt\":\"1\"}\n\n{\"prompt\":\"3\"}\nbroken\n{\"prompt\":\"5\"}\n{\"prompt\":\"6\"}"
	odd := func(line int) bool { return line%2 == 1 }
	r := NewReader(strings.NewReader(input))
	r.Take = odd
	jobs, lerrs := readAll(t, r)
	if got := jobLines(jobs); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 5 || len(lerrs) != 0 {
		t.Errorf("odd lines: jobs %v, errors %v", got, lerrs)
	}
	r = NewReader(strings.NewReader(input))
	r.Take = func(line int) bool { return !odd(line) }
	jobs, lerrs = readAll(t, r)
	if got := jobLines(jobs); len(got) != 1 || got[0] != 6 || len(lerrs) != 1 || lerrs[0].Line != 4 {
		t.Errorf("even lines: jobs %v, errors %v", got, lerrs)
	}
	if r.Line() != 6 {
		t.Errorf("Line() = %d", r.Line())
	}
}

func TestReaderIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := NewReader(io.MultiReader(strings.NewReader("{\"prompt\":\"a\"}\n"), iotest.ErrReader(boom)))
	if job, _, err := r.Next(); err != nil || job == nil {
		t.Fatalf("first line: %v %v", job, err)
	}
	_, _, err := r.Next()
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v", err)
	}
}

func TestReaderEmptyInput(t *testing.T) {
	for _, in := range []string{"", "\n\n", "  "} {
		jobs, lerrs := readAll(t, NewReader(strings.NewReader(in)))
		if len(jobs)+len(lerrs) != 0 {
			t.Errorf("%q: %d jobs %d errors", in, len(jobs), len(lerrs))
		}
	}
}

func TestReaderFormOfUnreadableLines(t *testing.T) {
	env := `{"custom_id":"%s","method":"POST","url":"/v1/completions","body":{"prompt":"p"}}`
	input := "{oops\n" + strings.ReplaceAll(env, "%s", "a") + "\n[1]\n" + `{"prompt":"bare"}` + "\nnot json\n"
	_, lerrs := readAll(t, NewReader(strings.NewReader(input)))
	if len(lerrs) != 3 {
		t.Fatalf("%d line errors", len(lerrs))
	}
	// Before any readable line the form is bare; afterwards it follows the
	// latest readable line.
	if lerrs[0].Envelope || !lerrs[1].Envelope || lerrs[2].Envelope {
		t.Errorf("forms: %v %v %v, want false true false", lerrs[0].Envelope, lerrs[1].Envelope, lerrs[2].Envelope)
	}
	m := asMap(t, lerrs[1].Output())
	if v, ok := m["custom_id"]; !ok || v != nil || m["response"] == nil || m["line"] != 3.0 {
		t.Errorf("envelope error line for an unreadable line = %v", m)
	}
}

// TestLineHash: every job and line error carries the hash of its line's
// bytes (without line ending or byte-order mark), and its result line
// writes it next to "line".
func TestLineHash(t *testing.T) {
	const a, b = `{"prompt":"a"}`, `{"custom_id":"e","method":"POST","url":"/v1/completions","body":{"prompt":"b"}}`
	input := "\xef\xbb\xbf" + a + "\r\n" + b + "\n" + "not json"
	jobs, lerrs := readAll(t, NewReader(strings.NewReader(input)))
	if len(jobs) != 2 || len(lerrs) != 1 {
		t.Fatalf("%d jobs, %d errors", len(jobs), len(lerrs))
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:])[:16] }
	if jobs[0].LineHash != sum(a) || jobs[1].LineHash != sum(b) || lerrs[0].LineHash != sum("not json") {
		t.Fatalf("hashes %q %q %q", jobs[0].LineHash, jobs[1].LineHash, lerrs[0].LineHash)
	}
	if LineHash([]byte(a)) != sum(a) {
		t.Errorf("LineHash = %q", LineHash([]byte(a)))
	}
	for _, out := range []Output{
		Success(jobs[0].Origin(), &TextCompletion{}, nil),
		Success(jobs[1].Origin(), &TextCompletion{}, nil),
		lerrs[0].Output(),
	} {
		m := asMap(t, out)
		if m["line_hash"] != out.LineHash || out.LineHash == "" {
			t.Errorf("result %v: line_hash %v, want %q", m, m["line_hash"], out.LineHash)
		}
	}
}
