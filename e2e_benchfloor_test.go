package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchFloorsAndAblation: bench on the embedded model prints the
// ceilings it measured and a share of floor per row, and --ablate runs
// the sweep again per switch and reports each switch's effect, in the
// table and in --json.
func TestBenchFloorsAndAblation(t *testing.T) {
	args := []string{"bench", "--backend", "cpu", "--lengths", "16,48", "--decode-tokens", "2", "--ablate", "delta=chunked,kv=bf16"}
	r := petal(t, "", args...)
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"ceilings measured in this run: read", "prefill % floor", "decode % floor", "load: ",
		"ablation, prefill", "ablation, decode", "delta=chunked", "kv=bf16"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	for _, want := range []string{"ablation 1 of 2: --backend cpu:delta=chunked", "ablation 2 of 2: --backend cpu:kv=bf16"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("no %q in stderr:\n%s", want, r.stderr)
		}
	}

	r = petal(t, "", append(args, "--json", "--quiet")...)
	var rep struct {
		Ceilings struct {
			Read   float64 `json:"read_bytes_per_second"`
			Matrix float64 `json:"matrix_flops_per_second"`
		} `json:"ceilings"`
		Load    float64 `json:"load_seconds"`
		Results []struct {
			Prefill struct {
				Share float64 `json:"share_of_floor"`
			} `json:"prefill"`
			Decode struct {
				Share float64 `json:"share_of_floor"`
				Bytes int64   `json:"floor_bytes_per_token"`
			} `json:"decode"`
		} `json:"results"`
		Ablation []struct {
			Switch  string `json:"switch"`
			Backend string `json:"backend"`
			Results []struct {
				Length  int      `json:"length"`
				Prefill *float64 `json:"prefill_effect_percent"`
				Decode  *float64 `json:"decode_effect_percent"`
			} `json:"results"`
		} `json:"ablation"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if rep.Ceilings.Read <= 0 || rep.Ceilings.Matrix <= 0 || rep.Load <= 0 || len(rep.Results) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, e := range rep.Results {
		if e.Prefill.Share <= 0 || e.Decode.Share <= 0 || e.Decode.Bytes <= 0 {
			t.Errorf("result without floors: %+v", e)
		}
	}
	if len(rep.Ablation) != 2 || rep.Ablation[0].Backend != "cpu:delta=chunked" || rep.Ablation[1].Switch != "kv=bf16" {
		t.Fatalf("ablation %+v", rep.Ablation)
	}
	for _, a := range rep.Ablation {
		if len(a.Results) != 2 || a.Results[1].Length != 48 || a.Results[1].Prefill == nil || a.Results[1].Decode == nil {
			t.Errorf("%s: %+v", a.Switch, a.Results)
		}
	}
}

// TestBenchAblateRefusesBadSwitches: a switch the backend does not know is
// refused before any sweep runs, naming it.
func TestBenchAblateRefusesBadSwitches(t *testing.T) {
	for switches, want := range map[string]string{
		"graphs=off": "--ablate graphs=off: cpu: unknown option",
		"kv":         "not KEY=VALUE",
	} {
		r := petal(t, "", "bench", "--backend", "cpu", "--lengths", "16", "--decode-tokens", "2", "--ablate", switches)
		if r.code != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "prefill ") {
			t.Errorf("--ablate %s: exit %d, stderr %s", switches, r.code, r.stderr)
		}
	}
}

// TestBenchAblateLengths: --ablate-lengths runs the switches' sweeps at
// their own lengths; without --ablate it is refused.
func TestBenchAblateLengths(t *testing.T) {
	r := petal(t, "", "bench", "--backend", "cpu", "--lengths", "16,48", "--decode-tokens", "2", "--ablate", "kv=bf16", "--ablate-lengths", "48", "--json", "--quiet")
	var rep struct {
		Ablation []struct {
			Results []struct {
				Length int `json:"length"`
			} `json:"results"`
		} `json:"ablation"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Ablation) != 1 ||
		len(rep.Ablation[0].Results) != 1 || rep.Ablation[0].Results[0].Length != 48 {
		t.Errorf("exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	r = petal(t, "", "bench", "--lengths", "16", "--ablate-lengths", "48")
	if r.code != 2 || !strings.Contains(r.stderr, "--ablate-lengths without --ablate") {
		t.Errorf("exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestBenchAblateOneKeyTwice: one key with two values is two switches, each
// its own sweep (gemm=tc,gemm=plain compares both against the defaults);
// the same switch twice is refused.
func TestBenchAblateOneKeyTwice(t *testing.T) {
	r := petal(t, "", "bench", "--backend", "cpu", "--lengths", "16", "--decode-tokens", "2", "--ablate", "kv=bf16,kv=f32", "--json", "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	var rep struct {
		Ablation []struct {
			Switch  string `json:"switch"`
			Backend string `json:"backend"`
		} `json:"ablation"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(rep.Ablation) != 2 || rep.Ablation[0].Backend != "cpu:kv=bf16" || rep.Ablation[1].Backend != "cpu:kv=f32" {
		t.Errorf("ablation %+v", rep.Ablation)
	}
	r = petal(t, "", "bench", "--backend", "cpu", "--lengths", "16", "--decode-tokens", "2", "--ablate", "kv=bf16,kv=bf16")
	if r.code != 2 || !strings.Contains(r.stderr, "kv=bf16 given twice") {
		t.Errorf("the same switch twice: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestBenchAblateRepeats: --ablate-repeats sweeps the base backend again
// at the ablation's lengths, that many runs a measurement, and compares
// each switch's sweep (as many runs) with it: the report says so, in the
// table and in --json; without --ablate, or below 1, it is refused.
func TestBenchAblateRepeats(t *testing.T) {
	args := []string{"bench", "--backend", "cpu", "--lengths", "16,48", "--decode-tokens", "2", "--ablate", "kv=bf16", "--ablate-lengths", "48", "--ablate-repeats", "2"}
	r := petal(t, "", args...)
	if r.code != 0 || !strings.Contains(r.stdout, "against the defaults swept again, the median of 2 runs each") ||
		!strings.Contains(r.stderr, "ablation base: --backend cpu, 2 runs a measurement") {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	r = petal(t, "", append(args, "--json", "--quiet")...)
	var rep struct {
		Settings struct {
			Repeats int `json:"repeats"`
		} `json:"settings"`
		AblationRepeats int `json:"ablation_repeats"`
		AblationBase    []struct {
			Length  int     `json:"length"`
			Prefill float64 `json:"prefill_tokens_per_second"`
		} `json:"ablation_base"`
		Ablation []struct {
			Results []struct {
				Length  int      `json:"length"`
				Prefill *float64 `json:"prefill_effect_percent"`
			} `json:"results"`
		} `json:"ablation"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if rep.Settings.Repeats != 1 || rep.AblationRepeats != 2 || len(rep.AblationBase) != 1 || rep.AblationBase[0].Length != 48 ||
		rep.AblationBase[0].Prefill <= 0 || len(rep.Ablation) != 1 || len(rep.Ablation[0].Results) != 1 || rep.Ablation[0].Results[0].Prefill == nil {
		t.Errorf("report %+v", rep)
	}
	for _, bad := range [][]string{{"--ablate-repeats", "2"}, {"--ablate", "kv=bf16", "--ablate-repeats", "-1"}} {
		r := petal(t, "", append([]string{"bench", "--backend", "cpu", "--lengths", "16", "--decode-tokens", "2"}, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--ablate-repeats") {
			t.Errorf("%v: exit %d, stderr %s", bad, r.code, r.stderr)
		}
	}
}
