package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchWriteModel: --write-model writes the synthetic shape as a folder
// that bench --model then loads, its report naming the shape and seed,
// marking the weights synthetic and saying the load is engine.Open's.
func TestBenchWriteModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	code, out, errs := runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--seed", "5", "--write-model", dir)
	if code != 0 || out != "" {
		t.Fatalf("write: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	for _, want := range []string{"writing synthetic tiny (seed 5) to " + dir, "wrote model.safetensors", "petal bench --model " + dir} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q:\n%s", want, errs)
		}
	}
	code, out, errs = runMain(t, Streams{}, "bench", "--model", dir, "--backend", "cpu", "--lengths", "16", "--decode-tokens", "2",
		"--floors=false", "--json", "--quiet")
	if code != 0 {
		t.Fatalf("bench --model: exit %d: %s", code, errs)
	}
	var r struct {
		Model struct {
			Name      string `json:"name"`
			Synthetic bool   `json:"synthetic"`
		} `json:"model"`
		LoadSeconds float64 `json:"load_seconds"`
		LoadIs      string  `json:"load_description"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Model.Synthetic || !strings.Contains(r.Model.Name, "tiny, seed 5") {
		t.Errorf("model %+v: want synthetic, named with its shape and seed", r.Model)
	}
	if r.LoadSeconds <= 0 || !strings.HasPrefix(r.LoadIs, "engine.Open: mapping the checkpoint's files") || !strings.Contains(r.LoadIs, "start-up is not counted") {
		t.Errorf("load %g s, %q", r.LoadSeconds, r.LoadIs)
	}

	// a second write is refused without --force, and the folder still loads
	code, _, errs = runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--write-model", dir)
	if code == 0 || !strings.Contains(errs, "not empty") || !strings.Contains(errs, "--force") {
		t.Errorf("second write: exit %d: %s", code, errs)
	}
	if code, _, errs = runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--seed", "6", "--write-model", dir, "--force", "--quiet"); code != 0 || errs != "" {
		t.Errorf("--force: exit %d: %q", code, errs)
	}
	conf, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !strings.Contains(string(conf), `"seed": 6`) {
		t.Error("--force did not replace the folder")
	}
}

// TestBenchWriteModelErrors: usage errors name the flag and write nothing.
func TestBenchWriteModelErrors(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--synthetic", "llama-7b", "--write-model", dir}, ExitUsage, `no synthetic shape named "llama-7b"`},
		{[]string{"--write-model", dir}, ExitUsage, "--write-model needs --synthetic NAME"},
		{[]string{"--synthetic", "tiny", "--write-model", dir, "--lengths", "256"}, ExitUsage, "--lengths has no effect"},
		{[]string{"--synthetic", "tiny", "--write-model", dir, "--backend", "cpu"}, ExitUsage, "--backend has no effect"},
		{[]string{"--synthetic", "tiny", "--write-model", ""}, ExitUsage, "name the folder"},
		{[]string{"--synthetic", "tiny", "--write-model", filepath.Join(file, "m")}, 1, file},
	}
	for _, c := range cases {
		code, _, errs := runMain(t, Streams{}, append([]string{"bench"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, want %d with %q: %s", c.args, code, c.code, c.want, errs)
		}
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 1 {
		t.Errorf("left in the folder: %v", entries)
	}
}
