package cli

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"petal/engine/checkpoint"
	"petal/engine/cuda/driver"
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

// TestInspectDeviceMemory: inspect gives the device memory needed by part,
// halved KV cache with --kv bf16, and with a GPU present its free and
// total memory and whether the model fits.
func TestInspectDeviceMemory(t *testing.T) {
	defer func(f func(int) (driver.Device, int64, int64, error)) { gpuMemInfo = f }(gpuMemInfo)
	var free int64
	gpuMemInfo = func(n int) (driver.Device, int64, int64, error) {
		return driver.Device{Ordinal: n, Name: "Fake H200"}, free, 2 << 30, nil
	}
	device := func(args ...string) map[string]any {
		t.Helper()
		code, out, errs := runMain(t, Streams{}, append([]string{"inspect", "--json", "--context", "4096"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		var doc struct {
			Device map[string]any `json:"device_memory"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Device
	}
	free = 2 << 30 // the workspace of a 4096-token chunk, cuda's default, is 0.46 GiB of it
	f32 := device("--device", "1")
	bf16 := device("--kv", "bf16")
	if f32["kv_cache_bytes"].(float64) != 2*bf16["kv_cache_bytes"].(float64) || bf16["kv_type"] != "bf16" || f32["kv_cache_bytes"].(float64) == 0 {
		t.Errorf("f32 %v, bf16 %v: want the KV cache halved", f32, bf16)
	}
	var sum float64
	for _, k := range []string{"weights_bytes", "kv_cache_bytes", "kv_copy_bytes", "recurrent_state_bytes", "workspace_bytes", "margin_bytes"} {
		sum += f32[k].(float64)
	}
	if f32["kv_copy_bytes"].(float64) != f32["kv_cache_bytes"].(float64)/2 || f32["kv_shadow"] != true || bf16["kv_copy_bytes"].(float64) != 0 || bf16["kv_shadow"] != false {
		t.Errorf("kv_copy_bytes f32 %v (shadow %v), bf16 %v (shadow %v): want the f32 cache's bf16 shadow, half its size (kvshadow=on, cuda's default), and none for bf16",
			f32["kv_copy_bytes"], f32["kv_shadow"], bf16["kv_copy_bytes"], bf16["kv_shadow"])
	}
	if sum != f32["total_bytes"].(float64) {
		t.Errorf("parts sum to %v, total %v", sum, f32["total_bytes"])
	}
	gpu, _ := f32["gpu"].(map[string]any)
	if gpu["fits"] != true || gpu["ordinal"] != 1.0 || gpu["free_bytes"] != float64(2<<30) || gpu["max_context"].(float64) <= 4096 {
		t.Errorf("2 GiB free: gpu %v, want the tiny model to fit on GPU 1", gpu)
	}
	free = 100 << 20
	if gpu, _ := device()["gpu"].(map[string]any); gpu["fits"] != false {
		t.Errorf("100 MiB free: gpu %v, want it not to fit (the margin alone is 512 MiB)", gpu)
	}
	_, out, _ := runMain(t, Streams{}, "inspect")
	if !strings.Contains(out, "device memory at 32768 tokens (cuda, kv=f32") || !strings.Contains(out, "Fake H200: 0.10 GiB free of 2.00 GiB: does NOT fit") {
		t.Errorf("text output:\n%s", out)
	}
	if code, _, errs := runMain(t, Streams{}, "inspect", "--kv", "f16"); code != 2 || !strings.Contains(errs, "--kv") {
		t.Errorf("--kv f16: exit %d, stderr %q", code, errs)
	}
}
