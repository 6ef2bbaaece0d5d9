package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Fields each kind of body honours; any other field is listed in
// Job.Ignored.
var (
	commonFields = fieldSet("model", "max_tokens", "max_completion_tokens", "temperature", "top_p",
		"top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "seed",
		"stop", "n", "stream", "session", "fork_from")
	chatFields       = fieldSet("messages", "tools", "chat_template_kwargs", "enable_thinking", "logprobs", "top_logprobs")
	completionFields = fieldSet("prompt", "logprobs", "echo")
	envelopeFields   = fieldSet("custom_id", "method", "url", "body")
)

func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// ParseLine decodes and validates one non-blank job line; n is its line
// number. Exactly one of the results is nil.
func ParseLine(line []byte, n int) (*Job, *LineError) {
	le := &LineError{Line: n}
	if msg := syntaxProblem(line); msg != "" {
		le.Message, le.Code = msg, codeInvalidJSON
		return nil, le
	}
	root := gjson.Parse(string(line))
	if !root.IsObject() {
		le.Message, le.Code = "line must be a JSON object, got "+jsonType(root), codeInvalidJSON
		return nil, le
	}
	top := objectFields(root)
	job := &Job{Line: n, Envelope: top.has("body") || top.has("url") || top.has("method")}
	le.Envelope = job.Envelope
	if id, ok := top.m["custom_id"]; ok && id.Type == gjson.String {
		le.CustomID = id.Str
	}

	var err *fieldError
	if job.Envelope {
		err = decodeEnvelope(top, job)
	} else {
		err = decodeBody(top, job, false)
	}
	if err != nil {
		le.Message, le.Param, le.Code = err.msg, err.param, err.code
		return nil, le
	}
	return job, nil
}

// syntaxProblem says why a line is not JSON, or "" when it is.
func syntaxProblem(line []byte) string {
	if !utf8.Valid(line) {
		return "line is not valid UTF-8"
	}
	if gjson.ValidBytes(line) {
		return ""
	}
	// The slow parser only runs on bad lines, for the position of the fault.
	var v json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(line, &v); errors.As(err, &se) {
		return fmt.Sprintf("line is not valid JSON: %v (at byte %d)", se, se.Offset)
	}
	return "line is not valid JSON"
}

func customID(f fields, required bool) (string, *fieldError) {
	id, ok, err := f.str("custom_id")
	if err != nil {
		return "", err
	}
	if !ok && required {
		return "", fieldErrorf("custom_id", codeMissing, "field %q is required", "custom_id")
	}
	if ok && id == "" {
		return "", fieldErrorf("custom_id", codeInvalidValue, "field %q must not be empty", "custom_id")
	}
	return id, nil
}

// decodeEnvelope reads an OpenAI Batch request line:
// {"custom_id", "method": "POST", "url", "body"}.
func decodeEnvelope(top fields, job *Job) *fieldError {
	var err *fieldError
	if job.CustomID, err = customID(top, true); err != nil {
		return err
	}
	method, ok, err := top.str("method")
	if err != nil {
		return err
	}
	if !ok {
		return fieldErrorf("method", codeMissing, "field %q is required (\"POST\")", "method")
	}
	if !strings.EqualFold(method, "POST") {
		return fieldErrorf("method", codeUnsupported, "field %q must be \"POST\", got %q", "method", method)
	}
	url, ok, err := top.str("url")
	if err != nil {
		return err
	}
	switch {
	case !ok:
		return fieldErrorf("url", codeMissing, "field %q is required (%q or %q)", "url", chatURL, completionURL)
	case url == chatURL:
		job.Kind = Chat
	case url == completionURL:
		job.Kind = Completion
	default:
		return fieldErrorf("url", codeUnsupported, "field %q must be %q or %q, got %q", "url", chatURL, completionURL, url)
	}
	body, ok := top.get("body")
	if !ok {
		return fieldErrorf("body", codeMissing, "field %q is required", "body")
	}
	if !body.IsObject() {
		return typeError("body", "an object", body)
	}
	for _, name := range top.order {
		if !envelopeFields[name] {
			job.Ignored = append(job.Ignored, name)
		}
	}
	return decodeBody(objectFields(body), job, true)
}

// decodeBody reads a chat or completions request body. kindKnown says the
// envelope's url already chose job.Kind; a bare body is chat when it has
// messages and completions when it has a prompt.
func decodeBody(f fields, job *Job, kindKnown bool) *fieldError {
	msgs, hasMsgs := f.get("messages")
	prompt, hasPrompt := f.get("prompt")
	switch {
	case hasMsgs && hasPrompt:
		return fieldErrorf("prompt", codeInvalidValue,
			"fields \"messages\" and \"prompt\" exclude each other: give \"messages\" for chat or \"prompt\" for completions")
	case kindKnown && job.Kind == Chat && !hasMsgs:
		return fieldErrorf("messages", codeMissing, "field %q is required for %s", "messages", chatURL)
	case kindKnown && job.Kind == Completion && !hasPrompt:
		return fieldErrorf("prompt", codeMissing, "field %q is required for %s", "prompt", completionURL)
	case !hasMsgs && !hasPrompt:
		return fieldErrorf("messages", codeMissing,
			"one of fields \"messages\" (chat) or \"prompt\" (completions) is required")
	case hasPrompt:
		job.Kind = Completion
	default:
		job.Kind = Chat
	}

	var err *fieldError
	if !job.Envelope {
		if job.CustomID, err = customID(f, false); err != nil {
			return err
		}
	}
	if job.Model, _, err = f.str("model"); err != nil {
		return err
	}
	if job.Kind == Chat {
		err = decodeChat(f, msgs, job)
	} else {
		err = decodePrompts(prompt, job)
	}
	if err != nil {
		return err
	}
	if job.Params, err = decodeParams(f, job.Kind); err != nil {
		return err
	}
	if err := decodeSession(f, job); err != nil {
		return err
	}
	job.Ignored = append(job.Ignored, ignoredFields(f, job)...)
	return nil
}

func decodeChat(f fields, msgs gjson.Result, job *Job) *fieldError {
	if err := checkMessages(msgs); err != nil {
		return err
	}
	var warning string
	if job.Messages, warning = developerAsSystem(msgs); warning != "" {
		job.Warnings = append(job.Warnings, warning)
	}
	if tools, ok := f.get("tools"); ok {
		if err := checkTools(tools); err != nil {
			return err
		}
		job.Tools = json.RawMessage(tools.Raw)
	}
	var err *fieldError
	job.TemplateKwargs, err = templateKwargs(f)
	return err
}

// decodeSession reads petal's session extensions.
func decodeSession(f fields, job *Job) *fieldError {
	for _, s := range []struct {
		name string
		dst  *string
	}{{"session", &job.Session}, {"fork_from", &job.ForkFrom}} {
		v, ok, err := f.str(s.name)
		if err != nil {
			return err
		}
		if ok && v == "" {
			return fieldErrorf(s.name, codeInvalidValue, "field %q must not be empty", s.name)
		}
		*s.dst = v
	}
	return nil
}

func ignoredFields(f fields, job *Job) []string {
	kindFields := chatFields
	if job.Kind == Completion {
		kindFields = completionFields
	}
	var out []string
	for _, name := range f.order {
		if commonFields[name] || kindFields[name] || (name == "custom_id" && !job.Envelope) {
			continue
		}
		out = append(out, name)
	}
	return out
}
