package jobs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader reads physical lines of any length, counting them and the
// bytes consumed.
type lineReader struct {
	br   *bufio.Reader
	buf  []byte
	n    int   // physical lines read so far
	off  int64 // bytes consumed so far
	done bool
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its '\n' (valid until the next call)
// and whether a '\n' ended it; io.EOF once nothing is left.
func (l *lineReader) next() (line []byte, terminated bool, err error) {
	if l.done {
		return nil, false, io.EOF
	}
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		l.buf = append(l.buf, chunk...)
		l.off += int64(len(chunk))
		switch {
		case err == nil:
			l.n++
			return l.buf[:len(l.buf)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			l.done = true
			if len(l.buf) == 0 {
				return nil, false, io.EOF
			}
			l.n++
			return l.buf, false, nil
		default:
			return nil, false, err
		}
	}
}

// isBlank reports a line holding only JSON whitespace.
func isBlank(line []byte) bool {
	return len(bytes.Trim(line, " \t\r\n")) == 0
}

// sourceName names an input in messages: its file name when it has one.
func sourceName(r io.Reader, i int) string {
	if nr, ok := r.(interface{ Name() string }); ok && nr.Name() != "" {
		return nr.Name()
	}
	return "input " + itoa(i+1)
}
