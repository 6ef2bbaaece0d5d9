package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"petal/engine/chat"
	"petal/engine/tokenizer"
)

// TestChatTemplateGoldenIDs renders every chat-template golden with the
// model's own template and tokenises it: the ids must equal the reference
// ids (apply_chat_template with tokenize=True), for both tokenizers.
func TestChatTemplateGoldenIDs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(sharedDir, "goldens", "chat_templates.json"))
	if err != nil {
		t.Skipf("oracle data not found: %v", err)
	}
	var goldens map[string][]struct {
		Name     string          `json:"name"`
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
		Kwargs   map[string]any  `json:"kwargs"`
		Rendered string          `json:"rendered"`
		IDs      []int           `json:"ids"`
	}
	if err := json.Unmarshal(data, &goldens); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{
		"qwen3": filepath.Join(sharedDir, "qwen3-tokenizer"),
		"tiny":  filepath.Join(sharedDir, "tiny-qwen36-moe-4bit"),
	}
	for name, cases := range goldens {
		dir, ok := dirs[name]
		if !ok {
			t.Fatalf("goldens for an unknown tokenizer %q", name)
		}
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.LoadTemplate(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			req := map[string]any{"messages": c.Messages}
			if len(c.Tools) > 0 && string(c.Tools) != "null" {
				req["tools"] = c.Tools
			}
			for k, v := range c.Kwargs {
				req[k] = v
			}
			body, _ := json.Marshal(req)
			text, err := tmpl.Render(body)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, c.Name, err)
			}
			if text != c.Rendered {
				t.Errorf("%s/%s: rendered text differs from the golden", name, c.Name)
				continue
			}
			if got := tok.Encode(text); fmt.Sprint(got) != fmt.Sprint(c.IDs) {
				t.Errorf("%s/%s: ids %v, golden %v", name, c.Name, got, c.IDs)
			}
		}
	}
}
