package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRender(t *testing.T, tmpl *Template, req string) string {
	t.Helper()
	out, err := tmpl.Render([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadTemplateFileOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "override.jinja")
	writeFile(t, path, "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
	tmpl, err := LoadTemplateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := mustRender(t, tmpl, `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true}`)
	if want := "[user] hi\n[assistant]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := LoadTemplateFile(filepath.Join(t.TempDir(), "missing.jinja")); err == nil {
		t.Error("missing override file: no error")
	}
}

func TestLoadTemplateSources(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadTemplate(dir); err == nil || !strings.Contains(err.Error(), "no chat template") {
		t.Errorf("empty folder: got %v", err)
	}

	config := filepath.Join(dir, "tokenizer_config.json")
	writeFile(t, config, `{"chat_template": "config {{ eos_token }}", "eos_token": "<|im_end|>", "bos_token": null,
		"pad_token": {"content": "<|endoftext|>", "special": true}}`)
	tmpl, err := LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRender(t, tmpl, `{"messages":[]}`); got != "config <|im_end|>" {
		t.Errorf("string chat_template: got %q", got)
	}

	writeFile(t, config, `{"chat_template": [{"name": "tool_use", "template": "tools"},
		{"name": "default", "template": "default {{ pad_token }}|{{ bos_token is defined }}"}],
		"bos_token": null, "pad_token": {"content": "<|endoftext|>"}}`)
	tmpl, err = LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRender(t, tmpl, `{"messages":[]}`); got != "default <|endoftext|>|False" {
		t.Errorf("named chat_template list: got %q", got)
	}
	// A request variable wins over a special token.
	if got := mustRender(t, tmpl, `{"messages":[],"pad_token":"P"}`); got != "default P|False" {
		t.Errorf("request overriding pad_token: got %q", got)
	}

	writeFile(t, filepath.Join(dir, "chat_template.jinja"), "file {{ pad_token }}")
	tmpl, err = LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRender(t, tmpl, `{"messages":[]}`); got != "file <|endoftext|>" {
		t.Errorf("chat_template.jinja must win over tokenizer_config.json: got %q", got)
	}

	os.Remove(filepath.Join(dir, "chat_template.jinja"))
	writeFile(t, config, `{"chat_template": [{"name": "tool_use", "template": "tools"}]}`)
	if _, err := LoadTemplate(dir); err == nil || !strings.Contains(err.Error(), `"default"`) {
		t.Errorf("list without default: got %v", err)
	}
}

func TestReadSpecialTokensOracle(t *testing.T) {
	tokens, err := ReadSpecialTokens(oracle(t, "tiny-qwen36-moe-4bit"))
	if err != nil {
		t.Fatal(err)
	}
	if tokens["eos_token"] != "<|im_end|>" || tokens["pad_token"] != "<|endoftext|>" {
		t.Errorf("tokens %v: want eos <|im_end|>, pad <|endoftext|>", tokens)
	}
	if _, ok := tokens["bos_token"]; ok {
		t.Errorf("bos_token is null in the config and must be left out, got %q", tokens["bos_token"])
	}
}

func TestBrokenTemplateNamesLine(t *testing.T) {
	cases := []struct {
		src  string
		line int
	}{
		{"ok\n{{ messages[0] + }}\n", 2},
		{"a\nb\n{%- if messages %}\nunclosed", 3},
		{"a\n{{ x", 2},
		{"{% for m in messages %}\n{% if m %}x{% endif %}\n{% endfor %}\n{% endif %}", 4},
	}
	for _, c := range cases {
		_, err := ParseTemplate("broken.jinja", c.src)
		var te *TemplateError
		if !errors.As(err, &te) {
			t.Errorf("%q: got %v, want a TemplateError", c.src, err)
			continue
		}
		if te.Line != c.line || !strings.Contains(err.Error(), "broken.jinja line ") {
			t.Errorf("%q: error %q names line %d, want %d", c.src, err, te.Line, c.line)
		}
	}
}

func TestRaisedErrorNamesLine(t *testing.T) {
	src := "{%- macro check(m) %}\n{%- if m.role not in ['user', 'assistant'] %}\n{{- raise_exception(\"Unexpected role: \" + m.role) }}\n{%- endif %}\n{%- endmacro %}\n{%- for m in messages %}{{ check(m) }}{{ m.content }}{% endfor %}"
	tmpl, err := ParseTemplate("roles.jinja", src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]byte(`{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"b"}]}`))
	var te *TemplateError
	if !errors.As(err, &te) || !te.Raised || te.Message != "Unexpected role: robot" || te.Line != 3 {
		t.Fatalf("got %#v (%v), want the raised message at line 3", te, err)
	}
	if !strings.Contains(err.Error(), "roles.jinja line 3 raised: Unexpected role: robot") {
		t.Errorf("error text %q", err)
	}
}

