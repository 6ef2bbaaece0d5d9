package jobs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// namedReader gives a reader a file-like name.
type namedReader struct {
	io.Reader
	name string
}

func (n namedReader) Name() string { return n.name }

func sampleJobs() string {
	var b strings.Builder
	for i := 1; i <= 23; i++ {
		switch {
		case i%7 == 0:
			b.WriteString("\n") // blank: no result
		case i%5 == 0:
			b.WriteString("not json\n") // an error result
		default:
			fmt.Fprintf(&b, `{"custom_id":"c%d","prompt":"p%d"}`+"\n", i, i)
		}
	}
	return b.String()
}

// runJobs answers every job line that take accepts (all when nil), as a
// batch run would, and returns its output.
func runJobs(t *testing.T, jobFile string, take func(int) bool) string {
	t.Helper()
	var b strings.Builder
	w := NewWriter(&b, WriterOptions{})
	r := NewReader(strings.NewReader(jobFile))
	r.Take = take
	for {
		j, lerr, err := r.Next()
		if err == io.EOF {
			return b.String()
		}
		var out Output
		if lerr != nil {
			out = lerr.Output()
		} else {
			out = Success(j.Origin(), &TextCompletion{Choices: []TextChoice{{Text: "answer to " + j.Prompt}}}, nil)
		}
		if err := w.Write(out); err != nil {
			t.Fatal(err)
		}
	}
}

// shardOutputs runs the jobs in n shards, each writing its own output.
func shardOutputs(t *testing.T, jobFile string, n int) []string {
	t.Helper()
	var outs []string
	for i := range n {
		outs = append(outs, runJobs(t, jobFile, ShardSpec{Index: i, Count: n}.Takes))
	}
	return outs
}

func readers(outs []string) []io.Reader {
	var rs []io.Reader
	for i, o := range outs {
		rs = append(rs, namedReader{strings.NewReader(o), fmt.Sprintf("shard%d.jsonl", i)})
	}
	return rs
}

