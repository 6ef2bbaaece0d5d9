package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ardanlabs/jinja"
	"github.com/tidwall/gjson"
)

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	name     string // where the source came from, for errors
	source   string
	compiled *jinja.Template
	specials map[string]jinja.Value // bos_token, eos_token, ... from tokenizer_config.json
	flatten  bool                   // the template never iterates over content: join text parts
}

// ParseTemplate compiles a chat template. The name is used in error messages.
func ParseTemplate(name, src string) (*Template, error) {
	compiled, err := jinja.Compile(renameToJSON(src))
	if err != nil {
		return nil, compileError(name, src, err)
	}
	return &Template{name: name, source: src, compiled: compiled, flatten: !iteratesContent(src)}, nil
}

// LoadTemplateFile compiles the template in a file (a --chat-template override).
func LoadTemplateFile(path string) (*Template, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chat: read template: %w", err)
	}
	return ParseTemplate(path, string(src))
}

// LoadTemplate compiles the chat template of a model folder: chat_template.jinja when it
// exists (it wins, as in transformers 5), else tokenizer_config.json's chat_template. The
// special tokens of tokenizer_config.json become template variables.
func LoadTemplate(dir string) (*Template, error) {
	tokens, err := ReadSpecialTokens(dir)
	if err != nil {
		return nil, err
	}
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	if _, err := os.Stat(jinjaPath); err == nil {
		t, err := LoadTemplateFile(jinjaPath)
		if err != nil {
			return nil, err
		}
		return t.WithSpecialTokens(tokens), nil
	}
	configPath := filepath.Join(dir, "tokenizer_config.json")
	config, err := os.ReadFile(configPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("chat: no chat template in %s: neither chat_template.jinja nor tokenizer_config.json", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("chat: read tokenizer config: %w", err)
	}
	src, err := templateFromConfig(configPath, config)
	if err != nil {
		return nil, err
	}
	t, err := ParseTemplate(configPath+" chat_template", src)
	if err != nil {
		return nil, err
	}
	return t.WithSpecialTokens(tokens), nil
}

// templateFromConfig picks chat_template from tokenizer_config.json: a string, or a list of
// {name, template} where the one named "default" is used.
func templateFromConfig(path string, config []byte) (string, error) {
	if !gjson.ValidBytes(config) {
		return "", fmt.Errorf("chat: %s is not valid JSON", path)
	}
	field := gjson.GetBytes(config, "chat_template")
	switch {
	case field.Type == gjson.String:
		return field.Str, nil
	case field.IsArray():
		for _, named := range field.Array() {
			if named.Get("name").Str == "default" && named.Get("template").Type == gjson.String {
				return named.Get("template").Str, nil
			}
		}
		return "", fmt.Errorf("chat: %s: chat_template lists no template named \"default\"", path)
	case !field.Exists() || field.Type == gjson.Null:
		return "", fmt.Errorf("chat: %s has no chat_template and there is no chat_template.jinja", path)
	}
	return "", fmt.Errorf("chat: %s: chat_template is neither a string nor a list of named templates", path)
}

// ReadSpecialTokens returns the special tokens of a model folder's tokenizer_config.json
// (bos_token, eos_token, pad_token, ...), written either as a string or as an added-token
// object with "content". Null entries are left out, as transformers leaves them out of the
// template variables. A folder without tokenizer_config.json has none.
func ReadSpecialTokens(dir string) (map[string]string, error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	config, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chat: read tokenizer config: %w", err)
	}
	if !gjson.ValidBytes(config) {
		return nil, fmt.Errorf("chat: %s is not valid JSON", path)
	}
	tokens := map[string]string{}
	for _, key := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		v := gjson.GetBytes(config, key)
		switch {
		case v.Type == gjson.String:
			tokens[key] = v.Str
		case v.IsObject() && v.Get("content").Type == gjson.String:
			tokens[key] = v.Get("content").Str
		}
	}
	return tokens, nil
}

// WithSpecialTokens returns a copy of t that defines the given variables (bos_token, ...)
// unless a request sets them itself.
func (t *Template) WithSpecialTokens(tokens map[string]string) *Template {
	c := *t
	c.specials = make(map[string]jinja.Value, len(tokens))
	for k, v := range tokens {
		c.specials[k] = jinja.NewString(v)
	}
	return &c
}

// Name says where the template came from.
func (t *Template) Name() string { return t.name }

// Render renders a request: a JSON object with "messages" and optionally "tools",
// "add_generation_prompt", "enable_thinking", "preserve_thinking" and any other template
// variable (chat_template_kwargs go here). Values keep their JSON key order. As vLLM does,
// assistant tool-call arguments given as JSON strings are turned into objects first, and
// content given as a list of text parts is joined into a string when the template never
// iterates over content (the Qwen3 template; the Qwen3.5/3.6 one takes the list).
func (t *Template) Render(req []byte) (string, error) {
	if !gjson.ValidBytes(req) {
		return "", fmt.Errorf("chat: render %s: request is not valid JSON", t.name)
	}
	root := gjson.ParseBytes(req)
	if !root.IsObject() {
		return "", fmt.Errorf("chat: render %s: request is not a JSON object", t.name)
	}
	vars := make(map[string]jinja.Value, len(t.specials)+8)
	for k, v := range t.specials {
		vars[k] = v
	}
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "messages" {
			vars[k.Str], err = messagesFromJSON(v.Raw, t.flatten)
		} else {
			vars[k.Str], err = valueFromJSON(v.Raw)
		}
		if err != nil {
			err = fmt.Errorf("%q: %w", k.Str, err)
		}
		return err == nil
	})
	if err != nil {
		return "", fmt.Errorf("chat: render %s: %w", t.name, err)
	}
	return t.render(vars)
}

// RenderMessages renders a JSON array of messages with optional JSON tools (nil or empty
// for none) and template variables such as add_generation_prompt or enable_thinking.
func (t *Template) RenderMessages(messages, tools []byte, kwargs map[string]any) (string, error) {
	req := map[string]json.RawMessage{"messages": messages}
	if len(tools) > 0 {
		req["tools"] = tools
	}
	for k, v := range kwargs {
		raw, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("chat: render %s: template variable %s: %w", t.name, k, err)
		}
		req[k] = raw
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("chat: render %s: %w", t.name, err)
	}
	return t.Render(body)
}

func (t *Template) render(vars map[string]jinja.Value) (string, error) {
	vars["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	vars[toJSONFilter] = jinja.NewCallable(toJSONFilter, toJSON)
	out, err := t.compiled.RenderValues(vars)
	if err != nil {
		return "", renderError(t.name, t.source, err)
	}
	return out, nil
}
