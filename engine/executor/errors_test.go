package executor

import (
	"errors"
	"testing"

	"petal/jobs"
)

// Every job error becomes an error object with a code: its own, else the
// one its status implies.
func TestJobErrorsHaveCodes(t *testing.T) {
	cases := []struct {
		err       *JobError
		typ, code string
	}{
		{badRequest("messages", "x"), jobs.InvalidRequest, jobs.CodeInvalidValue},
		{refuse("prompt", jobs.CodeContextLength, "x"), jobs.InvalidRequest, jobs.CodeContextLength},
		{&JobError{Status: 400, Param: "session", Err: errors.New("x")}, jobs.InvalidRequest, jobs.CodeInvalidValue},
		{&JobError{Status: 409, Param: "session", Err: errors.New("x")}, jobs.InvalidRequest, jobs.CodeSessionBusy},
		{&JobError{Status: 500, Err: errors.New("x")}, jobs.ServerError, jobs.CodeInternal},
	}
	for _, c := range cases {
		e := c.err.APIError()
		if e.Type != c.typ || e.Code != c.code || e.Message != "x" || e.Param != c.err.Param {
			t.Errorf("%+v: %+v, want type %s code %s", c.err, e, c.typ, c.code)
		}
	}
}

// renderRequest never lets a template switch replace what the job sets.
func TestRenderRequestRefusesOwnKeys(t *testing.T) {
	for _, kw := range []string{`{"messages":[]}`, `{"tools":[]}`, `{"add_generation_prompt":false}`} {
		job := &jobs.Job{Kind: jobs.Chat, Messages: []byte(`[{"role":"user","content":"hi"}]`), TemplateKwargs: []byte(kw)}
		if _, err := renderRequest(job, true); err == nil {
			t.Errorf("kwargs %s accepted", kw)
		}
	}
	job := &jobs.Job{Kind: jobs.Chat, Messages: []byte(`[]`), TemplateKwargs: []byte(`{"enable_thinking":false}`)}
	if b, err := renderRequest(job, true); err != nil || string(b) != `{"messages":[],"add_generation_prompt":true,"enable_thinking":false}` {
		t.Errorf("got %s %v", b, err)
	}
}
