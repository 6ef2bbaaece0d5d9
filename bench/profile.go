package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"petal/engine/backend"
	"petal/engine/model"
)

// Layer kinds of a profile.
const (
	KindFullAttention = "full_attention"
	KindDeltaNet      = "delta_net"
	KindOutside       = "outside_layers" // embed, final norm, logits, advance
)

// Profile is where the time of one length's prefill and decode went, op
// family by op family, from one extra run of each timed op by op
// (backend.Profiler); the sums are a little above the plain runs' times.
type Profile struct {
	Prefill *ProfilePart `json:"prefill,omitempty"`
	Decode  *ProfilePart `json:"decode,omitempty"`
}

// ProfilePart is one profiled run: Tokens tokens, its op time by family
// within each layer kind, and by layer kind.
type ProfilePart struct {
	Tokens     int        `json:"tokens"`
	MsPerToken float64    `json:"ms_per_token"` // all ops
	Ops        []OpTime   `json:"ops"`          // by layer kind, then the most time first
	Kinds      []KindTime `json:"layer_kinds"`
}

// OpTime is one op family ("attn.sdpa", "moe.experts", "head.logits") in
// one layer kind, summed over the layers of that kind.
type OpTime struct {
	Family     string  `json:"family"`
	LayerKind  string  `json:"layer_kind"`
	MsPerToken float64 `json:"ms_per_token"`
	Share      float64 `json:"share"` // of the part's op time
}

// KindTime is the op time of the layers of one kind.
type KindTime struct {
	LayerKind  string  `json:"layer_kind"`
	Layers     int     `json:"layers"`
	MsPerToken float64 `json:"ms_per_token"`
	Share      float64 `json:"share"`
}

var kindOrder = []string{KindFullAttention, KindDeltaNet, KindOutside}