func TestRenderErrorNamesFilterLine(t *testing.T) {
	tmpl, err := ParseTemplate("f.jinja", "a\n{{ messages | nosuchfilter }}\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]byte(`{"messages":[]}`))
	var te *TemplateError
	if !errors.As(err, &te) || te.Line != 2 {
		t.Errorf("got %v, want an error at line 2", err)
	}
}

func TestRenderRejectsBadRequests(t *testing.T) {
	tmpl, err := ParseTemplate("t", "{{ messages }}")
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{`{"messages": [`, `[1, 2]`, `"text"`} {
		if _, err := tmpl.Render([]byte(req)); err == nil {
			t.Errorf("%s: no error", req)
		}
	}
	// A template that only takes text cannot place an image part.
	qwen3, err := LoadTemplateFile(oracle(t, "tiny-qwen36-moe-4bit/chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = qwen3.Render([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "message 0") {
		t.Errorf("image part with a text-only template: got %v", err)
	}
}

// RenderMessages must give what Render gives for the same request.
func TestRenderMessagesMatchesGolden(t *testing.T) {
	goldens := readOracle(t, "goldens/chat_templates.json")
	tmpl, err := LoadTemplate(oracle(t, "tiny-qwen36-moe-4bit"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range gjson.GetBytes(goldens, "tiny").Array() {
		kwargs := map[string]any{}
		for k, v := range c.Get("kwargs").Map() {
			kwargs[k] = v.Value()
		}
		var tools []byte
		if c.Get("tools").IsArray() {
			tools = []byte(c.Get("tools").Raw)
		}
		got, err := tmpl.RenderMessages([]byte(c.Get("messages").Raw), tools, kwargs)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.Get("rendered").Str; got != want {
			t.Errorf("%s: got %q, want %q", c.Get("name").Str, got, want)
		}
	}
}

func TestRenameToJSON(t *testing.T) {
	src := "a | tojson {{ x|tojson }} {% set y = x | tojson(indent=2) %}{{ '|tojson' ~ \"| tojson\" }}{# x|tojson #}{{ x|tojsonish }}"
	want := "a | tojson {{ x|petal_tojson }} {% set y = x | petal_tojson(indent=2) %}{{ '|tojson' ~ \"| tojson\" }}{# x|tojson #}{{ x|tojsonish }}"
	if got := renameToJSON(src); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestRenderConcurrent(t *testing.T) {
	goldens := readOracle(t, "goldens/chat_templates.json")
	tmpl, err := LoadTemplate(oracle(t, "qwen3-tokenizer"))
	if err != nil {
		t.Fatal(err)
	}
	cases := gjson.GetBytes(goldens, "qwen3").Array()
	errs := make(chan error, len(cases)*4)
	for range 4 {
		for _, c := range cases {
			go func() {
				got, err := tmpl.Render(goldenRequest(c))
				if err == nil && got != c.Get("rendered").Str {
					err = errors.New(c.Get("name").Str + ": rendered differs")
				}
				errs <- err
			}()
		}
	}
	for range len(cases) * 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
