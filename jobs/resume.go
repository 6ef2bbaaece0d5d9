package jobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/tidwall/gjson"
)

// Done is what an earlier run already wrote to a result file.
type Done struct {
	ByCustomID map[string]int // custom_id -> the input line it answered (the first, if repeated)
	ByLine     map[int]bool   // input lines answered
	Results    int            // complete result lines read

	// Partial is the size in bytes of an incomplete last line (a run killed
	// mid-write), or of a last result cut short by an interrupt (finish_reason
	// "cancelled"), that was ignored: that job runs again, and
	// TruncatePartial cuts the line off before appending. Zero when the file
	// ends cleanly.
	Partial int64
}

// Has reports whether the job already has a result: by custom_id when it
// has one, else by line number.
func (d Done) Has(j *Job) bool {
	if j.CustomID != "" {
		_, ok := d.ByCustomID[j.CustomID]
		return ok
	}
	return d.ByLine[j.Line]
}

// HasLine reports whether the input line has a result; use it for lines
// that failed to decode (their error result is always by line).
func (d Done) HasLine(line int) bool { return d.ByLine[line] }

// ReadDone reads the result file at path. A missing file means nothing is
// done yet. Every complete result counts, errors included: they would fail
// the same way again.
func ReadDone(path string) (Done, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newDone(), nil
	}
	if err != nil {
		return Done{}, fmt.Errorf("jobs: resume: %w", err)
	}
	defer f.Close()
	d, _, err := scanDone(f, path)
	return d, err
}

// TruncatePartial cuts the result file at path after its last complete
// line, so that appending starts on a fresh line.
func TruncatePartial(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("jobs: truncate: %w", err)
	}
	d, keep, err := scanDone(f, path)
	f.Close()
	if err != nil {
		return err
	}
	if d.Partial == 0 {
		return nil
	}
	if err := os.Truncate(path, keep); err != nil {
		return fmt.Errorf("jobs: truncate: %w", err)
	}
	return nil
}

func newDone() Done {
	return Done{ByCustomID: map[string]int{}, ByLine: map[int]bool{}}
}

// scanDone reads result lines and returns the offset where the complete
// ones end. The last non-blank line is partial when it lacks its newline
// (Writer writes line and newline at once) or is not JSON (e.g. zeros left
// by a crash); an unreadable line anywhere else is an error.
func scanDone(r io.Reader, name string) (Done, int64, error) {
	d := newDone()
	lines := newLineReader(r)
	var pendingErr error // an unreadable line, fatal unless it proves to be the last
	var pendingStart int64
	var cancelled []byte // the last line, when it is a job cut short by an interrupt
	var cancelledStart int64
	for {
		start := lines.off
		line, terminated, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return d, 0, fmt.Errorf("jobs: resume %s: %w", name, err)
		}
		if isBlank(line) {
			continue
		}
		if pendingErr != nil {
			return d, 0, pendingErr
		}
		if !terminated {
			pendingErr, pendingStart = fmt.Errorf("jobs: resume %s line %d: unterminated", name, lines.n), start
			continue
		}
		if cancelled != nil { // not last after all: it stays a result
			d.add(cancelled)
			cancelled = nil
		}
		if isCancelled(line) {
			cancelled, cancelledStart = append([]byte(nil), line...), start
			continue
		}
		if err := d.add(line); err != nil {
			pendingErr, pendingStart = fmt.Errorf("jobs: resume %s line %d: %w", name, lines.n, err), start
		}
	}
	if pendingErr != nil && cancelled == nil {
		d.Partial = lines.off - pendingStart
		return d, pendingStart, nil
	}
	if cancelled != nil {
		// the job an interrupt cut short runs again: its line goes too
		d.Partial = lines.off - cancelledStart
		return d, cancelledStart, nil
	}
	return d, lines.off, nil
}

// isCancelled reports whether a result line is a job cut short by an
// interrupt (finish_reason "cancelled", bare or in a Batch envelope).
func isCancelled(line []byte) bool {
	v := gjson.ParseBytes(line)
	for _, path := range []string{"choices.0.finish_reason", "response.body.choices.0.finish_reason"} {
		if v.Get(path).Str == FinishCancelled {
			return true
		}
	}
	return false
}

// add records one result line by its "line" and "custom_id"; a line from
// another tool's Batch output, without "line", still counts by custom_id.
func (d *Done) add(line []byte) error {
	if !gjson.ValidBytes(line) {
		return errors.New("not valid JSON")
	}
	v := gjson.ParseBytes(line)
	if !v.IsObject() {
		return errors.New("not a JSON object")
	}
	n, id := v.Get("line"), v.Get("custom_id")
	hasLine := n.Type == gjson.Number && n.Int() > 0
	hasID := id.Type == gjson.String && id.Str != ""
	if !hasLine && !hasID {
		return errors.New("result has neither \"line\" nor \"custom_id\"")
	}
	if hasLine {
		d.ByLine[int(n.Int())] = true
	}
	if _, seen := d.ByCustomID[id.Str]; hasID && !seen {
		d.ByCustomID[id.Str] = int(n.Int())
	}
	d.Results++
	return nil
}
