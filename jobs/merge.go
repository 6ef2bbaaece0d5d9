package jobs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Merge joins result files (e.g. of shards) into one, in input line order
// by each result's "line". A line answered twice is an error naming both
// sources. Missing lines are not judged, since blank input lines have no
// result: MergeComplete checks them against the job file. On error nothing
// is written.
func Merge(w io.Writer, inputs ...io.Reader) error {
	return merge(w, nil, inputs)
}

// MergeComplete is Merge that also checks the results answer exactly
// jobLines (from JobLines over the input), listing the first few missing or
// unexpected lines. A result cut short by an interrupt (finish_reason
// "cancelled") is not an answer, and a result whose line_hash is not that
// of the job line it names answers another version of the line: both are
// errors.
func MergeComplete(w io.Writer, jobLines []JobLine, inputs ...io.Reader) error {
	if jobLines == nil {
		jobLines = []JobLine{}
	}
	return merge(w, jobLines, inputs)
}

// JobLine is a non-blank line of a job file: one that gets a result.
type JobLine struct {
	Line int
	Hash string // LineHash of its bytes
}

// JobLines lists the non-blank lines of a job file.
func JobLines(r io.Reader) ([]JobLine, error) {
	lines := newLineReader(r)
	var out []JobLine
	for {
		line, _, err := lines.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: read line %d: %w", lines.n+1, err)
		}
		line = jobBytes(line, lines.n)
		if !isBlank(line) {
			out = append(out, JobLine{Line: lines.n, Hash: LineHash(line)})
		}
	}
}

type mergedLine struct {
	line      int    // input line it answers
	hash      string // its line_hash, "" when the result has none
	cancelled bool   // a job cut short by an interrupt
	src       int    // which input
	fileLine  int    // its line in that input
	raw       []byte // the result line, without '\n'
}

func merge(w io.Writer, expect []JobLine, inputs []io.Reader) error {
	var all []mergedLine
	for i, in := range inputs {
		got, err := readResults(in, i)
		if err != nil {
			return err
		}
		all = append(all, got...)
	}
	slices.SortStableFunc(all, func(a, b mergedLine) int { return a.line - b.line })
	for k := 1; k < len(all); k++ {
		if a, b := all[k-1], all[k]; a.line == b.line {
			return fmt.Errorf("jobs: merge: line %d has a result in both %s and %s",
				a.line, sourceName(inputs[a.src], a.src), sourceName(inputs[b.src], b.src))
		}
	}
	if expect != nil {
		if err := checkComplete(all, expect, inputs); err != nil {
			return err
		}
	}
	bw := bufio.NewWriter(w)
	for _, m := range all {
		bw.Write(m.raw)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("jobs: merge: %w", err)
	}
	return nil
}

func readResults(in io.Reader, src int) ([]mergedLine, error) {
	name := sourceName(in, src)
	lines := newLineReader(in)
	var out []mergedLine
	for {
		line, _, err := lines.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: merge %s: %w", name, err)
		}
		if isBlank(line) {
			continue
		}
		if !gjson.ValidBytes(line) {
			return nil, fmt.Errorf("jobs: merge %s line %d: not a complete result line (resume that run to finish it)", name, lines.n)
		}
		n := gjson.GetBytes(line, "line")
		if n.Type != gjson.Number || n.Int() < 1 || float64(n.Int()) != n.Num {
			return nil, fmt.Errorf("jobs: merge %s line %d: result has no \"line\" number", name, lines.n)
		}
		v := gjson.ParseBytes(line)
		out = append(out, mergedLine{
			line: int(n.Int()), hash: v.Get("line_hash").Str, cancelled: isCancelled(v),
			src: src, fileLine: lines.n, raw: append([]byte(nil), line...),
		})
	}
}

// checkComplete compares the sorted results with the expected lines: each
// must have one, neither cut short nor of another version of the line.
func checkComplete(all []mergedLine, expect []JobLine, inputs []io.Reader) error {
	want := slices.Clone(expect)
	slices.SortFunc(want, func(a, b JobLine) int { return a.Line - b.Line })
	var missing, extra, cancelled []int
	var changed *mergedLine
	i, j := 0, 0
	for i < len(want) || j < len(all) {
		switch {
		case j == len(all) || (i < len(want) && want[i].Line < all[j].line):
			missing = append(missing, want[i].Line)
			i++
		case i == len(want) || all[j].line < want[i].Line:
			extra = append(extra, all[j].line)
			j++
		default:
			if all[j].cancelled {
				cancelled = append(cancelled, all[j].line)
			} else if all[j].hash != "" && all[j].hash != want[i].Hash && changed == nil {
				changed = &all[j]
			}
			i++
			j++
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("no result for %d of %d job lines (%s)", len(missing), len(want), firstFew(missing)))
	}
	if len(cancelled) > 0 {
		problems = append(problems, fmt.Sprintf("%d results were cut short by an interrupt (finish_reason \"cancelled\"; %s): resume those runs to finish them", len(cancelled), firstFew(cancelled)))
	}
	if len(extra) > 0 {
		problems = append(problems, fmt.Sprintf("%d results answer no job line (%s)", len(extra), firstFew(extra)))
	}
	if changed != nil {
		problems = append(problems, fmt.Sprintf("line %d of %s answers line %d of the job file, but its line_hash %s is not that line's: the job file was edited since, or the result is another input's",
			changed.fileLine, sourceName(inputs[changed.src], changed.src), changed.line, changed.hash))
	}
	if problems != nil {
		return fmt.Errorf("jobs: merge: %s", strings.Join(problems, "; "))
	}
	return nil
}

func firstFew(lines []int) string {
	const few = 5
	var b strings.Builder
	b.WriteString("line")
	if len(lines) > 1 {
		b.WriteString("s")
	}
	for k, n := range lines[:min(len(lines), few)] {
		if k > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d", n)
	}
	if len(lines) > few {
		b.WriteString(", ...")
	}
	return b.String()
}
