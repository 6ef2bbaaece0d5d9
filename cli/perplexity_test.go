package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"petal/engine"
	"petal/engine/model"
	"petal/engine/sample"
)

const longText = "import os\nimport sys\n\n\ndef main(argv):\n    for name in argv[1:]:\n        with open(name) as f:\n            print(f.read())\n    return 0\n\n\nif __name__ == \"__main__\":\n    sys.exit(main(sys.argv))\n"

// TestPerplexityLongerThanTheContext: a text longer than --max-context is
// scored in sliding windows instead of refused.
func TestPerplexityLongerThanTheContext(t *testing.T) {
	in := filepath.Join(t.TempDir(), "texts.jsonl")
	line, _ := json.Marshal(map[string]string{"text": longText})
	os.WriteFile(in, append(line, '\n'), 0o644)
	code, out, errs := runMain(t, Streams{}, "perplexity", "--json", "--max-context", "16", "--stride", "8", in)
	if code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var res struct {
		N, Scored, Windows int
		NLL                float64
		TargetLogprobs     []*float64 `json:"target_logprobs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.N <= 16 || res.Scored != res.N-1 || res.Windows < 2 || len(res.TargetLogprobs) != res.N-1 {
		t.Errorf("scored %+v", res)
	}
	for i, lp := range res.TargetLogprobs {
		if lp == nil {
			t.Errorf("token %d not scored with a stride below the window", i+1)
		}
	}
	for _, bad := range []string{"17", "0", "-1"} {
		if code, _, errs := runMain(t, Streams{}, "perplexity", "--max-context", "16", "--stride", bad, in); code != ExitUsage || !strings.Contains(errs, "--stride") {
			t.Errorf("--stride %s with a window of 16: exit %d, stderr %q", bad, code, errs)
		}
	}
	_, help, _ := runMain(t, Streams{}, "perplexity", "--help")
	if !strings.Contains(help, "--stride") || !strings.Contains(help, "window") {
		t.Errorf("perplexity --help does not explain the window:\n%s", help)
	}
}

// TestSlidingWindowScores: with the stride equal to the window the score is
// that of independent chunks; with a window covering the text it is the
// plain score; a smaller stride scores every token once, each with up to a
// window of context.
func TestSlidingWindowScores(t *testing.T) {
	cache := t.TempDir()
	st := &Streams{Getenv: func(k string) string {
		if k == "PETAL_CACHE" {
			return cache
		}
		return ""
	}}
	const window = 16
	open := func(ctx int) *engine.Engine {
		e, _, err := openEngine(st, modelOptions{Chunk: 512, MaxContext: ctx})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	small, whole := open(window), open(1024)
	ids := small.Encode(longText)
	if len(ids) < 3*window {
		t.Fatalf("text of %d tokens: want at least %d", len(ids), 3*window)
	}
	// logprobs of tokens 1..len-1 of ids scored alone, from a fresh state
	alone := func(e *engine.Engine, ids []int32) []float64 {
		var out []float64
		lp := make([]float64, e.Model.Dims.Vocab)
		s := e.NewState()
		defer s.Free(e.Model.Backend())
		if err := e.Model.Forward(s, ids, model.AllLogits, func(pos int, logits []float32) {
			if pos+1 < len(ids) {
				sample.LogSoftmax(logits, lp)
				out = append(out, lp[ids[pos+1]])
			}
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	mean := func(xs []float64) float64 {
		sum := 0.0
		for _, x := range xs {
			sum -= x
		}
		return sum / float64(len(xs))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

	// stride = window: the concatenation of independent chunks
	var chunks []float64
	for b := 0; b < len(ids); b += window {
		chunks = append(chunks, alone(small, ids[b:min(b+window, len(ids))])...)
	}
	res, err := scoreIDs(small, ids, window)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scored != len(chunks) || !near(res.NLL, mean(chunks)) {
		t.Errorf("stride = window: %d scored, nll %v; independent chunks: %d, %v", res.Scored, res.NLL, len(chunks), mean(chunks))
	}
	// a window covering the text: the plain score
	plain := alone(whole, ids)
	res, err = scoreIDs(whole, ids, 7)
	if err != nil {
		t.Fatal(err)
	}
	if res.Windows != 1 || res.Scored != len(ids)-1 || !near(res.NLL, mean(plain)) {
		t.Errorf("whole text in one window: %d windows, %d scored, nll %v; plain %v", res.Windows, res.Scored, res.NLL, mean(plain))
	}
	// stride 4: token p is scored once, with the window that starts at the
	// last multiple of 4 leaving it inside
	res, err = scoreIDs(small, ids, 4)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scored != len(ids)-1 {
		t.Fatalf("stride 4: %d scored of %d", res.Scored, len(ids)-1)
	}
	for p := 1; p < len(ids); p++ {
		begin := 0
		if p >= window {
			begin = (p - window + 4) / 4 * 4
		}
		want := alone(small, ids[begin:p+1])
		// float32 sums over a different length: equal to rounding, not bit for bit
		if got := res.TargetLogprobs[p-1]; got == nil || math.Abs(*got-want[len(want)-1]) > 1e-5 {
			t.Fatalf("token %d: logprob %v, want %v (context from %d)", p, *got, want[len(want)-1], begin)
		}
	}
}
