package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveModelFromHubCache(t *testing.T) {
	hub := t.TempDir()
	env := map[string]string{"HF_HUB_CACHE": hub}
	getenv := func(k string) string { return env[k] }

	_, _, err := resolveModel("mlx-community/Qwen3.6-35B-A3B-4bit", getenv)
	if err == nil || !strings.Contains(err.Error(), "hf download mlx-community/Qwen3.6-35B-A3B-4bit") || !strings.Contains(err.Error(), hub) {
		t.Fatalf("missing repo: %v; want the download command and the cache folder", err)
	}

	root := filepath.Join(hub, "models--mlx-community--Qwen3.6-35B-A3B-4bit")
	snap := filepath.Join(root, "snapshots", "abc123")
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(snap, "config.json"), []byte("{}"), 0o644)
	os.MkdirAll(filepath.Join(root, "refs"), 0o755)
	os.WriteFile(filepath.Join(root, "refs", "main"), []byte("abc123\n"), 0o644)
	dir, name, err := resolveModel("mlx-community/Qwen3.6-35B-A3B-4bit", getenv)
	if err != nil || dir != snap || name != "mlx-community/Qwen3.6-35B-A3B-4bit" {
		t.Fatalf("resolved %q %q %v, want %q", dir, name, err, snap)
	}

	// HF_HOME/hub when HF_HUB_CACHE is unset; PETAL_MODEL when --model is
	env = map[string]string{"HF_HOME": filepath.Dir(hub), "PETAL_MODEL": "mlx-community/Qwen3.6-35B-A3B-4bit"}
	os.Rename(hub, filepath.Join(filepath.Dir(hub), "hub"))
	if dir, _, err := resolveModel("", getenv); err != nil || !strings.HasSuffix(dir, filepath.Join("snapshots", "abc123")) {
		t.Fatalf("via HF_HOME and PETAL_MODEL: %q %v", dir, err)
	}
}

func TestResolveModelErrors(t *testing.T) {
	getenv := func(string) string { return "" }
	if _, _, err := resolveModel("./no/such/folder", getenv); err == nil || !strings.Contains(err.Error(), "no such folder") {
		t.Errorf("missing folder: %v", err)
	}
	f := filepath.Join(t.TempDir(), "model.safetensors")
	os.WriteFile(f, nil, 0o644)
	if _, _, err := resolveModel(f, getenv); err == nil || !strings.Contains(err.Error(), "give the model's folder") {
		t.Errorf("a file: %v", err)
	}
}

func TestDefaultModelUnpacksOnce(t *testing.T) {
	cache := t.TempDir()
	getenv := func(k string) string {
		if k == "PETAL_CACHE" {
			return cache
		}
		return ""
	}
	a, _, err := resolveModel("", getenv)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := resolveModel("", getenv)
	if err != nil || a != b {
		t.Fatalf("second resolve %q %v, first %q", b, err, a)
	}
	if _, err := os.Stat(filepath.Join(a, "config.json")); err != nil {
		t.Fatal(err)
	}
}

func TestHoistFlags(t *testing.T) {
	app := newApp(t.Context(), &Streams{})
	got := hoistFlags(app, []string{"petal", "batch", "jobs.jsonl", "-o", "out.jsonl", "--resume", "--shard=0/2", "--", "-odd"})
	want := "petal batch -o out.jsonl --resume --shard=0/2 jobs.jsonl -- -odd"
	if strings.Join(got, " ") != want {
		t.Fatalf("%q, want %q", strings.Join(got, " "), want)
	}
	got = hoistFlags(app, []string{"petal", "run", "hello", "--temperature", "-1"})
	if strings.Join(got, " ") != "petal run --temperature -1 hello" {
		t.Fatalf("%q", strings.Join(got, " "))
	}
}
