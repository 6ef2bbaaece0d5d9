package jobs

import "fmt"

// Error codes carried in error result lines, in OpenAI's vocabulary where
// it has one. Every error result carries one of these.
const (
	CodeInvalidJSON   = "invalid_json"               // the line is not JSON (or not UTF-8, or not an object)
	CodeInvalidType   = "invalid_type"               // a field has the wrong JSON type
	CodeInvalidValue  = "invalid_value"              // a field's value is out of range or not allowed
	CodeMissing       = "missing_required_parameter" // a required field is absent
	CodeUnsupported   = "unsupported_value"          // a valid value petal does not serve (an url, streaming, n > 1)
	CodeDuplicateID   = "duplicate_custom_id"        // a custom_id seen on an earlier line
	CodeContextLength = "context_length_exceeded"    // the prompt does not fit in the context
	CodeSessionBusy   = "session_busy"               // the session's lock was not released in time
	CodeInternal      = "internal_error"             // petal failed running the job (status 500)
)

// The package's own short names.
const (
	codeInvalidJSON  = CodeInvalidJSON
	codeInvalidType  = CodeInvalidType
	codeInvalidValue = CodeInvalidValue
	codeMissing      = CodeMissing
	codeUnsupported  = CodeUnsupported
	codeDuplicateID  = CodeDuplicateID
)

// LineError is a job line that cannot be served: the caller writes its
// Output as the line's result and goes on with the batch.
type LineError struct {
	Line     int
	LineHash string // LineHash of the line's bytes
	CustomID string // when it could be read
	Envelope bool   // the line's form; from earlier lines when it is not a JSON object
	Message  string // names the field at fault
	Param    string // the field, "" when the line as a whole is at fault
	Code     string // machine-readable reason (invalid_type, invalid_value, ...)
}

func (e *LineError) Error() string {
	return fmt.Sprintf("jobs: line %d: %s", e.Line, e.Message)
}

// Origin is the identity of the failed line, for its result.
func (e *LineError) Origin() Origin {
	return Origin{Line: e.Line, LineHash: e.LineHash, CustomID: e.CustomID, Envelope: e.Envelope}
}

// Output is the error result line for the failed line.
func (e *LineError) Output() Output {
	return Failure(e.Origin(), APIError{
		Message: e.Message,
		Type:    InvalidRequest,
		Param:   e.Param,
		Code:    e.Code,
	})
}

// fieldError is one validation failure, before it is placed on a line.
type fieldError struct {
	param, code, msg string
}

func fieldErrorf(param, code, format string, args ...any) *fieldError {
	return &fieldError{param: param, code: code, msg: fmt.Sprintf(format, args...)}
}