// summarize groups a model profile of tokens tokens by layer kind and op
// family.
func summarize(p *model.Profile, d *model.Dims, tokens int) *ProfilePart {
	total := p.Total()
	perToken := func(t time.Duration) float64 { return t.Seconds() * 1e3 / float64(tokens) }
	share := func(t time.Duration) float64 {
		if total <= 0 {
			return 0
		}
		return float64(t) / float64(total)
	}
	kindOf := func(layer int) string {
		switch {
		case layer < 0 || layer >= len(d.Full):
			return KindOutside
		case d.Full[layer]:
			return KindFullAttention
		}
		return KindDeltaNet
	}
	type key struct{ kind, family string }
	byFamily := map[key]time.Duration{}
	byKind := map[string]time.Duration{}
	for label, t := range p.ByLabel {
		layer, family := model.SplitLabel(label)
		k := kindOf(layer)
		byFamily[key{k, family}] += t
		byKind[k] += t
	}
	part := &ProfilePart{Tokens: tokens, MsPerToken: perToken(total)}
	for k, t := range byFamily {
		part.Ops = append(part.Ops, OpTime{Family: k.family, LayerKind: k.kind, MsPerToken: perToken(t), Share: share(t)})
	}
	slices.SortFunc(part.Ops, func(a, b OpTime) int {
		if c := slices.Index(kindOrder, a.LayerKind) - slices.Index(kindOrder, b.LayerKind); c != 0 {
			return c
		}
		if a.MsPerToken != b.MsPerToken {
			if a.MsPerToken > b.MsPerToken {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Family, b.Family)
	})
	layers := map[string]int{}
	for i := range d.Full {
		layers[kindOf(i)]++
	}
	for _, k := range kindOrder {
		if t, ok := byKind[k]; ok {
			part.Kinds = append(part.Kinds, KindTime{LayerKind: k, Layers: layers[k], MsPerToken: perToken(t), Share: share(t)})
		}
	}
	return part
}

// profiled runs f with the model's op times collected.
func (sw *sweep) profiled(f func() error) (*model.Profile, error) {
	if _, ok := sw.m.Backend().(backend.Profiler); !ok {
		return nil, fmt.Errorf("bench: the %s backend cannot time ops one by one (--profile)", sw.m.Backend().Name())
	}
	p := &model.Profile{}
	sw.m.Profile = p
	defer func() { sw.m.Profile = nil }()
	return p, f()
}

// profilePrefill profiles one prefill of n fresh tokens.
func (sw *sweep) profilePrefill(n int) (*ProfilePart, error) {
	s := sw.m.NewState(sw.room(n))
	defer s.Free(sw.m.Backend())
	tokens := sw.tokens(n)
	p, err := sw.profiled(func() error { return sw.m.Forward(s, tokens, model.LastLogits, func(int, []float32) {}) })
	if err != nil {
		return nil, err
	}
	return summarize(p, &sw.m.Dims, n), nil
}

// profileDecode profiles DecodeTokens decode steps after n tokens (after
// one step not profiled, as the timed runs do).
func (sw *sweep) profileDecode(ctx context.Context, n int, method string) (*ProfilePart, error) {
	s, err := sw.startState(n, method)
	if err != nil {
		return nil, err
	}
	defer s.Free(sw.m.Backend())
	if _, err := decodeSteps(ctx, sw.m, s, 0, sw.o.Sampling); err != nil {
		return nil, err
	}
	p, err := sw.profiled(func() error {
		_, err := decodeSteps(ctx, sw.m, s, sw.o.DecodeTokens-1, sw.o.Sampling)
		return err
	})
	if err != nil {
		return nil, err
	}
	return summarize(p, &sw.m.Dims, sw.o.DecodeTokens), nil
}

// WriteProfiles prints each length's profile as a table: per layer kind,
// the op families with their time per token and share, prefill and decode
// side by side.
func WriteProfiles(w io.Writer, r *Report) error {
	for _, e := range r.Results {
		p := e.Profile
		if p == nil {
			continue
		}
		fmt.Fprintf(w, "\nprofile at %s: op time per token by layer kind and op family", FormatLength(e.Length))
		if p.Prefill != nil {
			fmt.Fprintf(w, "; prefill %d tokens %.3f ms/token", p.Prefill.Tokens, p.Prefill.MsPerToken)
		}
		if p.Decode != nil {
			fmt.Fprintf(w, "; decode %d steps %.3f ms/token", p.Decode.Tokens, p.Decode.MsPerToken)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "layer kind\top family\tprefill ms/token\tprefill %\tdecode ms/token\tdecode %\t")
		type row struct{ kind, family string }
		var rows []row
		seen := map[row]bool{}
		for _, part := range []*ProfilePart{p.Prefill, p.Decode} {
			if part == nil {
				continue
			}
			for _, o := range part.Ops {
				if r := (row{o.LayerKind, o.Family}); !seen[r] {
					seen[r] = true
					rows = append(rows, r)
				}
			}
		}
		slices.SortStableFunc(rows, func(a, b row) int { return slices.Index(kindOrder, a.kind) - slices.Index(kindOrder, b.kind) })
		opCells := func(part *ProfilePart, r row) (string, string) {
			if part != nil {
				for _, o := range part.Ops {
					if o.LayerKind == r.kind && o.Family == r.family {
						return fmt.Sprintf("%.4f", o.MsPerToken), fmt.Sprintf("%.1f", 100*o.Share)
					}
				}
			}
			return "-", "-"
		}
		kindCells := func(part *ProfilePart, kind string) (string, string) {
			if part != nil {
				for _, k := range part.Kinds {
					if k.LayerKind == kind {
						return fmt.Sprintf("%.4f", k.MsPerToken), fmt.Sprintf("%.1f", 100*k.Share)
					}
				}
			}
			return "-", "-"
		}
		last := ""
		for i, r := range rows {
			if r.kind != last {
				last = r.kind
				layers := 0
				for _, part := range []*ProfilePart{p.Prefill, p.Decode} {
					if part != nil {
						for _, k := range part.Kinds {
							if k.LayerKind == r.kind {
								layers = k.Layers
							}
						}
					}
				}
				pm, ps := kindCells(p.Prefill, r.kind)
				dm, ds := kindCells(p.Decode, r.kind)
				name := r.kind
				if r.kind != KindOutside {
					name = fmt.Sprintf("%s (%d layers)", r.kind, layers)
				}
				if i > 0 {
					fmt.Fprintln(tw, "\t\t\t\t\t\t")
				}
				fmt.Fprintf(tw, "%s\tall\t%s\t%s\t%s\t%s\t\n", name, pm, ps, dm, ds)
			}
			pm, ps := opCells(p.Prefill, r)
			dm, ds := opCells(p.Decode, r)
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s\t\n", r.family, pm, ps, dm, ds)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
