package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"petal/fixtures"
)

// resolveModel turns --model (or PETAL_MODEL) into a folder: a path, a
// Hugging Face repo id found in the local Hugging Face cache, or, when
// neither is given, the embedded default model.
func resolveModel(arg string, getenv func(string) string) (dir, name string, err error) {
	if arg == "" {
		arg = getenv("PETAL_MODEL")
	}
	if arg == "" {
		cache, err := petalCacheDir(getenv)
		if err != nil {
			return "", "", err
		}
		dir, err := fixtures.DefaultModel(filepath.Join(cache, "models"))
		return dir, fixtures.DefaultModelName, err
	}
	if st, err := os.Stat(arg); err == nil {
		if !st.IsDir() {
			return "", "", fmt.Errorf("--model %s is a file; give the model's folder", arg)
		}
		return arg, filepath.Base(filepath.Clean(arg)), nil
	}
	if looksLikeRepoID(arg) {
		dir, err := hubSnapshot(arg, getenv)
		return dir, arg, err
	}
	return "", "", fmt.Errorf("--model %s: no such folder", arg)
}

func looksLikeRepoID(s string) bool {
	parts := strings.Split(s, "/")
	return len(parts) == 2 && parts[0] != "" && parts[1] != "" && parts[0] != "." && parts[0] != ".." &&
		!strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~")
}

// hubCacheDir follows huggingface_hub: HF_HUB_CACHE, else HF_HOME/hub, else
// ~/.cache/huggingface/hub.
func hubCacheDir(getenv func(string) string) string {
	if d := getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if x := getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "huggingface", "hub")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// hubSnapshot finds the snapshot folder of repo in the Hugging Face cache:
// models--org--name/snapshots/<revision of refs/main>.
func hubSnapshot(repo string, getenv func(string) string) (string, error) {
	cache := hubCacheDir(getenv)
	root := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	missing := fmt.Errorf("model %s is not in the Hugging Face cache (%s); download it with:\n  hf download %s\n(or huggingface-cli download %s), or pass --model with the model's folder", repo, cache, repo, repo)
	if _, err := os.Stat(root); err != nil {
		return "", missing
	}
	if ref, err := os.ReadFile(filepath.Join(root, "refs", "main")); err == nil {
		dir := filepath.Join(root, "snapshots", strings.TrimSpace(string(ref)))
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
			return dir, nil
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(root, "snapshots", "*", "config.json"))
	if len(snaps) == 1 {
		return filepath.Dir(snaps[0]), nil
	}
	if len(snaps) > 1 {
		return "", fmt.Errorf("model %s has %d snapshots in %s and no refs/main; pass --model with one of them", repo, len(snaps), root)
	}
	return "", missing
}

// petalCacheDir is where petal keeps the unpacked default model and, by
// default, session snapshots: PETAL_CACHE or the user cache dir.
func petalCacheDir(getenv func(string) string) (string, error) {
	if d := getenv("PETAL_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set PETAL_CACHE): %w", err)
	}
	return filepath.Join(d, "petal"), nil
}
