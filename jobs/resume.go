package jobs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/tidwall/gjson"
)

// Previous is the result file an earlier run left, read for resuming.
type Previous struct {
	Path    string
	results []previousResult
	end     int64 // where the last complete result line ends; a torn tail may follow
	size    int64
}

// previousResult is one complete result line of the file.
type previousResult struct {
	start, end int64 // its bytes, newline included
	fileLine   int   // its line in the result file
	line       int   // the input line it answers; 0 for another tool's output
	lineHash   string
	customID   string
	rerun      bool // a failure not the job's fault, or a job cut short
}

// ReadPrevious reads the result file at path. A missing file is an empty
// one. The last line is ignored (and cut by Apply) when it lacks its
// newline, as Writer writes line and newline at once, or is not JSON (zeros
// left by a crash); an unreadable line anywhere else is an error.
func ReadPrevious(path string) (*Previous, error) {
	p := &Previous{Path: path}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: resume: %w", err)
	}
	defer f.Close()
	lines := newLineReader(f)
	var pending error // an unreadable line, fatal unless it proves to be the last
	for {
		start := lines.off
		line, terminated, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: resume %s: %w", path, err)
		}
		if isBlank(line) {
			continue
		}
		if pending != nil {
			return nil, pending
		}
		if !terminated {
			pending = fmt.Errorf("jobs: resume %s line %d: unterminated", path, lines.n)
			continue
		}
		r, err := parsePrevious(line)
		if err != nil {
			pending = fmt.Errorf("jobs: resume %s line %d: %w", path, lines.n, err)
			continue
		}
		r.start, r.end, r.fileLine = start, lines.off, lines.n
		p.results = append(p.results, r)
		p.end = lines.off
	}
	p.size = lines.off
	return p, nil
}

func parsePrevious(line []byte) (previousResult, error) {
	if !gjson.ValidBytes(line) {
		return previousResult{}, errors.New("not valid JSON")
	}
	v := gjson.ParseBytes(line)
	if !v.IsObject() {
		return previousResult{}, errors.New("not a JSON object")
	}
	n, id := v.Get("line"), v.Get("custom_id")
	hasLine := n.Type == gjson.Number && n.Int() > 0 && float64(n.Int()) == n.Num
	hasID := id.Type == gjson.String && id.Str != ""
	if !hasLine && !hasID {
		return previousResult{}, errors.New("result has neither \"line\" nor \"custom_id\"")
	}
	r := previousResult{customID: id.Str, lineHash: v.Get("line_hash").Str}
	if hasLine {
		r.line = int(n.Int())
	}
	r.rerun = isCancelled(v) || runsAgain(resultStatus(v))
	return r, nil
}

// resultStatus is the HTTP status of a result line: the envelope's
// status_code, a bare error's status_code (or, from a petal that did not
// write it, 500 for a server_error and 400 otherwise), 200 for a completion.
func resultStatus(v gjson.Result) int {
	if s := v.Get("response.status_code"); s.Type == gjson.Number {
		return int(s.Int())
	}
	if s := v.Get("status_code"); s.Type == gjson.Number {
		return int(s.Int())
	}
	if e := v.Get("error"); e.IsObject() {
		if e.Get("type").Str == ServerError {
			return 500
		}
		return 400
	}
	return 200
}

// runsAgain reports whether a failure with this status is not the job's
// fault and may succeed another time: petal's own failures (5xx, a full disk
// among them), a session lock held too long (409), a timeout (408), a rate
// limit (429). Other 4xx failures are the job's, and would fail the same
// way again.
func runsAgain(status int) bool {
	return status >= 500 || status == 408 || status == 409 || status == 429
}

// isCancelled reports whether a result line is a job cut short by an
// interrupt (finish_reason "cancelled", bare or in a Batch envelope).
func isCancelled(v gjson.Result) bool {
	for _, path := range []string{"choices.#.finish_reason", "response.body.choices.#.finish_reason"} {
		for _, r := range v.Get(path).Array() {
			if r.Str == FinishCancelled {
				return true
			}
		}
	}
	return false
}

