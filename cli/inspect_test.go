package cli

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"petal/engine/checkpoint"
)

// TestInspectJSONKeys: inspect --json speaks snake_case throughout, with
// config.json's own names for the configuration, and shows every field.
func TestInspectJSONKeys(t *testing.T) {
	code, out, errs := runMain(t, Streams{}, "inspect", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z0-9_]+$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snake.MatchString(k) && !strings.HasSuffix(path, "bytes_by_dtype") {
					t.Errorf("key %q at %s is not snake_case", k, path)
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("", doc)
	config, _ := doc["config"].(map[string]any)
	if config["hidden_size"] != 256.0 || config["model_type"] != "qwen3_5_moe_text" || config["rms_norm_eps"] != 1e-6 {
		t.Errorf("config: %v", config)
	}
	if n := reflect.TypeFor[checkpoint.Config]().NumField(); len(config) != n {
		t.Errorf("config has %d keys, checkpoint.Config %d fields: one is missing from inspect --json", len(config), n)
	}
	if _, ok := doc["ignored_tensors"].([]any); !ok {
		t.Errorf("ignored_tensors is %v, want a list", doc["ignored_tensors"])
	}
}
