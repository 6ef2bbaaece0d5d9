package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"petal/engine/backend"
)

// Ablation is one switch of an ablation: the sweep run again with one
// backend option set (Switch, e.g. "graphs=off"), its speeds, and their
// effect against the report's own sweep, in percent (-12 is 12 % slower
// with the switch; positive is faster).
type Ablation struct {
	Switch  string          `json:"switch"`
	Backend string          `json:"backend"` // the backend spec the sweep ran with
	Error   string          `json:"error,omitempty"`
	Results []AblationEntry `json:"results,omitempty"`
}

// AblationEntry is one length of an Ablation; a phase not measured at the
// length (or not in the base sweep) has no effect.
type AblationEntry struct {
	Length                 int      `json:"length"`
	PrefillTokensPerSecond float64  `json:"prefill_tokens_per_second,omitempty"`
	PrefillEffectPercent   *float64 `json:"prefill_effect_percent,omitempty"`
	DecodeTokensPerSecond  float64  `json:"decode_tokens_per_second,omitempty"`
	DecodeEffectPercent    *float64 `json:"decode_effect_percent,omitempty"`
	DecodeKernelsPerToken  int      `json:"decode_kernels_per_token,omitempty"`
}

// ParseSwitches reads --ablate's list, "KEY=VALUE[,KEY=VALUE...]", each
// one switch run on its own: one key may come with several values (gemm=tc,
// gemm=plain: two runs), the same KEY=VALUE only once.
func ParseSwitches(s string) ([]backend.Option, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("bench: --ablate %q: no KEY=VALUE switches", s)
	}
	var out []backend.Option
	seen := map[backend.Option]bool{}
	for _, kv := range strings.Split(s, ",") {
		sp, err := backend.ParseSpec("x:" + kv)
		if err != nil || len(sp.Options) != 1 {
			return nil, fmt.Errorf("bench: --ablate %q: %q is not KEY=VALUE", s, strings.TrimSpace(kv))
		}
		o := sp.Options[0]
		if seen[o] {
			return nil, fmt.Errorf("bench: --ablate %q: %s=%s given twice", s, o.Key, o.Value)
		}
		seen[o] = true
		out = append(out, o)
	}
	return out, nil
}

// WithOption is the backend spec with one option set: added, or replacing
// the value the spec gave the same key.
func WithOption(spec string, o backend.Option) (string, error) {
	sp, err := backend.ParseSpec(spec)
	if err != nil {
		return "", err
	}
	replaced := false
	for i := range sp.Options {
		if sp.Options[i].Key == o.Key {
			sp.Options[i].Value, replaced = o.Value, true
		}
	}
	if !replaced {
		sp.Options = append(sp.Options, o)
	}
	kv := make([]string, len(sp.Options))
	for i, x := range sp.Options {
		kv[i] = x.Key + "=" + x.Value
	}
	return sp.Name + ":" + strings.Join(kv, ","), nil
}

// Compare is the ablation of one switch: variant's speeds against base's,
// length by length.
func Compare(base, variant *Report, sw, spec string) Ablation {
	a := Ablation{Switch: sw, Backend: spec}
	byLength := map[int]Entry{}
	for _, e := range base.Results {
		byLength[e.Length] = e
	}
	for _, v := range variant.Results {
		b := byLength[v.Length]
		ae := AblationEntry{Length: v.Length}
		if v.Prefill != nil {
			ae.PrefillTokensPerSecond = v.Prefill.TokensPerSecond
			if b.Prefill != nil {
				ae.PrefillEffectPercent = effect(v.Prefill.TokensPerSecond, b.Prefill.TokensPerSecond)
			}
		}
		if v.Decode != nil {
			ae.DecodeTokensPerSecond, ae.DecodeKernelsPerToken = v.Decode.TokensPerSecond, v.Decode.KernelsPerToken
			if b.Decode != nil {
				ae.DecodeEffectPercent = effect(v.Decode.TokensPerSecond, b.Decode.TokensPerSecond)
			}
		}
		a.Results = append(a.Results, ae)
	}
	return a
}

func effect(v, base float64) *float64 {
	if base <= 0 {
		return nil
	}
	e := 100 * (v/base - 1)
	return &e
}

// BaseEntries is r's results as an ablation's base: each length's prefill
// and decode tokens per second.
func BaseEntries(r *Report) []AblationEntry {
	var out []AblationEntry
	for _, e := range r.Results {
		ae := AblationEntry{Length: e.Length}
		if e.Prefill != nil {
			ae.PrefillTokensPerSecond = e.Prefill.TokensPerSecond
		}
		if e.Decode != nil {
			ae.DecodeTokensPerSecond, ae.DecodeKernelsPerToken = e.Decode.TokensPerSecond, e.Decode.KernelsPerToken
		}
		out = append(out, ae)
	}
	return out
}

// WriteAblation prints the ablation as two tables, prefill and decode:
// a row per switch, a column per length, each cell the switch's effect
// on tokens per second in percent.
func WriteAblation(w io.Writer, r *Report) error {
	if len(r.Ablation) == 0 {
		return nil
	}
	var lengths []int // every length an ablation measured
	for _, a := range r.Ablation {
		for _, e := range a.Results {
			lengths = append(lengths, e.Length)
		}
	}
	lengths = union(lengths, nil)
	phases := []string{"prefill", "decode"}
	for _, a := range r.Ablation {
		for _, e := range a.Results {
			if e.DecodeKernelsPerToken > 0 && len(phases) == 2 {
				phases = append(phases, "kernels")
			}
		}
	}
	for _, phase := range phases {
		if phase == "kernels" {
			fmt.Fprintf(w, "\nablation, decode: kernel launches per token with each switch\n")
		} else {
			against := "the defaults"
			if r.AblationRepeats > 0 {
				against = fmt.Sprintf("the defaults swept again, the median of %d runs each", r.AblationRepeats)
			}
			fmt.Fprintf(w, "\nablation, %s: effect of each switch on tok/s, %% against %s (negative: slower)\n", phase, against)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := []string{"switch"}
		for _, n := range lengths {
			head = append(head, FormatLength(n))
		}
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, a := range r.Ablation {
			cells := []string{a.Switch}
			if a.Error != "" {
				fmt.Fprintln(tw, a.Switch+"\tfailed: "+strings.ReplaceAll(a.Error, "\t", " ")+"\t")
				continue
			}
			at := map[int]AblationEntry{}
			for _, e := range a.Results {
				at[e.Length] = e
			}
			for _, n := range lengths {
				e, cell := at[n], "-"
				if phase == "kernels" {
					if e.DecodeKernelsPerToken > 0 {
						cell = fmt.Sprint(e.DecodeKernelsPerToken)
					}
					cells = append(cells, cell)
					continue
				}
				p := e.DecodeEffectPercent
				if phase == "prefill" {
					p = e.PrefillEffectPercent
				}
				if p != nil {
					cell = fmt.Sprintf("%+.1f", *p)
				}
				cells = append(cells, cell)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
