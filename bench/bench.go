// Package bench measures a model's speed: prefill (how fast a fresh prompt
// of N tokens goes through the model) and decode (how fast single tokens are
// generated after N tokens of context), over a sweep of lengths, and writes
// the results as JSON, a table or an SVG chart. It only measures; choosing
// the model, the backend and where the output goes is the caller's job.
package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"petal/engine/model"
	"petal/engine/sample"
)

// Options of a sweep.
type Options struct {
	Model          string // a label for the report: the model's name
	Synthetic      bool   // the weights are random (model.Synthetic)
	PromptLengths  []int  // prefill is measured at each of these lengths
	ContextLengths []int  // decode is measured after each of these lengths of context
	DecodeTokens   int    // timed decode steps per measurement (default 32)
	Repeats        int    // runs per measurement; the report keeps the median (default 1)
	MaxContext     int    // longest length allowed (0: no limit)
	PrefillContext bool   // build decode states by prefilling, not by importing a random state
	Seed           uint64 // for the random prompts and states
	Profile        bool   // also profile each measurement op by op (Entry.Profile)
	Floors         bool   // measure the backend's ceilings first and report each speed against its floor
	// Sampling is how decode picks each next token: the zero value (and
	// any temperature 0) is the greedy pick; otherwise the draw that a
	// run with these settings makes, so that its cost is timed too.
	Sampling sample.Params
}

// SamplingIs says in words how decode picks its tokens.
func SamplingIs(p sample.Params) string {
	if p.Temperature <= 0 {
		return "the greedy pick of the next token"
	}
	parts := []string{fmt.Sprintf("temperature %g", p.Temperature)}
	if p.TopK > 0 {
		parts = append(parts, fmt.Sprintf("top-k %d", p.TopK))
	}
	if p.TopP > 0 && p.TopP < 1 {
		parts = append(parts, fmt.Sprintf("top-p %g", p.TopP))
	}
	if p.MinP > 0 {
		parts = append(parts, fmt.Sprintf("min-p %g", p.MinP))
	}
	return "a sampled next token (" + strings.Join(parts, ", ") + ")"
}

// Decode methods: how the state of N tokens that decode starts from is made.
const (
	MethodImport  = "import"  // random K/V and recurrent state of N tokens imported with Model.Import
	MethodPrefill = "prefill" // N random tokens prefilled through the model
)

// MethodDescription says in words what a decode method did.
func MethodDescription(method string) string {
	switch method {
	case MethodImport:
		return "decode starts from a random state of N tokens imported into the model (no prefill)"
	case MethodPrefill:
		return "decode starts from a state made by prefilling N random tokens"
	}
	return method
}

// Report is the result of a sweep.
type Report struct {
	Machine  Machine   `json:"machine"`
	Model    ModelInfo `json:"model"`
	Settings Settings  `json:"settings"`
	// Ceilings measured in the same run (Options.Floors), where the
	// backend can measure them (backend.Peaks).
	Ceilings *Ceilings `json:"ceilings,omitempty"`
	// LoadSeconds is the time the caller took to make the model ready
	// (SetLoad): reading or building the weights and uploading them.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
	LoadIs      string  `json:"load_description,omitempty"`
	// PeakDeviceBytes is the most device memory seen in use during the
	// sweep (backend.DeviceMemory; 0 for a backend without device memory),
	// sampled after every measurement while its state is still held.
	PeakDeviceBytes int64   `json:"peak_device_bytes,omitempty"`
	Results         []Entry `json:"results"`
	// Ablation compares this sweep with sweeps of the same lengths with one
	// backend option changed each (Ablate).
	Ablation []Ablation `json:"ablation,omitempty"`
	// AblationRepeats, where set, is the runs a measurement of each
	// ablation sweep took, the base backend swept again with as many
	// (AblationBase) for them to be compared with, not this sweep.
	AblationRepeats int             `json:"ablation_repeats,omitempty"`
	AblationBase    []AblationEntry `json:"ablation_base,omitempty"`
}

