package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// oracleDir is the shared reference data, relative to this package.
var oracleDir = filepath.Join("..", "..", "..", "shared", "oracle")

func oracle(t *testing.T, rel string) string {
	t.Helper()
	path := filepath.Join(oracleDir, rel)
	if _, err := os.Stat(oracleDir); os.IsNotExist(err) {
		t.Skipf("reference data %s is absent", oracleDir)
	}
	return path
}

func readOracle(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(oracle(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// requestFrom joins raw JSON members into one request object, keeping their bytes (and so
// their key order) as they are.
func requestFrom(members ...[2]string) []byte {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"` + m[0] + `":` + m[1])
	}
	sb.WriteByte('}')
	return []byte(sb.String())
}

// goldenRequest turns a case of goldens/chat_templates.json into a request.
func goldenRequest(c gjson.Result) []byte {
	members := [][2]string{{"messages", c.Get("messages").Raw}, {"tools", c.Get("tools").Raw}}
	c.Get("kwargs").ForEach(func(k, v gjson.Result) bool {
		members = append(members, [2]string{k.Str, v.Raw})
		return true
	})
	return requestFrom(members...)
}

func TestRenderTransformersGoldens(t *testing.T) {
	goldens := readOracle(t, "goldens/chat_templates.json")
	// The tiny model folder has the template in both places; chat_template.jinja wins.
	// The Qwen3 tokenizer folder has it only in tokenizer_config.json.
	dirs := map[string]string{"qwen3": "qwen3-tokenizer", "tiny": "tiny-qwen36-moe-4bit"}
	for key, dir := range dirs {
		tmpl, err := LoadTemplate(oracle(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		cases := gjson.GetBytes(goldens, key).Array()
		if len(cases) == 0 {
			t.Fatalf("no %s cases in goldens", key)
		}
		for _, c := range cases {
			t.Run(key+"/"+c.Get("name").Str, func(t *testing.T) {
				got, err := tmpl.Render(goldenRequest(c))
				if err != nil {
					t.Fatal(err)
				}
				if want := c.Get("rendered").Str; got != want {
					t.Errorf("rendered differs\n got: %q\nwant: %q", got, want)
				}
			})
		}
	}
}

func TestRenderQwen36Goldens(t *testing.T) {
	tmpl, err := LoadTemplateFile(oracle(t, "qwen36-template/chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	cases := gjson.ParseBytes(readOracle(t, "qwen36-template/cases.json")).Array()
	goldens := gjson.ParseBytes(readOracle(t, "qwen36-template/golden.json"))
	if len(cases) == 0 {
		t.Fatal("no cases in qwen36-template/cases.json")
	}
	for _, c := range cases {
		name := c.Get("name").Str
		t.Run(name, func(t *testing.T) {
			golden := goldens.Get(gjson.Escape(name))
			if !golden.Exists() {
				t.Fatalf("no golden for %s", name)
			}
			got, err := tmpl.Render([]byte(c.Get("vars").Raw))
			if want := golden.Get("err"); want.Exists() {
				if err == nil {
					t.Fatalf("rendered %q, want an error containing %q", got, want.Str)
				}
				if !strings.Contains(err.Error(), want.Str) {
					t.Errorf("error %q does not contain %q", err, want.Str)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := golden.Get("ok").Str; got != want {
				t.Errorf("rendered differs\n got: %q\nwant: %q", got, want)
			}
		})
	}
}

// TestRenderJinja2Goldens checks renders made by testdata/make_goldens.py with Python jinja2
// set up as transformers sets it up: thinking switches, tool histories, tool-call arguments
// as JSON strings, list content, null content and tojson options.
func TestRenderJinja2Goldens(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "jinja2_goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]string{
		"qwen36": "qwen36-template/chat_template.jinja",
		"qwen3":  "tiny-qwen36-moe-4bit/chat_template.jinja",
	}
	cases := gjson.GetBytes(data, "cases").Array()
	if len(cases) == 0 {
		t.Fatal("no cases in testdata/jinja2_goldens.json")
	}
	for _, c := range cases {
		t.Run(c.Get("name").Str, func(t *testing.T) {
			var tmpl *Template
			var err error
			if src := c.Get("source"); src.Exists() {
				tmpl, err = ParseTemplate("inline", src.Str)
			} else {
				tmpl, err = LoadTemplateFile(oracle(t, templates[c.Get("template").Str]))
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render([]byte(c.Get("request").Raw))
			if want := c.Get("error"); want.Exists() {
				if err == nil || !strings.Contains(err.Error(), want.Str) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, want.Str)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := c.Get("rendered").Str; got != want {
				t.Errorf("rendered differs\n got: %q\nwant: %q", got, want)
			}
		})
	}
}

func BenchmarkCompileQwen36(b *testing.B) {
	src, err := os.ReadFile(filepath.Join(oracleDir, "qwen36-template", "chat_template.jinja"))
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := ParseTemplate("qwen36", string(src)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderQwen36Tools(b *testing.B) {
	tmpl, err := LoadTemplateFile(filepath.Join(oracleDir, "qwen36-template", "chat_template.jinja"))
	if err != nil {
		b.Skip(err)
	}
	cases, err := os.ReadFile(filepath.Join(oracleDir, "qwen36-template", "cases.json"))
	if err != nil {
		b.Skip(err)
	}
	req := []byte(gjson.GetBytes(cases, "#(name==tools).vars").Raw)
	for b.Loop() {
		if _, err := tmpl.Render(req); err != nil {
			b.Fatal(err)
		}
	}
}
