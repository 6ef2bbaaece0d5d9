package jobs

import (
	"bufio"
	"bytes"
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
// unexpected lines.
func MergeComplete(w io.Writer, jobLines []int, inputs ...io.Reader) error {
	if jobLines == nil {
		jobLines = []int{}
	}
	return merge(w, jobLines, inputs)
}

// JobLines lists the numbers of the non-blank lines of a job file: the
// lines that get a result.
func JobLines(r io.Reader) ([]int, error) {
	lines := newLineReader(r)
	var out []int
	for {
		line, _, err := lines.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: read line %d: %w", lines.n+1, err)
		}
		if lines.n == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if !isBlank(line) {
			out = append(out, lines.n)
		}
	}
}

type mergedLine struct {
	line int    // input line it answers
	src  int    // which input
	raw  []byte // the result line, without '\n'
}

func merge(w io.Writer, expect []int, inputs []io.Reader) error {
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
		if err := checkComplete(all, expect); err != nil {
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
		out = append(out, mergedLine{line: int(n.Int()), src: src, raw: append([]byte(nil), line...)})
	}
}

// checkComplete compares the sorted results with the expected lines.
func checkComplete(all []mergedLine, expect []int) error {
	want := slices.Clone(expect)
	slices.Sort(want)
	var missing, extra []int
	i, j := 0, 0
	for i < len(want) || j < len(all) {
		switch {
		case j == len(all) || (i < len(want) && want[i] < all[j].line):
			missing = append(missing, want[i])
			i++
		case i == len(want) || all[j].line < want[i]:
			extra = append(extra, all[j].line)
			j++
		default:
			i++
			j++
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("no result for %d of %d job lines (%s)", len(missing), len(want), firstFew(missing)))
	}
	if len(extra) > 0 {
		problems = append(problems, fmt.Sprintf("%d results answer no job line (%s)", len(extra), firstFew(extra)))
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