// ModelInfo describes what was measured.
type ModelInfo struct {
	Name      string `json:"name"`
	Synthetic bool   `json:"synthetic"`
	Shape     Shape  `json:"shape"`
}

// Shape is the part of a model's sizes that decides its speed.
type Shape struct {
	Layers           int `json:"layers"`
	FullAttention    int `json:"full_attention_layers"`
	Hidden           int `json:"hidden"`
	Vocab            int `json:"vocab"`
	QHeads           int `json:"q_heads"`
	KVHeads          int `json:"kv_heads"`
	HeadDim          int `json:"head_dim"`
	LinearKeyHeads   int `json:"linear_key_heads"`
	LinearValueHeads int `json:"linear_value_heads"`
	Experts          int `json:"experts"`
	TopK             int `json:"experts_per_token"`
	ExpertInter      int `json:"moe_intermediate"`
	SharedInter      int `json:"shared_intermediate"`
}

// Settings are the sweep's parameters as they were applied.
type Settings struct {
	DecodeTokens   int    `json:"decode_tokens"`
	Repeats        int    `json:"repeats"`
	Chunk          int    `json:"chunk"`
	MaxContext     int    `json:"max_context,omitempty"`
	DecodeMethod   string `json:"decode_method"`
	DecodeMethodIs string `json:"decode_method_description"`
	// Sampling is how decode picked each token (SamplingIs).
	Sampling string `json:"sampling"`
	Seed     uint64 `json:"seed"`
}

// Entry holds the measurements at one length; either part may be absent.
type Entry struct {
	Length  int      `json:"length"`
	Prefill *Prefill `json:"prefill,omitempty"`
	Decode  *Decode  `json:"decode,omitempty"`
	Profile *Profile `json:"profile,omitempty"` // with Options.Profile
}

// Prefill: time to run Tokens fresh tokens through the model with logits for
// the last one, as a prompt is run before generation.
type Prefill struct {
	Tokens          int       `json:"tokens"`
	Seconds         float64   `json:"seconds"` // median of Runs
	TokensPerSecond float64   `json:"tokens_per_second"`
	Runs            []float64 `json:"runs_seconds"`
	// CompileRuns are the part of each run spent recording and compiling
	// the prompt's programs (CompileSeconds their median): the first run
	// at a length compiles them, as a one-shot prompt does; a later run
	// takes over the state the model kept from the run before, with its
	// programs, unless its caches must grow.
	CompileSeconds float64   `json:"compile_seconds"`
	CompileRuns    []float64 `json:"compile_runs_seconds"`
	// DeviceBytes is the device memory in use right after the prompt,
	// its state still held (a backend on a GPU; 0 elsewhere): the memory a
	// prompt of Tokens needs, the chunk's temporaries included.
	DeviceBytes int64 `json:"device_bytes,omitempty"`
	Floor
}

// Decode: time for Tokens single-token forward passes (each with its logits
// and the pick of the next token, Options.Sampling) after Context tokens. A first step
// before them is not timed: it records the op program and grows the cache.
type Decode struct {
	Context         int       `json:"context"`
	Tokens          int       `json:"tokens"`
	Method          string    `json:"method"`
	Seconds         float64   `json:"seconds"` // median of Runs
	TokensPerSecond float64   `json:"tokens_per_second"`
	Runs            []float64 `json:"runs_seconds"`
	Floor
	// KernelsPerToken is the number of kernel launches of one decode step
	// (backend.LaunchCounter; 0 where the backend does not count them).
	KernelsPerToken int `json:"kernels_per_token,omitempty"`
}

