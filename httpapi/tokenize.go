package httpapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/tidwall/gjson"

	"petal/jobs"
)

// tokenizeFields are /tokenize's own members (vLLM's names).
var tokenizeFields = []string{"add_generation_prompt", "add_special_tokens", "return_token_strs", "continue_final_message"}

// tokenize is vLLM's POST /tokenize: {"prompt": "..."} or {"messages":
// [...], "add_generation_prompt": true, "tools", "chat_template_kwargs"},
// with "return_token_strs" for the vocabulary strings; it answers
// {"count", "max_model_len", "tokens", "token_strs"}. The tokenizer adds no
// special tokens of its own, so "add_special_tokens" changes nothing.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	kind := jobs.Completion
	if gjson.GetBytes(body, "messages").Exists() {
		kind = jobs.Chat
	}
	job, own, lerr := jobs.ParseRequest(body, kind, tokenizeFields...)
	if lerr != nil {
		writeError(w, http.StatusBadRequest, jobs.APIError{Message: lerr.Message, Type: jobs.InvalidRequest, Param: lerr.Param, Code: lerr.Code})
		return
	}
	flags := map[string]bool{"add_generation_prompt": true}
	for _, name := range tokenizeFields {
		raw, ok := own[name]
		if !ok || string(raw) == "null" {
			continue
		}
		var v bool
		if json.Unmarshal(raw, &v) != nil {
			writeError(w, http.StatusBadRequest, jobs.APIError{Message: fmt.Sprintf("field %q must be a boolean, got %s", name, raw), Type: jobs.InvalidRequest, Param: name, Code: "invalid_type"})
			return
		}
		flags[name] = v
	}
	if flags["continue_final_message"] {
		writeError(w, http.StatusBadRequest, jobs.APIError{Message: "field \"continue_final_message\" is not supported: render the conversation without the final message and add it as a prompt", Type: jobs.InvalidRequest, Param: "continue_final_message", Code: "unsupported_value"})
		return
	}
	var ids []int32
	switch {
	case kind == jobs.Chat:
		text, err := s.cfg.Model.RenderChat(job, flags["add_generation_prompt"])
		if err != nil {
			writeError(w, http.StatusBadRequest, jobs.APIError{Message: err.Error(), Type: jobs.InvalidRequest, Param: "messages"})
			return
		}
		ids = s.cfg.Model.Encode(text)
	case job.PromptIDs != nil:
		writeError(w, http.StatusBadRequest, jobs.APIError{Message: "field \"prompt\" must be a string to tokenize, got token ids", Type: jobs.InvalidRequest, Param: "prompt", Code: "invalid_type"})
		return
	default:
		ids = s.cfg.Model.Encode(job.Prompt)
	}
	if ids == nil {
		ids = []int32{}
	}
	var strs []string
	if flags["return_token_strs"] {
		strs = make([]string, len(ids))
		for i, id := range ids {
			strs[i] = s.cfg.Model.Token(id)
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Count       int      `json:"count"`
		MaxModelLen int      `json:"max_model_len"`
		Tokens      []int32  `json:"tokens"`
		TokenStrs   []string `json:"token_strs"`
	}{len(ids), s.cfg.Model.MaxContext(), ids, strs})
}

// detokenize is vLLM's POST /detokenize: {"tokens": [ids]} to {"prompt":
// text}, special tokens kept.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	bad := func(param, code, format string, args ...any) {
		writeError(w, http.StatusBadRequest, jobs.APIError{Message: fmt.Sprintf(format, args...), Type: jobs.InvalidRequest, Param: param, Code: code})
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		bad("", "invalid_json", "request body must be a JSON object {\"tokens\": [ids]}")
		return
	}
	tokens := gjson.GetBytes(body, "tokens")
	if !tokens.IsArray() {
		bad("tokens", "missing_required_parameter", "field \"tokens\" is required: an array of token ids")
		return
	}
	vocab := s.cfg.Model.VocabSize()
	ids := []int32{}
	for i, t := range tokens.Array() {
		if t.Type != gjson.Number || t.Num != math.Trunc(t.Num) || t.Num < 0 || t.Num >= float64(vocab) {
			bad("tokens", "invalid_value", "tokens[%d] = %s is not a token id below %d", i, t.Raw, vocab)
			return
		}
		ids = append(ids, int32(t.Num))
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": s.cfg.Model.Decode(ids)})
}
