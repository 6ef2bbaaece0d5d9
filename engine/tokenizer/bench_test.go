package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const benchTextSize = 4 << 20

// benchText is a few MiB of mixed text: the golden strings (many scripts, emoji, special tokens)
// and the oracle's Python generator scripts, repeated. testdata/bench_hf.py reads the same text
// from the file TestWriteBenchText writes.
func benchText(t testing.TB) string {
	var parts []string
	for _, c := range readGoldens(t, "qwen3.json") {
		parts = append(parts, c.Input)
	}
	files, err := filepath.Glob(oraclePath(t, "make/*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no generator scripts in %s/make (%v)", oracleDir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(data))
	}
	unit := strings.Join(parts, "\n")
	return strings.Repeat(unit, (benchTextSize+len(unit)-1)/len(unit))
}

// TestWriteBenchText writes the benchmark text to $PETAL_TOKENIZER_BENCH_TEXT, and the Qwen3 ids
// of it beside it (".qwen3-ids.json"), for testdata/bench_hf.py to time and check HF against.
func TestWriteBenchText(t *testing.T) {
	path := os.Getenv("PETAL_TOKENIZER_BENCH_TEXT")
	if path == "" {
		t.Skip("set PETAL_TOKENIZER_BENCH_TEXT to a file name to write the benchmark text")
	}
	text := benchText(t)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ids, err := json.Marshal(qwen3(t).Encode(text))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".qwen3-ids.json", ids, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d bytes to %s", len(text), path)
}

// BenchmarkEncode measures one-core throughput with the piece cache warm after the first pass.
func BenchmarkEncode(b *testing.B) {
	tk, text := qwen3(b), benchText(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.Encode(text)
	}
}

// BenchmarkEncodeLines encodes the same text one line at a time, as bench_hf.py does with
// encode_batch.
func BenchmarkEncodeLines(b *testing.B) {
	tk, text := qwen3(b), benchText(b)
	lines := strings.SplitAfter(text, "\n")
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		for _, line := range lines {
			tk.Encode(line)
		}
	}
}

// BenchmarkEncodeColdCache empties the piece cache before every pass.
func BenchmarkEncodeColdCache(b *testing.B) {
	tk, text := qwen3(b), benchText(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.model.cache.mu.Lock()
		tk.model.cache.entries = nil
		tk.model.cache.mu.Unlock()
		tk.Encode(text)
	}
}

func BenchmarkDecode(b *testing.B) {
	tk, text := qwen3(b), benchText(b)
	ids := tk.Encode(text)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.Decode(ids, false)
	}
}

// BenchmarkLoadQwen3 loads the real 11 MB Qwen3 tokenizer.json and its config.
func BenchmarkLoadQwen3(b *testing.B) {
	dir := oraclePath(b, "qwen3-tokenizer")
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
