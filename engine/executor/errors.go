package executor

import (
	"errors"
	"fmt"
	"strings"

	"petal/engine/session"
	"petal/jobs"
)

// JobError is a failed job: Status 400 for a request that cannot be
// served, 409 for a session another process held too long, 500 for a
// failure of petal itself.
type JobError struct {
	Status int
	Param  string // the request field at fault, if any
	Code   string // one of jobs.Code*; "" takes the status's (see APIError)
	Err    error
}

func (e *JobError) Error() string { return e.Err.Error() }

func badRequest(param, format string, args ...any) *JobError {
	return refuse(param, jobs.CodeInvalidValue, format, args...)
}

// refuse is a 400 with its code.
func refuse(param, code, format string, args ...any) *JobError {
	return &JobError{Status: 400, Param: param, Code: code, Err: fmt.Errorf(format, args...)}
}

// APIError is the error object of the job's result. Every one has a
// code: the error's own, else the one its status implies.
func (e *JobError) APIError() jobs.APIError {
	typ, code := jobs.InvalidRequest, e.Code
	switch {
	case e.Status >= 500:
		typ = jobs.ServerError
		if code == "" {
			code = jobs.CodeInternal
		}
	case code == "" && e.Status == 409:
		code = jobs.CodeSessionBusy
	case code == "":
		code = jobs.CodeInvalidValue
	}
	return jobs.APIError{Message: e.Err.Error(), Type: typ, Param: e.Param, Code: code}
}

// sessionError is a failure of the session store: 409 for a lock held too
// long, else 400 (a damaged snapshot says what to do about it).
func sessionError(param string, err error) *JobError {
	status := 400
	var lockErr *session.LockError
	var snapErr *session.SnapshotError
	switch {
	case errors.As(err, &lockErr):
		status = 409
	case errors.As(err, &snapErr) && strings.HasSuffix(snapErr.File, ".snap") && !errors.Is(err, session.ErrOtherModel):
		err = fmt.Errorf("%w; the session's conversation is kept: remove that file to continue from an earlier snapshot (`petal sessions verify` lists every damaged file)", err)
	}
	return &JobError{Status: status, Param: param, Err: err}
}
