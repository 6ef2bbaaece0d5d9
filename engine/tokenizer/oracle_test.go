package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The reference data lives outside the repository, in shared/oracle next to it.
const oracleDir = "../../../shared/oracle"

func oraclePath(t testing.TB, rel string) string {
	t.Helper()
	if _, err := os.Stat(oracleDir); err != nil {
		t.Skipf("reference data %s is absent (%v); it sits beside the repository", oracleDir, err)
	}
	return filepath.Join(oracleDir, rel)
}

var loaded sync.Map // directory -> *Tokenizer, so the 11 MB Qwen3 file is parsed once per run

func loadOracleTokenizer(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	dir := oraclePath(t, rel)
	if tk, ok := loaded.Load(dir); ok {
		return tk.(*Tokenizer)
	}
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	loaded.Store(dir, tk)
	return tk
}

func qwen3(t testing.TB) *Tokenizer { return loadOracleTokenizer(t, "qwen3-tokenizer") }
func tiny(t testing.TB) *Tokenizer  { return loadOracleTokenizer(t, "tiny-qwen36-moe-4bit") }

type goldenFile struct {
	Tokenizer string       `json:"tokenizer"`
	Cases     []goldenCase `json:"cases"`
}

type goldenCase struct {
	Input              string   `json:"input"`
	IDs                []int    `json:"ids"`
	Tokens             []string `json:"tokens"`
	Decoded            string   `json:"decoded"`
	DecodedSkipSpecial string   `json:"decoded_skip_special"`
}

func readGoldens(t testing.TB, name string) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(oraclePath(t, filepath.Join("goldens", name)))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(g.Cases) == 0 {
		t.Fatalf("%s has no cases", name)
	}
	return g.Cases
}