// Run measures the sweep. progress, when set, receives a line after each
// measurement. When ctx ends the sweep stops and the report so far comes
// back with ctx's error.
func Run(ctx context.Context, m *model.Model, o Options, progress func(string)) (*Report, error) {
	if progress == nil {
		progress = func(string) {}
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	method := MethodImport
	if o.PrefillContext {
		method = MethodPrefill
	}
	r := &Report{
		Machine: DescribeMachine(m.Backend().Name()),
		Model:   ModelInfo{Name: o.Model, Synthetic: o.Synthetic, Shape: shapeOf(&m.Dims)},
		Settings: Settings{DecodeTokens: o.DecodeTokens, Repeats: o.Repeats, Chunk: m.Chunk, MaxContext: o.MaxContext,
			DecodeMethod: method, DecodeMethodIs: MethodDescription(method), Sampling: SamplingIs(o.Sampling), Seed: o.Seed},
	}
	sw := &sweep{m: m, o: o, rng: newRand(o.Seed), r: r}
	if o.Floors {
		r.Ceilings = measureCeilings(m.Backend())
		progress(r.Ceilings.Line())
	}
	if err := sw.warmUp(); err != nil {
		return nil, err
	}
	for _, n := range union(o.PromptLengths, o.ContextLengths) {
		e := Entry{Length: n}
		var err error
		if slices.Contains(o.PromptLengths, n) {
			if e.Prefill, err = sw.prefill(ctx, n); err == nil {
				progress(fmt.Sprintf("prefill %7d tokens: %8.3f s  %9.1f tok/s", n, e.Prefill.Seconds, e.Prefill.TokensPerSecond))
			}
		}
		if err == nil && slices.Contains(o.ContextLengths, n) {
			if e.Decode, err = sw.decode(ctx, n, method); err == nil {
				progress(fmt.Sprintf("decode at %7d context: %7.2f ms/token %7.2f tok/s (%s)", n,
					1e3*e.Decode.Seconds/float64(e.Decode.Tokens), e.Decode.TokensPerSecond, method))
			}
		}
		if err == nil && o.Profile {
			e.Profile, err = sw.profile(ctx, n, method)
		}
		sw.floors(&e)
		sw.dropKept()
		// Collect this length's states now, so that neither their memory
		// nor a collection inside a timing lands on the next length.
		runtime.GC()
		if e.Prefill != nil || e.Decode != nil {
			r.Results = append(r.Results, e)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// profile makes the profile of length n: of prefill and decode where those
// were measured at n.
func (sw *sweep) profile(ctx context.Context, n int, method string) (*Profile, error) {
	p := &Profile{}
	var err error
	if slices.Contains(sw.o.PromptLengths, n) {
		if p.Prefill, err = sw.profilePrefill(n); err != nil {
			return nil, err
		}
	}
	if slices.Contains(sw.o.ContextLengths, n) {
		if p.Decode, err = sw.profileDecode(ctx, n, method); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (o *Options) check() error {
	if o.DecodeTokens == 0 {
		o.DecodeTokens = 32
	}
	if o.Repeats == 0 {
		o.Repeats = 1
	}
	switch {
	case len(o.PromptLengths) == 0 && len(o.ContextLengths) == 0:
		return fmt.Errorf("bench: no lengths to measure")
	case o.DecodeTokens < 1:
		return fmt.Errorf("bench: %d decode tokens, want at least 1", o.DecodeTokens)
	case o.Repeats < 1:
		return fmt.Errorf("bench: %d repeats, want at least 1", o.Repeats)
	}
	for _, n := range union(o.PromptLengths, o.ContextLengths) {
		if n < 1 {
			return fmt.Errorf("bench: length %d, want at least 1", n)
		}
		if o.MaxContext > 0 && n > o.MaxContext {
			return fmt.Errorf("bench: length %d exceeds the maximum context of %d", n, o.MaxContext)
		}
	}
	return nil
}

// union is the sorted distinct lengths of both lists.
func union(a, b []int) []int {
	out := append(append([]int(nil), a...), b...)
	sort.Ints(out)
	return slices.Compact(out)
}

func shapeOf(d *model.Dims) Shape {
	full := 0
	for _, f := range d.Full {
		if f {
			full++
		}
	}
	return Shape{Layers: d.Layers, FullAttention: full, Hidden: d.Hidden, Vocab: d.Vocab,
		QHeads: d.QHeads, KVHeads: d.KVHeads, HeadDim: d.HeadDim,
		LinearKeyHeads: d.KeyHeads, LinearValueHeads: d.ValueHeads,
		Experts: d.Experts, TopK: d.TopK, ExpertInter: d.Inter, SharedInter: d.SharedInter}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