func TestMergeRoundTrip(t *testing.T) {
	jobFile := sampleJobs()
	// A single run writes results in input order: the reference.
	whole := runJobs(t, jobFile, nil)
	lines, err := JobLines(strings.NewReader(jobFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 20 || lines[5].Line != 6 || lines[6].Line != 8 {
		t.Fatalf("JobLines = %v", lines)
	}
	for _, n := range []int{1, 2, 3, 5} {
		outs := shardOutputs(t, jobFile, n)
		var merged bytes.Buffer
		if err := MergeComplete(&merged, lines, readers(outs)...); err != nil {
			t.Fatalf("%d shards: %v", n, err)
		}
		if merged.String() != whole {
			t.Errorf("%d shards: merged output differs from a single run:\n%s\nwant\n%s", n, merged.String(), whole)
		}
		merged.Reset()
		if err := Merge(&merged, readers(outs)...); err != nil || merged.String() != whole {
			t.Errorf("%d shards, Merge: %v", n, err)
		}
	}
}

func TestMergeFromFiles(t *testing.T) {
	dir := t.TempDir()
	outs := shardOutputs(t, sampleJobs(), 2)
	var files []io.Reader
	for i, o := range outs {
		path := filepath.Join(dir, fmt.Sprintf("part%d.jsonl", i))
		if err := os.WriteFile(path, []byte(o), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	// The same shard twice: every line is a duplicate, named by file.
	dup, _ := os.Open(filepath.Join(dir, "part0.jsonl"))
	defer dup.Close()
	var out bytes.Buffer
	err := Merge(&out, files[0], files[1], dup)
	if err == nil || !strings.Contains(err.Error(), "part0.jsonl and ") || !strings.Contains(err.Error(), "line 1 has a result in both") {
		t.Errorf("err = %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("wrote %d bytes on error", out.Len())
	}
}

func TestMergeErrors(t *testing.T) {
	jobFile := sampleJobs()
	lines, _ := JobLines(strings.NewReader(jobFile))
	outs := shardOutputs(t, jobFile, 3)
	cut := func(s string, drop int) string { // drop the drop-th line (0-based)
		ls := strings.SplitAfter(s, "\n")
		return strings.Join(append(ls[:drop:drop], ls[drop+1:]...), "")
	}
	cases := []struct {
		name string
		outs []string
		want string
	}{
		{"duplicate", []string{outs[0], outs[1], outs[2], strings.SplitAfter(outs[1], "\n")[1]}, "line 5 has a result in both shard1.jsonl and shard3.jsonl"},
		{"missing", []string{cut(outs[0], 0), outs[1], cut(outs[2], 2)}, "no result for 2 of 20 job lines (lines 1, 9)"},
		{"missing shard", []string{outs[0], outs[2]}, "no result for 7 of 20 job lines (lines 2, 5, 8, 11, 17, ...)"},
		{"unexpected", []string{outs[0], outs[1], outs[2], `{"line":99}` + "\n"}, "1 results answer no job line (line 99)"},
		{"truncated", []string{outs[0], outs[1] + `{"line":30,"choi`}, "shard1.jsonl line 8: not a complete result line"},
		{"no line", []string{outs[0], `{"custom_id":"x"}` + "\n"}, `shard1.jsonl line 1: result has no "line" number`},
		{"line not integer", []string{`{"line":2.5}` + "\n"}, `shard0.jsonl line 1: result has no "line" number`},
	}
	for _, c := range cases {
		var out bytes.Buffer
		err := MergeComplete(&out, lines, readers(c.outs)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "jobs: merge") {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: wrote %d bytes on error", c.name, out.Len())
		}
	}
	// Without the job lines, gaps are not judged.
	var out bytes.Buffer
	if err := Merge(&out, readers([]string{outs[0], outs[2]})...); err != nil {
		t.Errorf("Merge with a shard missing: %v", err)
	}
	if strings.Count(out.String(), "\n") != 13 {
		t.Errorf("merged %d lines, want 13", strings.Count(out.String(), "\n"))
	}
}

// TestMergeCompleteRefusesCancelledAndChanged: with the job file, a result
// cut short by an interrupt is not complete, and a result whose line_hash
// is not that of the job line it names answers another line; the line_hash
// is carried through.
func TestMergeCompleteRefusesCancelledAndChanged(t *testing.T) {
	jobFile := sampleJobs()
	lines, _ := JobLines(strings.NewReader(jobFile))
	outs := shardOutputs(t, jobFile, 2)
	var merged bytes.Buffer
	if err := MergeComplete(&merged, lines, readers(outs)...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(merged.String(), `"line_hash":"`+LineHash([]byte(`{"custom_id":"c1","prompt":"p1"}`))+`"`) {
		t.Errorf("line_hash not carried through:\n%s", merged.String())
	}
	cancelled := strings.Replace(outs[1], `"finish_reason":""`, `"finish_reason":"cancelled"`, 1)
	if cancelled == outs[1] {
		t.Fatal("no finish_reason to replace")
	}
	edited := strings.Replace(jobFile, `"prompt":"p2"`, `"prompt":"two"`, 1)
	editedLines, _ := JobLines(strings.NewReader(edited))
	for _, c := range []struct {
		name  string
		lines []JobLine
		outs  []string
		want  string
	}{
		{"cancelled", lines, []string{outs[0], cancelled}, "1 results were cut short by an interrupt (finish_reason \"cancelled\"; line 2)"},
		{"changed", editedLines, outs, "shard1.jsonl answers line 2 of the job file, but its line_hash"},
	} {
		merged.Reset()
		err := MergeComplete(&merged, c.lines, readers(c.outs)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || merged.Len() != 0 {
			t.Errorf("%s: err = %v, want %q (and nothing written)", c.name, err, c.want)
		}
	}
}
