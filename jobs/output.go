package jobs

import (
	"bytes"
	"fmt"
	"net/http"
)

// Error types, in OpenAI's vocabulary.
const (
	InvalidRequest = "invalid_request_error" // the job cannot be served as given (400)
	ServerError    = "server_error"          // petal failed running it (500)
)

// APIError is the "error" object of a failed request.
type APIError struct {
	Message string
	Type    string // InvalidRequest or ServerError
	Param   string // the field at fault; written as null when empty
	Code    string // machine-readable reason; written as null when empty
}

func (e APIError) MarshalJSON() ([]byte, error) {
	return marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, e.Type, nullable(e.Param), nullable(e.Code)})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Output is one result line. Envelope jobs get OpenAI Batch output lines
//
//	{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": null}
//
// where a failed request has status 400 (or 500) and body {"error": {...}},
// as OpenAI writes request-level failures; bare jobs get the completion
// object itself, or {"error": {...}, "status_code"}. Both forms add petal's
// "line" (the input line number), "line_hash" (LineHash of that line),
// "custom_id" when known, and "warnings" when any.
type Output struct {
	Origin
	Body       any       // a ChatCompletion or TextCompletion (or pointer), when Error is nil
	Error      *APIError // the request's failure
	StatusCode int       // 0: 200 for a Body, 400 for an Error
	Warnings   []string
}

// Success is the result line of a job that ran; an empty completion id is
// filled from the origin.
func Success(o Origin, body any, warnings []string) Output {
	switch b := body.(type) {
	case *ChatCompletion:
		if b.ID == "" {
			c := *b
			c.ID = o.ChatCompletionID()
			body = &c
		}
	case ChatCompletion:
		if b.ID == "" {
			b.ID = o.ChatCompletionID()
			body = b
		}
	case *TextCompletion:
		if b.ID == "" {
			c := *b
			c.ID = o.TextCompletionID()
			body = &c
		}
	case TextCompletion:
		if b.ID == "" {
			b.ID = o.TextCompletionID()
			body = b
		}
	}
	return Output{Origin: o, Body: body, Warnings: warnings}
}

// Failure is the result line of a job that could not be served.
func Failure(o Origin, e APIError) Output {
	return Output{Origin: o, Error: &e}
}

func (o Output) status() int {
	switch {
	case o.StatusCode != 0:
		return o.StatusCode
	case o.Error != nil:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

type errorBody struct {
	Error *APIError `json:"error"`
}

func (o Output) MarshalJSON() ([]byte, error) {
	var body any = o.Body
	if o.Error != nil {
		body = errorBody{o.Error}
	}
	if o.Envelope {
		return marshal(batchLine{
			ID:       o.BatchRequestID(),
			CustomID: nullable(o.CustomID),
			Response: batchResponse{StatusCode: o.status(), RequestID: o.RequestID(), Body: body},
			Line:     o.Line,
			LineHash: o.LineHash,
			Warnings: o.Warnings,
		})
	}
	raw, err := marshal(body)
	if err != nil {
		return nil, err
	}
	fields := petalFields{CustomID: o.CustomID, Line: o.Line, LineHash: o.LineHash, Warnings: o.Warnings}
	if o.Error != nil {
		fields.StatusCode = o.status() // a bare error has no envelope to say it
	}
	extra, err := marshal(fields)
	if err != nil {
		return nil, err
	}
	return appendMembers(raw, extra)
}

type batchLine struct {
	ID       string        `json:"id"`
	CustomID *string       `json:"custom_id"` // null when the line's could not be read
	Response batchResponse `json:"response"`
	Error    *struct{}     `json:"error"` // request failures go in response, as OpenAI's do
	Line     int           `json:"line"`
	LineHash string        `json:"line_hash,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
}

type batchResponse struct {
	StatusCode int    `json:"status_code"`
	RequestID  string `json:"request_id"`
	Body       any    `json:"body"`
}

type petalFields struct {
	StatusCode int      `json:"status_code,omitempty"`
	CustomID   string   `json:"custom_id,omitempty"`
	Line       int      `json:"line"`
	LineHash   string   `json:"line_hash,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
}

// appendMembers joins the members of the JSON object extra onto the end of
// the JSON object obj.
func appendMembers(obj, extra []byte) ([]byte, error) {
	obj = bytes.TrimSpace(obj)
	extra = bytes.TrimSpace(extra)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("jobs: result body is not a JSON object: %.40s", obj)
	}
	inner := extra[1 : len(extra)-1]
	if len(inner) == 0 {
		return obj, nil
	}
	out := append([]byte{}, obj[:len(obj)-1]...)
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, inner...)
	return append(out, '}'), nil
}
