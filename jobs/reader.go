package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
)

// Reader reads job lines one at a time.
type Reader struct {
	lines *lineReader
	seen  map[string]int // custom_id -> line it first appeared on
	// envelopes is the form of the latest line whose form could be told,
	// given to lines that are not JSON objects so that a file of Batch
	// envelopes gets Batch-shaped error lines throughout.
	envelopes bool

	// Take, when set, selects the lines to serve (by physical line number),
	// e.g. ShardSpec.Takes. The others are parsed only for their
	// custom_id, so that a duplicate is found across shards as in one run:
	// the later of two lines with one custom_id fails in whichever shard
	// takes it.
	Take func(line int) bool
}

// NewReader reads job lines from r; lines may be of any length.
func NewReader(r io.Reader) *Reader {
	return &Reader{lines: newLineReader(r), seen: map[string]int{}}
}

// Line is the number of the last physical line read.
func (r *Reader) Line() int { return r.lines.n }

var utf8BOM = []byte("\xef\xbb\xbf")

// Next returns the next job, or a LineError for a line that cannot be
// served, skipping blank lines and lines Take refuses. The error is io.EOF at
// the end of the input and otherwise an I/O failure.
func (r *Reader) Next() (*Job, *LineError, error) {
	for {
		n := r.lines.n + 1
		if r.Take != nil && !r.Take(n) {
			line, _, err := r.lines.next()
			if err != nil {
				return nil, nil, readError(err, n)
			}
			r.noteID(jobBytes(line, n), n)
			continue
		}
		line, _, err := r.lines.next()
		if err != nil {
			return nil, nil, readError(err, n)
		}
		line = jobBytes(line, n)
		if isBlank(line) {
			continue
		}
		job, lerr := ParseLine(line, n)
		if job != nil {
			job.LineHash = LineHash(line)
		} else {
			lerr.LineHash = LineHash(line)
		}
		if lerr != nil && lerr.Code == codeInvalidJSON {
			lerr.Envelope = r.envelopes
		} else if lerr != nil {
			r.envelopes = lerr.Envelope
		} else {
			r.envelopes = job.Envelope
		}
		if lerr != nil {
			// A bad line's custom_id still counts as used: its error result
			// carries it, and resume matches results by custom_id.
			if _, dup := r.seen[lerr.CustomID]; lerr.CustomID != "" && !dup {
				r.seen[lerr.CustomID] = n
			}
			return nil, lerr, nil
		}
		if job.CustomID != "" {
			if first, dup := r.seen[job.CustomID]; dup {
				return nil, &LineError{
					Line: n, CustomID: job.CustomID, Envelope: job.Envelope, Param: "custom_id", Code: codeDuplicateID,
					Message: fmt.Sprintf("field \"custom_id\" is %q, already used on line %d", job.CustomID, first),
				}, nil
			}
			r.seen[job.CustomID] = n
		}
		return job, nil, nil
	}
}

// noteID records the custom_id of line n, a line not served here, as used
// where no earlier line used it (as Next does for a line it serves).
func (r *Reader) noteID(line []byte, n int) {
	if isBlank(line) {
		return
	}
	var id string
	if job, lerr := ParseLine(line, n); job != nil {
		id = job.CustomID
	} else {
		id = lerr.CustomID
	}
	if _, dup := r.seen[id]; id != "" && !dup {
		r.seen[id] = n
	}
}

// jobBytes is what a job line holds: the physical line n without its "\r"
// and, on the first line, without a UTF-8 byte-order mark.
func jobBytes(line []byte, n int) []byte {
	if n == 1 {
		line = bytes.TrimPrefix(line, utf8BOM)
	}
	return bytes.TrimSuffix(line, []byte("\r"))
}

// LineHash identifies a job line's bytes (see jobBytes): the first 16 hex
// digits of their SHA-256. Results carry it as "line_hash", so that resume
// and merge can prove a result answers the input line it names.
func LineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:8])
}

func readError(err error, line int) error {
	if err == io.EOF {
		return io.EOF
	}
	return fmt.Errorf("jobs: read line %d: %w", line, err)
}

func itoa(n int) string { return strconv.Itoa(n) }
