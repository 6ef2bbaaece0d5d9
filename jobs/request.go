package jobs

import (
	"encoding/json"
	"strings"

	"github.com/tidwall/gjson"
)

// ParseRequest decodes and validates the body of an HTTP request to the
// endpoint of kind, as a bare job line is decoded: the same fields, checks
// and error messages, except that the endpoint, not the body, chooses chat
// or completions. The body's members named in own (such as "stream" and
// "stream_options", which a job line refuses) are taken out before the
// body is decoded and returned as they were written, for the caller to
// read; a member own names that is absent is absent from the map.
// Exactly one of the job and the error is nil.
func ParseRequest(body []byte, kind Kind, own ...string) (*Job, map[string]json.RawMessage, *LineError) {
	le := &LineError{}
	if msg := syntaxProblem(body); msg != "" {
		le.Message, le.Code = strings.Replace(msg, "line is", "request body is", 1), codeInvalidJSON
		return nil, nil, le
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		le.Message, le.Code = "request body must be a JSON object, got "+jsonType(root), codeInvalidJSON
		return nil, nil, le
	}
	f := objectFields(root)
	taken := map[string]json.RawMessage{}
	for _, name := range own {
		if v, ok := f.m[name]; ok {
			taken[name] = json.RawMessage(v.Raw)
			delete(f.m, name)
		}
	}
	if len(taken) > 0 {
		kept := f.order[:0:0]
		for _, name := range f.order {
			if _, ok := taken[name]; !ok {
				kept = append(kept, name)
			}
		}
		f.order = kept
	}
	job := &Job{Kind: kind}
	if err := decodeBody(f, job, true); err != nil {
		le.Message, le.Param, le.Code = err.msg, err.param, err.code
		return nil, nil, le
	}
	return job, taken, nil
}
