package bench

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"petal/engine/cpu"
	"petal/engine/model"
	"petal/engine/sample"
)

func tinyModel(t *testing.T, chunk int) *model.Model {
	t.Helper()
	d, err := model.NamedDims("tiny")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Synthetic(d, cpu.New(), chunk, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRunTiny: a sweep gives one entry per length, in order, each with the
// parts asked for, positive rates that agree with the times, and survives a
// JSON round trip.
func TestRunTiny(t *testing.T) {
	m := tinyModel(t, 32)
	var lines []string
	r, err := Run(context.Background(), m, Options{
		Model: "tiny", Synthetic: true,
		PromptLengths: []int{64, 16}, ContextLengths: []int{16, 100},
		DecodeTokens: 4, Repeats: 3, MaxContext: 128,
	}, func(s string) { lines = append(lines, s) })
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{r.Results[0].Length, r.Results[1].Length, r.Results[2].Length}; len(r.Results) != 3 || !reflect.DeepEqual(got, []int{16, 64, 100}) {
		t.Fatalf("entries for lengths %v, want 16 64 100", got)
	}
	want := map[int][2]bool{16: {true, true}, 64: {true, false}, 100: {false, true}} // prefill, decode
	for _, e := range r.Results {
		if (e.Prefill != nil) != want[e.Length][0] || (e.Decode != nil) != want[e.Length][1] {
			t.Errorf("length %d: prefill %v decode %v, want %v", e.Length, e.Prefill != nil, e.Decode != nil, want[e.Length])
		}
		if p := e.Prefill; p != nil {
			if p.Tokens != e.Length || len(p.Runs) != 3 || p.Seconds <= 0 || !near(p.TokensPerSecond, float64(p.Tokens)/p.Seconds) {
				t.Errorf("length %d prefill %+v", e.Length, p)
			}
			// the compile part is within each run's time (the first run's
			// compiles; later ones reuse the programs of the state kept)
			for i, c := range p.CompileRuns {
				if !(c > 0 && c < p.Runs[i]) {
					t.Errorf("length %d prefill run %d: compile %g s of %g s", e.Length, i, c, p.Runs[i])
				}
			}
			if len(p.CompileRuns) != len(p.Runs) || p.CompileSeconds != median(p.CompileRuns) {
				t.Errorf("length %d prefill: compile runs %v, median %g", e.Length, p.CompileRuns, p.CompileSeconds)
			}
		}
		if d := e.Decode; d != nil {
			if d.Context != e.Length || d.Tokens != 4 || d.Method != MethodImport || len(d.Runs) != 3 ||
				d.Seconds <= 0 || !near(d.TokensPerSecond, 4/d.Seconds) {
				t.Errorf("length %d decode %+v", e.Length, d)
			}
			if d.Seconds != median(d.Runs) {
				t.Errorf("decode seconds %g are not the median of %v", d.Seconds, d.Runs)
			}
		}
	}
	if len(lines) != 4 {
		t.Errorf("%d progress lines for 4 measurements: %q", len(lines), lines)
	}
	mc := r.Machine
	if mc.OS != runtime.GOOS || mc.Arch != runtime.GOARCH || mc.CPUs < 1 || mc.Backend != "cpu" || mc.Date.IsZero() {
		t.Errorf("machine %+v", mc)
	}
	if s := r.Model.Shape; s.Layers != 8 || s.FullAttention != 2 || s.Experts != 32 || s.Vocab != 4096 {
		t.Errorf("shape %+v", s)
	}
	if r.Settings.Chunk != 32 || r.Settings.DecodeMethod != MethodImport || r.Settings.Repeats != 3 {
		t.Errorf("settings %+v", r.Settings)
	}

	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("JSON round trip changed the report:\n%+v\n%+v", back, *r)
	}
}

// TestReportJSONShape pins the field names a reader of the JSON relies on.
func TestReportJSONShape(t *testing.T) {
	m := tinyModel(t, 16)
	r, err := Run(context.Background(), m, Options{Model: "tiny", PromptLengths: []int{8}, ContextLengths: []int{8}, DecodeTokens: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(r)
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	paths := [][]string{
		{"machine", "os"}, {"machine", "arch"}, {"machine", "cpus"}, {"machine", "backend"}, {"machine", "date"},
		{"model", "name"}, {"model", "shape", "layers"}, {"model", "shape", "experts"},
		{"settings", "decode_tokens"}, {"settings", "decode_method"}, {"settings", "chunk"},
	}
	for _, p := range paths {
		if lookup(doc, p...) == nil {
			t.Errorf("JSON has no %s", strings.Join(p, "."))
		}
	}
	results, _ := doc["results"].([]any)
	if len(results) != 1 {
		t.Fatalf("results: %v", doc["results"])
	}
	e := results[0].(map[string]any)
	for _, p := range [][]string{{"length"}, {"prefill", "tokens_per_second"}, {"prefill", "seconds"},
		{"decode", "tokens_per_second"}, {"decode", "context"}, {"decode", "method"}} {
		if lookup(e, p...) == nil {
			t.Errorf("result has no %s", strings.Join(p, "."))
		}
	}
	if rate, _ := lookup(e, "decode", "tokens_per_second").(float64); rate <= 0 {
		t.Errorf("decode rate %v", rate)
	}
}

// TestStartState: both methods give decode a state holding exactly n tokens
// (so decode runs at context n) with room for the decode steps.
func TestStartState(t *testing.T) {
	m := tinyModel(t, 16)
	for _, method := range []string{MethodImport, MethodPrefill} {
		o := Options{DecodeTokens: 5, Repeats: 1, PrefillContext: method == MethodPrefill}
		sw := &sweep{m: m, o: o, rng: newRand(1)}
		s, err := sw.startState(40, method)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pos() != 40 {
			t.Errorf("%s: state at position %d, want 40", method, s.Pos())
		}
		if _, err := decodeSteps(context.Background(), m, s, 5, sample.Params{}); err != nil {
			t.Errorf("%s: decode after the state: %v", method, err)
		}
		if s.Pos() != 46 {
			t.Errorf("%s: 6 decode steps left the state at %d, want 46", method, s.Pos())
		}
	}
}

// TestPrefillContext: with real prefills the prefilled state is reused for
// decode at the same length and the report says which method ran.
func TestPrefillContext(t *testing.T) {
	m := tinyModel(t, 16)
	r, err := Run(context.Background(), m, Options{PromptLengths: []int{24}, ContextLengths: []int{24, 40},
		DecodeTokens: 2, Repeats: 2, PrefillContext: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Settings.DecodeMethod != MethodPrefill || len(r.Results) != 2 {
		t.Fatalf("settings %+v, %d results", r.Settings, len(r.Results))
	}
	for _, e := range r.Results {
		if e.Decode == nil || e.Decode.Method != MethodPrefill || e.Decode.TokensPerSecond <= 0 || len(e.Decode.Runs) != 2 {
			t.Errorf("length %d decode %+v", e.Length, e.Decode)
		}
	}
}

func TestRunRefusesBadOptions(t *testing.T) {
	m := tinyModel(t, 16)
	cases := map[string]Options{
		"no lengths":       {},
		"beyond context":   {PromptLengths: []int{16, 300}, MaxContext: 256},
		"zero length":      {ContextLengths: []int{0}},
		"negative repeats": {PromptLengths: []int{8}, Repeats: -1},
	}
	for name, o := range cases {
		if _, err := Run(context.Background(), m, o, nil); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "beyond context" && !strings.Contains(err.Error(), "300") {
			t.Errorf("%s: error does not name the length: %v", name, err)
		}
	}
}

// TestRunStops: a cancelled sweep returns what it measured and the cause.
func TestRunStops(t *testing.T) {
	m := tinyModel(t, 16)
	ctx, cancel := context.WithCancel(context.Background())
	progress := func(string) { cancel() } // stop after the first measurement
	r, err := Run(ctx, m, Options{PromptLengths: []int{8, 16, 32}, DecodeTokens: 2}, progress)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if r == nil || len(r.Results) != 1 || r.Results[0].Length != 8 {
		t.Errorf("partial report %+v", r)
	}
}

func near(a, b float64) bool { return a > 0 && b > 0 && (a-b)/b < 1e-9 && (b-a)/b < 1e-9 }

func lookup(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