// ResumeOptions say how to judge the results of an earlier run.
type ResumeOptions struct {
	InputName string // the job file, for messages
	// RerunChanged runs again the lines whose results answer another
	// version of the line, instead of refusing to resume.
	RerunChanged bool
	// Take is the shard being resumed (nil: every line); a result for a line
	// it does not take means the file is another shard's.
	Take func(line int) bool
}

// Resume is what continuing an earlier run will do: the jobs whose results
// stay, and the result lines Apply removes because their jobs run again.
type Resume struct {
	Done Done
	// Rerun counts results that run again: failures that were not the
	// job's fault, jobs an interrupt cut short.
	Rerun int
	// Changed counts results of lines that changed since (RerunChanged).
	Changed int
	// Unverified counts kept results without "line_hash" (from an older
	// petal or another tool), which cannot be checked against the input;
	// FirstUnverified is the result-file line of the first.
	Unverified, FirstUnverified int

	prev *Previous
	drop []bool // by index into prev.results
}

// MismatchError is a result that does not answer the input line it names.
type MismatchError struct {
	Message string
}

func (e *MismatchError) Error() string { return e.Message }

// Plan checks the earlier results against the job input (read to its end)
// and decides which stay done. A result whose line_hash differs from the
// hash of the input line it names (the line was edited, a line inserted
// before it, the results are another input's) is a *MismatchError naming
// the first, unless RerunChanged.
func (p *Previous) Plan(input io.Reader, opts ResumeOptions) (*Resume, error) {
	r := &Resume{Done: newDone(), prev: p, drop: make([]bool, len(p.results))}
	byLine := map[int][]int{} // input line -> results to check against it
	for i, res := range p.results {
		if res.line > 0 && opts.Take != nil && !opts.Take(res.line) {
			return nil, &MismatchError{fmt.Sprintf("jobs: resume: %s line %d answers line %d of %s, which this shard does not run: the file was written with another --shard", p.Path, res.fileLine, res.line, opts.InputName)}
		}
		// a result that runs again anyway need not match
		if res.line > 0 && res.lineHash != "" && !res.rerun {
			byLine[res.line] = append(byLine[res.line], i)
		}
	}
	changed, err := p.compare(input, byLine, opts.InputName)
	if err != nil {
		return nil, err
	}
	if len(changed) > 0 && !opts.RerunChanged {
		first := changed[0]
		return nil, &MismatchError{fmt.Sprintf("jobs: resume: %s; %d of %d results disagree with %s: run again with --rerun-changed to run those lines again, or write to another --output",
			first.why, len(changed), len(p.results), opts.InputName)}
	}
	for _, c := range changed {
		r.drop[c.result] = true
		r.Changed++
	}
	for i, res := range p.results {
		switch {
		case r.drop[i]:
		case res.rerun:
			r.drop[i] = true
			r.Rerun++
		default:
			r.Done.add(res)
			if res.lineHash == "" {
				if r.Unverified == 0 {
					r.FirstUnverified = res.fileLine
				}
				r.Unverified++
			}
		}
	}
	return r, nil
}

type changedResult struct {
	result int // index into results
	why    string
}

// compare hashes the input lines that results name and lists the results
// that do not match, in input line order.
func (p *Previous) compare(input io.Reader, byLine map[int][]int, inputName string) ([]changedResult, error) {
	var changed []changedResult
	lines := newLineReader(input)
	for len(byLine) > 0 {
		raw, _, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("jobs: resume: reading %s line %d: %w", inputName, lines.n+1, err)
		}
		idx, ok := byLine[lines.n]
		if !ok {
			continue
		}
		delete(byLine, lines.n)
		line := jobBytes(raw, lines.n)
		hash := LineHash(line)
		for _, i := range idx {
			res := p.results[i]
			switch {
			case isBlank(line):
				changed = append(changed, changedResult{i, fmt.Sprintf("%s line %d answers line %d of %s, which is blank now", p.Path, res.fileLine, res.line, inputName)})
			case res.lineHash != hash:
				changed = append(changed, changedResult{i, fmt.Sprintf("%s line %d answers line %d of %s, but that line is not the one it answered (line_hash %s, the line now hashes to %s): the input was edited, or the results are another input's",
					p.Path, res.fileLine, res.line, inputName, res.lineHash, hash)})
			}
		}
	}
	// what is left names lines past the end of the input
	var past []int
	for _, idx := range byLine {
		past = append(past, idx...)
	}
	slices.Sort(past)
	for _, i := range past {
		res := p.results[i]
		changed = append(changed, changedResult{i, fmt.Sprintf("%s line %d answers line %d of %s, which has only %d lines", p.Path, res.fileLine, res.line, inputName, lines.n)})
	}
	slices.SortStableFunc(changed, func(a, b changedResult) int {
		return p.results[a.result].line - p.results[b.result].line
	})
	return changed, nil
}

// Apply leaves in the result file only the results that stay, so that the
// jobs that run again are appended once: the file is cut when everything
// removed comes after what stays (a torn last line, the last jobs), and
// otherwise rewritten whole and renamed into place, so that a crash leaves
// either the old file or the new one. A symlinked output is rewritten where
// it points.
func (r *Resume) Apply() error {
	p := r.prev
	keepEnd, dropStart := int64(0), int64(-1)
	for i, res := range p.results {
		if r.drop[i] {
			if dropStart < 0 {
				dropStart = res.start
			}
		} else {
			keepEnd = res.end
		}
	}
	switch {
	case dropStart < 0 || dropStart >= keepEnd:
		cut := p.end
		if dropStart >= 0 {
			cut = dropStart
		}
		if cut >= p.size {
			return nil
		}
		if err := os.Truncate(p.Path, cut); err != nil {
			return fmt.Errorf("jobs: resume: cutting %s to its whole results: %w", p.Path, err)
		}
		return nil
	}
	return r.rewrite()
}

func (r *Resume) rewrite() error {
	p := r.prev
	path, err := filepath.EvalSymlinks(p.Path)
	if err != nil {
		return fmt.Errorf("jobs: resume: %w", err)
	}
	return ReplaceFile(path, func(w io.Writer) error {
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		for i, res := range p.results {
			if r.drop[i] {
				continue
			}
			if _, err := io.Copy(w, io.NewSectionReader(src, res.start, res.end-res.start)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReplaceFile writes a new version of the file at path through write and
// renames it into place: a temporary file in the same folder, fsynced, then
// renamed, then the folder fsynced. A crash leaves the old file or the new
// one, never a mix. The file keeps its permissions.
func ReplaceFile(path string, write func(io.Writer) error) error {
	mode := fs.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("jobs: rewrite %s: %w", path, err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("jobs: rewrite %s: %w (the file is unchanged)", path, err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(bw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("jobs: rewrite %s: %w (the file is unchanged)", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Done is the set of jobs an earlier run answered for good.
type Done struct {
	lines    map[int]bool    // input lines whose result matched its line_hash
	ids      map[string]bool // custom_ids of results without line_hash
	oldLines map[int]bool    // input lines of results without line_hash
}

func newDone() Done {
	return Done{lines: map[int]bool{}, ids: map[string]bool{}, oldLines: map[int]bool{}}
}

// add records a result that stays. One with a line_hash matched its input
// line, so the line decides; one without (an older petal, another tool) is
// matched as results were before hashes: by custom_id when the job has
// one, else by line.
func (d Done) add(r previousResult) {
	switch {
	case r.lineHash != "":
		d.lines[r.line] = true
	default:
		if r.customID != "" {
			d.ids[r.customID] = true
		}
		if r.line > 0 {
			d.oldLines[r.line] = true
		}
	}
}

// Has reports whether the job already has a result.
func (d Done) Has(j *Job) bool {
	if d.lines[j.Line] {
		return true
	}
	if j.CustomID != "" {
		return d.ids[j.CustomID]
	}
	return d.oldLines[j.Line]
}

// HasLine reports whether the input line has a result; use it for lines
// that failed to decode.
func (d Done) HasLine(line int) bool { return d.lines[line] || d.oldLines[line] }

func (d Done) String() string {
	return fmt.Sprintf("lines %v, unverified lines %v, unverified custom_ids %v", d.lines, d.oldLines, d.ids)
}
